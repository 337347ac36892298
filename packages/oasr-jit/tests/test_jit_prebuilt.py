"""Prebuilt kernels: a cache wheel written from a small host module, installed with pip into a
private directory, loaded with no compiler in a fresh process; mismatched, damaged and
driver-less artifacts refused with a one-time reason; the progress line."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from jit_helpers import HOST_SOURCE, run_python

import oasr_jit
from oasr_jit import gen_jit_spec, parse_arch, prebuilt
from oasr_jit.build import progress_line

SM90 = parse_arch("9.0a")
WHEEL_NAME = f"oasr_jit_cache_sm90-0.1.0-py3-none-{prebuilt._platform_tag()}.whl"
MODULE = "shipped_add"


def _source(directory: Path, addend: int = 1) -> Path:
    src = directory / "add.cc"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(f"#define ADDEND {addend}\n" + HOST_SOURCE)
    return src


def _install(wheel: Path, site: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--target", str(site), str(wheel)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return site


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """``MODULE`` built in a throw-away cache, packaged, installed under ``site`` (on sys.path
    of this process and of `run_python` children through ``env``); the test's own cache is
    empty."""
    src = _source(tmp_path / "src")
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "builder-cache"))
    spec = gen_jit_spec(MODULE, [src])
    spec.build()
    wheel = prebuilt.write_wheel([spec], tmp_path / "wheels", arch=SM90)
    monkeypatch.setenv("OASR_JIT_DIR", str(tmp_path / "jit"))
    site = _install(wheel, tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    oasr_jit.core._loaded.clear()
    prebuilt._reset_for_tests()
    return {
        "src": src,
        "wheel": wheel,
        "site": site,
        "package": site / "oasr_jit_cache_sm90",
        "env": {"PYTHONPATH": f"{site}:{':'.join(sys.path)}"},
    }


def _no_compiler(tmp_path) -> dict:
    """Environment in which any compile fails: no host compiler, no nvcc."""
    return {"CXX": str(tmp_path / "no-such-c++"), "OASR_NVCC": str(tmp_path / "no-such-nvcc")}


def _local_keys(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.glob("*/*")) if root.exists() else []


# ---------------------------------------------------------------------------------------------
# the wheel


def test_wheel_layout_and_record(shipped):
    wheel = shipped["wheel"]
    assert wheel.name == WHEEL_NAME
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = "oasr_jit_cache_sm90-0.1.0.dist-info"
        assert {
            "oasr_jit_cache_sm90/__init__.py",
            "oasr_jit_cache_sm90/manifest.json",
            f"oasr_jit_cache_sm90/lib/{MODULE}.so",
            f"{info}/METADATA",
            f"{info}/WHEEL",
            f"{info}/RECORD",
            f"{info}/entry_points.txt",
        } == names
        assert "Name: oasr-jit-cache-sm90" in zf.read(f"{info}/METADATA").decode()
        assert (
            "[oasr.jit_cache]\nsm90 = oasr_jit_cache_sm90"
            in zf.read(f"{info}/entry_points.txt").decode()
        )
        record = zf.read(f"{info}/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            assert digest == prebuilt._record_hash(zf.read(name)) and int(size) > 0, line
        manifest = json.loads(zf.read("oasr_jit_cache_sm90/manifest.json"))
    entry = manifest["modules"][MODULE]
    assert manifest["arch"] == "sm_90a" and manifest["distribution"] == "oasr-jit-cache-sm90"
    assert set(entry["inputs"]) == set(prebuilt.INPUT_FIELDS)
    assert entry["inputs"]["arch"] is None, "a host module serves every architecture"
    assert entry["cuda"] is None and entry["size"] > 0 and len(entry["sha256"]) == 64
    installed = prebuilt.installed_packages()
    assert [p.label for p in installed] == ["oasr-jit-cache-sm90 0.1.0"]


def test_write_wheel_refuses_an_unbuilt_module(tmp_path):
    spec = gen_jit_spec("never_built", [_source(tmp_path / "s")])
    with pytest.raises(RuntimeError, match="never_built is not built"):
        prebuilt.write_wheel([spec], tmp_path / "w", arch=SM90)


# ---------------------------------------------------------------------------------------------
# loading


def test_fresh_process_loads_from_the_wheel_without_a_compiler(shipped, tmp_path):
    cache = tmp_path / "fresh-cache"
    code = f"""
        import time, tvm_ffi  # imported first: the timing covers the lookup and the load
        from oasr_jit import gen_jit_spec, prebuilt
        start = time.perf_counter()
        module = gen_jit_spec({MODULE!r}, [{str(shipped["src"])!r}]).build_and_load()
        elapsed = time.perf_counter() - start
        assert module.add_one(41) == 42
        spec = gen_jit_spec({MODULE!r}, [{str(shipped["src"])!r}])
        assert prebuilt.source_of(spec) == "oasr-jit-cache-sm90 0.1.0"
        print(f"elapsed={{elapsed:.3f}}")
    """
    env = {**shipped["env"], **_no_compiler(tmp_path), "OASR_JIT_DIR": str(cache)}
    proc = run_python(code, env=env)
    elapsed = float(proc.stdout.split("elapsed=")[1])
    assert elapsed < 1.0, f"loading a shipped module took {elapsed:.2f} s"
    assert "building" not in proc.stderr, proc.stderr
    assert _local_keys(cache) == [], "nothing may be built or keyed locally"

    # the same process with the wheel switched off must compile, which fails without a compiler
    off = run_python(code, env={**env, "OASR_JIT_PREBUILT": "off"}, check=False)
    assert off.returncode != 0 and "no-such-c++" in off.stderr, off.stderr


def test_in_process_load_is_shared_and_named_by_list(shipped, jit_dir):
    spec = gen_jit_spec(MODULE, [shipped["src"]])
    module = spec.build_and_load()
    assert module.add_one(1) == 2
    assert gen_jit_spec(MODULE, [shipped["src"]]).build_and_load() is module
    assert _local_keys(jit_dir) == []
    assert prebuilt.find(spec).path == shipped["package"] / "lib" / f"{MODULE}.so"


def test_key_needs_no_compiler(tmp_path, monkeypatch, sm90):
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    for var, value in _no_compiler(tmp_path).items():
        monkeypatch.setenv(var, value)
    spec = gen_jit_spec("cuda_mod", [cu])
    key = prebuilt.prebuilt_key(spec)
    assert len(key) == 20
    assert prebuilt.spec_inputs(spec)["arch"] == "sm_90a"
    with pytest.raises((RuntimeError, ValueError)):
        spec.key  # the local key names the compilers: it needs them  # noqa: B018
    monkeypatch.setenv("OASR_EXTRA_CUDAFLAGS", "-DX=1")
    assert prebuilt.prebuilt_key(gen_jit_spec("cuda_mod", [cu])) != key, "flags are in the key"


def _rewrite_manifest(package: Path, change) -> None:
    path = package / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest["modules"][MODULE])
    path.write_text(json.dumps(manifest))
    prebuilt._reset_for_tests()


def _consistent(entry: dict, **inputs) -> None:
    """Change ``inputs`` and re-key the entry, as a package built from them would say."""
    entry["inputs"].update(inputs)
    entry["key"] = prebuilt._key_of(MODULE, entry["inputs"])


def _assert_builds_locally_once(shipped, src, capfd, reason: str, addend: int = 1):
    for _ in range(2):  # a second spec object: the reason is not repeated
        module = gen_jit_spec(MODULE, [src]).build_and_load()
        assert module.add_one(1) == 1 + addend
        oasr_jit.core._loaded.clear()
    err = capfd.readouterr().err
    reported = [line for line in err.splitlines() if line.startswith("oasr-jit: prebuilt")]
    start = f"oasr-jit: prebuilt {MODULE} in oasr-jit-cache-sm90 0.1.0 {reason}"
    assert len(reported) == 1, err
    assert reported[0].startswith(start) and reported[0].endswith("; building locally"), err


def test_other_sources_are_never_loaded(shipped, tmp_path, capfd, jit_dir):
    other = _source(tmp_path / "other", addend=2)
    _assert_builds_locally_once(shipped, other, capfd, "was built for other sources", addend=2)
    assert len(_local_keys(jit_dir)) == 1, "the local build goes to the local cache"


def test_other_flags_are_never_loaded(shipped, capfd, monkeypatch):
    monkeypatch.setenv("OASR_EXTRA_CFLAGS", "-DUNUSED=1")
    _assert_builds_locally_once(shipped, shipped["src"], capfd, "was built with other flags")


@pytest.mark.parametrize(
    ("inputs", "reason"),
    [
        ({"arch": "sm_100a"}, "was built for sm_100a (this module is host code)"),
        ({"tvm_ffi": "0.0.1"}, "was built against TVM-FFI 0.0.1 (installed: "),
        ({"cutlass": "3.0.0"}, "was built with CUTLASS 3.0.0 (installed: None)"),
        ({"headers": "0" * 64}, "was built for other headers"),
        ({"format": 999}, "was built with oasr-jit key format 999 (this one: "),
    ],
)
def test_a_manifest_for_other_inputs_is_never_loaded(shipped, capfd, inputs, reason):
    _rewrite_manifest(shipped["package"], lambda e: _consistent(e, **inputs))
    spec = gen_jit_spec(MODULE, [shipped["src"]])
    assert prebuilt.find(spec) is None
    assert reason in capfd.readouterr().err
    assert spec.build_and_load().add_one(1) == 2


def test_a_tampered_manifest_is_never_loaded(shipped, capfd):
    # the key claims to match while the inputs say otherwise
    _rewrite_manifest(shipped["package"], lambda e: e["inputs"].update(sources="0" * 64))
    _assert_builds_locally_once(
        shipped,
        shipped["src"],
        capfd,
        "has a manifest entry whose key does not match its inputs (a damaged manifest)",
    )


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_library_is_refused(shipped, capfd, damage):
    lib = shipped["package"] / "lib" / f"{MODULE}.so"
    data = bytearray(lib.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    lib.write_bytes(bytes(data))
    _assert_builds_locally_once(shipped, shipped["src"], capfd, "has a damaged library (")


def test_a_cuda_artifact_needs_a_driver_of_its_cuda_release(tmp_path, monkeypatch, capfd, sm90):
    """A CUDA artifact whose key matches is refused when the driver is older than the CUDA
    release it was built with (or absent)."""
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    spec = gen_jit_spec("cuda_shipped", [cu])
    inputs = prebuilt.spec_inputs(spec)
    site = tmp_path / "site"
    root = site / "oasr_jit_cache_sm90"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "cuda_shipped.so").write_bytes(b"\x7fELF")
    entry = {"key": prebuilt._key_of(spec.name, inputs), "inputs": inputs, "cuda": "13.0",
             "file": "lib/cuda_shipped.so", "size": 4, "sha256": "0" * 64}  # fmt: skip
    manifest = {
        "manifest_format": prebuilt.MANIFEST_FORMAT,
        "distribution": "oasr-jit-cache-sm90",
        "version": "0.1.0",
        "modules": {spec.name: entry},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    info = site / "oasr_jit_cache_sm90-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: oasr-jit-cache-sm90\n"
                                   "Version: 0.1.0\n")  # fmt: skip
    (info / "entry_points.txt").write_text("[oasr.jit_cache]\nsm90 = oasr_jit_cache_sm90\n")
    monkeypatch.syspath_prepend(str(site))
    for driver, reason in [
        (None, "was built with CUDA 13.0 and no CUDA driver is present"),
        ((12, 8), "was built with CUDA 13.0, newer than this driver supports (CUDA 12.8)"),
    ]:
        prebuilt._reset_for_tests()  # the reason is reported once per module and process
        monkeypatch.setattr(prebuilt, "_driver_cuda_version", lambda d=driver: d)
        assert prebuilt.find(spec) is None
        assert reason in capfd.readouterr().err
    prebuilt._reset_for_tests()
    monkeypatch.setattr(prebuilt, "_driver_cuda_version", lambda: (13, 0))
    assert prebuilt.find(spec) is None, "the driver is fine; the stand-in library is not"
    assert "has a damaged library" in capfd.readouterr().err


def test_an_unreadable_package_is_skipped_with_a_reason(shipped, capfd):
    (shipped["package"] / "manifest.json").write_text("{not json")
    prebuilt._reset_for_tests()
    assert prebuilt.installed_packages() == ()
    assert "cache package oasr-jit-cache-sm90 0.1.0 is unreadable" in capfd.readouterr().err


# ---------------------------------------------------------------------------------------------
# the command line


def test_prebuild_wheel_list_and_status(tmp_path):
    site = tmp_path / "family-site"
    dist = site / "oasr_tiny-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: oasr-tiny\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[oasr.families]\ntiny = tiny_family_reg:FAMILY\n")
    src = _source(tmp_path / "tiny_src")
    (site / "tiny_family_reg.py").write_text(
        "from pathlib import Path\nimport oasr_jit\n"
        "def production_specs(arch):\n"
        f"    return [oasr_jit.gen_jit_spec('tiny_add', [{str(src)!r}])]\n"
        "FAMILY = oasr_jit.Family(name='tiny', version='0.1', module='tiny_family_reg', "
        f"include_dir=Path({str(src.parent)!r}), production_specs=production_specs)\n"
    )
    env = {"PYTHONPATH": f"{site}:{':'.join(sys.path)}", "OASR_JIT_DIR": str(tmp_path / "c1")}

    def cli(*args, extra=None):
        code = f"import sys\nfrom oasr_jit.cli import main\nsys.exit(main({list(args)!r}))"
        return run_python(code, env={**env, **(extra or {})})

    out = cli("jit", "prebuild", "--family", "tiny", "--arch", "9.0a", "--wheel", str(tmp_path))
    assert f"wrote {tmp_path / WHEEL_NAME} (1 modules for sm_90a)" in out.stdout, out.stdout
    installed = _install(tmp_path / WHEEL_NAME, tmp_path / "cache-site")
    fresh = {"PYTHONPATH": f"{installed}:{env['PYTHONPATH']}", "OASR_JIT_DIR": str(tmp_path / "c2")}
    listed = cli("jit", "list", "--family", "tiny", "--arch", "9.0a", extra=fresh).stdout
    assert "tiny_add" in listed and "prebuilt (oasr-jit-cache-sm90 0.1.0)" in listed, listed
    status = cli("jit", "status", extra=fresh).stdout
    assert "prebuilt: oasr-jit-cache-sm90 0.1.0" in status and "1 modules" in status, status


# ---------------------------------------------------------------------------------------------
# the progress line


def test_progress_line_estimates_what_is_left():
    label, op = "oasr_norm_layer_fp16 for sm_90a", "first call of oasr.layer_norm (float16), "
    assert progress_line(label, op, 0, 5, 4.0) == (
        "oasr-jit: building oasr_norm_layer_fp16 for sm_90a "
        "(first call of oasr.layer_norm (float16), 0/5 units, 4 s)"
    )
    assert progress_line(label, op, 2, 5, 40.0).endswith("2/5 units, 40 s, ~60 s left)")
    # units kept from an interrupted build do not count towards the pace
    assert progress_line(label, op, 3, 5, 10.0, kept=2).endswith("3/5 units, 10 s, ~20 s left)")
    assert "left" not in progress_line(label, op, 2, 5, 10.0, kept=2)
    assert "left" not in progress_line(label, op, 5, 5, 10.0)


def test_first_call_names_the_op_and_its_dtypes(host_source, counting_cxx, capfd):
    torch = pytest.importorskip("torch")
    counting_cxx.slow_down(3.5)  # past the 3 s after which a build reports progress
    spec = gen_jit_spec("first_call_dtypes", [host_source])

    @oasr_jit.oasr_api
    def add_half(x, y):
        return spec.build_and_load().add_one(1)

    assert add_half(torch.zeros(2, dtype=torch.float16), y=torch.zeros(1)) == 2
    err = capfd.readouterr().err
    assert (
        "oasr-jit: building first_call_dtypes (first call of oasr.add_half (float16, float32), "
        "0/2 units, "
    ) in err, err
