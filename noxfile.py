"""Every OASR session: tests, jit, lint, wheels, demo, and per family <family> / <family>-sm<NN>.

Each session installs what it needs into its own virtualenv. On a machine with no package index
(the GPU machine) run them on the current interpreter instead, with everything pre-installed:

    nox --no-venv -s <session>        # installs nothing; checks that the packages import

CPU environments pin the CPU build of torch (``TORCH_CPU``), so pip never pulls a CUDA build.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
PACKAGES = ROOT / "packages"
TORCH_CPU = "torch==2.13.0"
TEST_TOOLS = ("pytest>=8", "numpy")
#: The architectures a family's `<family>-sm<NN>` session compiles for: sm<NN> -> the
#: OASR_CUDA_ARCH_LIST form (from 9.0 on the architecture-specific ``a`` target, as oasr_jit.arch
#: builds it). A100 / A10 / L40S, H100 / H200, B200, RTX 50xx.
FAMILY_ARCHS = {
    "80": "8.0",
    "86": "8.6",
    "89": "8.9",
    "90": "9.0a",
    "100": "10.0a",
    "120": "12.0a",
}
#: `<family>-sm<NN>` posargs that go to `oasr jit prebuild` (with their value); the rest go to
#: pytest: ``nox -s gemm-sm120 -- --filter oasr_gemm_fp16_ -x``
PREBUILD_OPTIONS = ("--filter", "--module", "--jobs")

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False


def _no_venv(session: nox.Session) -> bool:
    return session.venv_backend == "none"


def _python(session: nox.Session) -> str:
    return sys.executable if _no_venv(session) else "python"


def _local_packages() -> list[Path]:
    """Every package directory, the core first (others depend on it)."""
    found = sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").is_file())
    return sorted(found, key=lambda p: (p.name != "oasr-jit", p.name == "oasr-kernels", p.name))


def _with_local_dependencies(packages: tuple[Path, ...]) -> list[Path]:
    """The packages and the local packages they depend on (oasr-gemm: oasr-cutlass), which pip
    cannot find on the package index: nothing of OASR is published yet."""
    local = {p.name: p for p in _local_packages()}
    out, todo = [], list(packages)
    while todo:
        pkg = todo.pop(0)
        if pkg in out:
            continue
        out.append(pkg)
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        for req in meta["project"].get("dependencies", []):
            name = re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]
            if name in local:
                todo.append(local[name])
    return out


def _families() -> dict[str, Path]:
    """Families registered in the repository: entry point name -> package directory."""
    out = {}
    for pkg in _local_packages():
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        eps = meta.get("project", {}).get("entry-points", {}).get("oasr.families", {})
        for name in eps:
            out[name] = pkg
    return out


def _import_name(pkg: Path) -> str:
    """What the package's wheel holds (oasr-kernels: oasr)."""
    meta = tomllib.loads((pkg / "pyproject.toml").read_text())
    return Path(meta["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"][0]).name


def _install(session: nox.Session, *packages: Path, extra: tuple[str, ...] = ()) -> None:
    """Install torch (CPU), test tools and the given local packages (editable) with the local
    packages they depend on; everything else comes from their declared dependencies.

    With --no-venv nothing is installed: the current interpreter must already have them (on the
    GPU machine, `bash .device/setup.sh` does that); we only check that they import."""
    packages = tuple(_with_local_dependencies(packages))
    if _no_venv(session):
        modules = ["pytest", "tvm_ffi"] + [_import_name(p) for p in packages]
        code = "; ".join(f"import {m}" for m in modules)
        session.run(_python(session), "-c", code, silent=True)
        return
    session.install(TORCH_CPU, *TEST_TOOLS, *extra)
    args = []
    for pkg in packages:
        args += ["-e", str(pkg)]
    session.install(*args)


def _pytest(session: nox.Session, *args: str) -> None:
    session.run(_python(session), "-m", "pytest", *args, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's CPU tests in one environment (GPU tests run too where a GPU is present)."""
    packages = _local_packages()
    _install(session, *packages)
    test_dirs = [str(p / "tests") for p in packages if (p / "tests").is_dir()]
    _pytest(session, str(ROOT / "tests"), *test_dirs)


@nox.session
def jit(session: nox.Session) -> None:
    """The JIT core's tests."""
    _install(session, PACKAGES / "oasr-jit")
    _pytest(session, str(PACKAGES / "oasr-jit" / "tests"))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the repository."""
    if not _no_venv(session):
        session.install("ruff")
    session.run("ruff", "check", str(ROOT))
    session.run("ruff", "format", "--check", str(ROOT))


@nox.session
def demo(session: nox.Session) -> None:
    """`oasr doctor`, a host module, a CUDA module compiled for sm_90a, and on a GPU a kernel
    launched eagerly and inside CUDA-graph capture."""
    _install(session, *_local_packages())
    session.run(_python(session), "-m", "oasr_jit.cli", "doctor")
    session.run(_python(session), str(ROOT / "examples" / "demo.py"))


FIRST_CUTLASS_BUILD = """
import sys, tempfile
from pathlib import Path
import oasr_jit
from oasr_jit import env
info = env.require_cutlass()
assert info.source == "oasr-cutlass" and sys.argv[1] in str(info.include_dirs[0]), info
src = Path(tempfile.mkdtemp()) / "first_cutlass.cu"
src.write_text(
    "#include <cute/tensor.hpp>\\n#include <cutlass/version.h>\\n"
    "#include <cutlass/util/packed_stride.hpp>\\n"
    "__global__ void k(cutlass::half_t* x) { x[0] = cutlass::half_t(CUTLASS_MAJOR); }\\n"
)
oasr_jit.gen_jit_spec("wheels_first_cutlass", [src], use_cutlass=True).build()
print(f"CUTLASS {info.version} from {info.source}: a CUTLASS unit compiled for sm_90a")
"""


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every wheel into dist/, install them (not editable) into a clean env as a user does
    (`pip install --find-links dist oasr-kernels`), compile a CUTLASS unit against the installed
    oasr-cutlass headers (no GPU), run the tests from the wheels."""
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir()
    packages = _local_packages()
    env = {}
    if _no_venv(session):
        # No index (the GPU machine, whose python is itself a venv): build without isolation,
        # install the wheels into a private directory first on PYTHONPATH, so they shadow any
        # editable install while torch, TVM-FFI and pytest come from the interpreter.
        python = _python(session)
        for pkg in packages:
            session.run(python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(dist), str(pkg), silent=True)  # fmt: skip
        site = Path(tempfile.mkdtemp(prefix="oasr-wheels-site-"))
        session.run(python, "-m", "pip", "install", "--no-index", "--no-deps", "--target",
                    str(site), *map(str, sorted(dist.glob("*.whl"))), silent=True)  # fmt: skip
        env["PYTHONPATH"] = str(site)
        installed_under = str(site)
    else:
        session.install("pip", "hatchling")
        for pkg in packages:
            session.run("python", "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(pkg),
                        silent=True)  # fmt: skip
        session.install(TORCH_CPU, *TEST_TOOLS)
        # As a user would: the metapackage by name; every other wheel (oasr-cutlass through
        # oasr-gemm) comes as a declared dependency.
        session.install("--find-links", str(dist), "oasr-kernels")
        python = "python"
        installed_under = "site-packages"
    names = [p.name for p in packages]  # every wheel was installed
    check = (
        "import importlib.metadata as m, oasr_jit; "
        f"assert {installed_under!r} in oasr_jit.__file__, oasr_jit.__file__; "
        f"[m.distribution(n) for n in {names!r}]"
    )
    session.run(python, "-c", check, env=env, silent=True)
    # The first CUTLASS build (compile only): the headers come from the installed oasr-cutlass.
    jit_dir = tempfile.mkdtemp(prefix="oasr-wheels-jit-")
    session.run(python, "-c", FIRST_CUTLASS_BUILD, installed_under,
                env={**env, "OASR_JIT_DIR": jit_dir, "OASR_CUDA_ARCH_LIST": "9.0a"})  # fmt: skip
    # Each package's tests run from a copy outside the repository: only the wheel is importable.
    for pkg in packages:
        if not (pkg / "tests").is_dir():
            continue
        target = Path(tempfile.mkdtemp(prefix="oasr-wheels-tests-")) / pkg.name
        shutil.copytree(pkg / "tests", target)
        session.run(python, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(target),
                    str(target), *session.posargs, env=env)  # fmt: skip


@nox.session(name="aot-sm90")
def aot_sm90(session: nox.Session) -> None:
    """Prebuild every family's production modules for 9.0a and package them as the wheel
    oasr-jit-cache-sm90 in dist/aot/ (extra arguments go to `oasr jit prebuild`, e.g.
    ``-- --family norm`` or ``-- --module oasr_norm_layer_fp16``)."""
    _install(session, *_local_packages())
    out = ROOT / "dist" / "aot"
    shutil.rmtree(out, ignore_errors=True)
    session.run(_python(session), "-m", "oasr_jit.cli", "jit", "prebuild", "--arch", "9.0a",
                "--wheel", str(out), *session.posargs)  # fmt: skip


def _family_session(name: str, pkg: Path) -> None:
    @nox.session(name=name)
    def family(session: nox.Session) -> None:
        _install(session, PACKAGES / "oasr-jit", pkg)
        _pytest(session, str(pkg / "tests"))

    family.__doc__ = f"The {name} family's tests (CPU; GPU tests too where a GPU is present)."


def _split_prebuild_args(posargs: list[str]) -> tuple[list[str], list[str]]:
    """(the `oasr jit prebuild` options among ``posargs``, the rest: pytest's)."""
    prebuild, rest = [], []
    args = iter(posargs)
    for arg in args:
        if arg in PREBUILD_OPTIONS:
            prebuild += [arg, next(args, "")]
        elif arg.split("=", 1)[0] in PREBUILD_OPTIONS:
            prebuild.append(arg)
        else:
            rest.append(arg)
    return prebuild, rest


def _family_arch_session(name: str, pkg: Path, sm: str, arch: str) -> None:
    @nox.session(name=f"{name}-sm{sm}")
    def family_arch(session: nox.Session) -> None:
        _install(session, PACKAGES / "oasr-jit", pkg)
        prebuild, pytest_args = _split_prebuild_args(list(session.posargs))
        session.run(_python(session), "-m", "oasr_jit.cli", "jit", "prebuild", "--family", name,
                    "--arch", arch, *prebuild)  # fmt: skip
        if not _gpu_matches(session, sm):
            session.log(
                f"GPU tests of {name} SKIPPED: no sm_{sm} GPU on this machine "
                f"(the production modules above were compiled for {arch})"
            )
            return
        session.run(_python(session), "-m", "pytest", "-m", "gpu", str(pkg / "tests"),
                    *pytest_args)  # fmt: skip

    family_arch.__doc__ = (
        f"Compile the {name} family's production modules for {arch}, then run its GPU tests if "
        f"an sm_{sm} GPU is present (posargs: {', '.join(PREBUILD_OPTIONS)} go to the build, "
        "the rest to pytest)."
    )


def _family_bench_session(name: str, pkg: Path) -> None:
    @nox.session(name=f"bench-{name}")
    def family_bench(session: nox.Session) -> None:
        if not _no_venv(session):
            session.error(
                f"bench-{name} times a GPU with the interpreter's CUDA build of torch: run "
                f"`nox --no-venv -s bench-{name}` where the packages (and their [bench] extra) "
                "are installed"
            )
        _install(session, PACKAGES / "oasr-jit", pkg)
        session.run(_python(session), "-m", "oasr_jit.cli", "bench", name, "--publish",
                    str(ROOT / "docs" / "perf"), *session.posargs)  # fmt: skip

    family_bench.__doc__ = (
        f"Measure the {name} family on this GPU and publish it: docs/perf/<gpu>_{name}.json and "
        ".png, and the Markdown generated from them (extra arguments go to `oasr bench`)."
    )


def _gpu_matches(session: nox.Session, sm: str) -> bool:
    code = (
        "import torch; print('GPU=' + ('%d%d' % torch.cuda.get_device_capability() "
        "if torch.cuda.is_available() else 'none'))"
    )
    output = session.run(_python(session), "-c", code, silent=True) or ""
    return f"GPU={sm}" in output


for _name, _pkg in _families().items():
    _family_session(_name, _pkg)
    _family_bench_session(_name, _pkg)
    for _sm, _arch in FAMILY_ARCHS.items():
        _family_arch_session(_name, _pkg, _sm, _arch)
