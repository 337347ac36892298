"""The ``oasr`` command: ``oasr doctor``, ``oasr jit list|status|prebuild|prune|clear|
forget-failures`` and ``oasr bench <family>``; installed packages add subcommands through the
``oasr.cli`` entry points.

Nothing here imports torch, except ``oasr doctor --selftest`` (it runs a kernel) and ``oasr bench``
(it times them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import __version__, env
from .bench import DEFAULT_REPS as DEFAULT_BENCH_REPS
from .families import CLI_ENTRY_POINT_GROUP, discover_families, entry_points


class _Parser(argparse.ArgumentParser):
    """Bad arguments: exit 2 with one line naming the problem and where help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _ago(t: float) -> str:
    if t <= 0:
        return "never"
    s = max(0.0, time.time() - t)
    if s < 120:
        return f"{s:.0f} s ago"
    if s < 7200:
        return f"{s / 60:.0f} min ago"
    if s < 172800:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


def _probe(fn):
    try:
        return fn(), None
    except Exception as exc:
        return None, str(exc).splitlines()[0]


# ---------------------------------------------------------------------------------------------
# oasr doctor


def cmd_doctor(args) -> int:
    from . import arch, toolchain
    from .cache import inventory

    rows: list[tuple[str, str]] = []
    problems = 0

    driver = arch.driver_info()
    if driver is None:
        rows.append(("GPU", "none visible (no libcuda.so.1 or no device): compile-only machine"))
    else:
        rows.append(("driver", f"CUDA {driver.version}"))
        for gpu in driver.gpus:
            rows.append((f"GPU {gpu.index}", f"{gpu.name}, {gpu.arch.sm}, {gpu.num_sms} SMs"))
    target, error = _probe(arch.target_arch)
    rows.append(("target arch", target.sm if target else f"unknown: {error}"))

    nvcc, error = _probe(toolchain.nvcc)
    if nvcc:
        rows.append(("nvcc", f"{nvcc.path} (CUDA {nvcc.release}, from {nvcc.source})"))
        rows.append(("CUDA toolkit", str(nvcc.toolkit_root)))
    else:
        rows.append(("nvcc", f"NOT FOUND: {error}"))
        problems += 1
    cxx, error = _probe(toolchain.host_compiler)
    if cxx:
        rows.append(("host compiler", f"{cxx.path} ({cxx.identity.splitlines()[0]})"))
    else:
        rows.append(("host compiler", f"NOT FOUND: {error}"))
        problems += 1
    if nvcc:
        arches = toolchain.buildable_arches(nvcc)
        if arches:
            rows.append(("nvcc builds", ", ".join(a.name for a in arches)))
        if target:
            reason = toolchain.arch_unsupported_reason(nvcc, target)
            if reason:
                rows.append(("target arch", f"NOT BUILDABLE: {reason}"))
                problems += 1
        if (
            driver is not None
            and _version_tuple(nvcc.release)[:1] > _version_tuple(driver.version)[:1]
        ):
            rows.append(
                (
                    "nvcc vs driver",
                    f"MISMATCH: modules built with CUDA {nvcc.release} need a driver for CUDA "
                    f"{nvcc.release.split('.')[0]}.x; this one supports {driver.version}: update "
                    "the NVIDIA driver, or point CUDA_HOME at an older toolkit",
                )
            )
            problems += 1
    torch_row, torch_problem = _torch_row(driver)
    rows.append(("torch", torch_row))
    problems += torch_problem
    tvm, error = _probe(env.tvm_ffi_info)
    rows.append(("TVM-FFI", f"{tvm.version} ({tvm.root})" if tvm else f"NOT FOUND: {error}"))
    problems += tvm is None
    cutlass, error = _probe(env.cutlass_info)
    if cutlass:
        source = f"{cutlass.source}, {cutlass.include_dirs[0]}"
        rows.append(("CUTLASS", f"{cutlass.version} (from {source})"))
    else:
        rows.append(("CUTLASS", f"not found ({error or env.CUTLASS_FIX})"))

    root = env.jit_dir()
    entries = inventory()
    size = sum(e.size_bytes for e in entries)
    rows.append(("JIT cache", f"{root} ({len(entries)} keys, {_human_bytes(size)})"))
    families, error = _probe(discover_families)
    if families is None:
        rows.append(("families", f"ERROR: {error}"))
        problems += 1
    elif not families:
        rows.append(("families", "none installed (pip install oasr-<family>)"))
    else:
        for fam in families.values():
            rows.append((f"family {fam.name}", f"{fam.module} {fam.version}"))
    set_vars = [f"{v}={os.environ[v]}" for v in env.ENV_VARS if os.environ.get(v)]
    rows.append(("environment", ", ".join(set_vars) if set_vars else "(no OASR variables set)"))

    width = max(len(k) for k, _ in rows)
    print(f"oasr {__version__}")
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")

    if args.selftest:
        problems += _run_selftest()
    return 1 if problems else 0


def _version_tuple(text: str) -> tuple[int, ...]:
    """``"12.8"`` -> ``(12, 8)``; () for text without a leading number."""
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        if not digits or digits != piece[: len(digits)]:
            break
        parts.append(int(digits))
    return tuple(parts)


TORCH_INSTALL_URL = "https://pytorch.org/get-started/locally/"


def _torch_row(driver) -> tuple[str, int]:
    """(the doctor's torch line, 1 if it is a problem else 0). torch is described from its
    ``version.py``, not imported."""
    info, error = _probe(env.torch_info)
    if info is None:
        if error:
            return f"UNREADABLE: {error}", 1
        return (
            "NOT INSTALLED: every op takes torch tensors; `pip install torch` (a CUDA build for "
            f"GPUs: {TORCH_INSTALL_URL})",
            1,
        )
    gpus = driver is not None and bool(driver.gpus)
    if info.cuda is None:
        if info.hip is not None:
            return f"{info.version} (a ROCm {info.hip} build: OASR's kernels need a CUDA build)", 1
        text = f"{info.version} (a CPU-only build: GPU ops need a CUDA build, {TORCH_INSTALL_URL})"
        return text, int(gpus)
    text = f"{info.version} (built with CUDA {info.cuda})"
    if driver is None:
        return f"{text}; no CUDA driver here to run it", 0
    have, need = _version_tuple(driver.version), _version_tuple(info.cuda)
    if have >= need:
        return f"{text}; matches the driver (CUDA {driver.version})", 0
    if have[:1] == need[:1]:
        return (
            f"{text}; the driver supports CUDA {driver.version}: it runs through CUDA minor "
            "version compatibility, but features newer than the driver fail; update the driver",
            0,
        )
    return (
        f"{text}; MISMATCH: the driver supports CUDA {driver.version} only: update the NVIDIA "
        f"driver, or install a torch build for CUDA {driver.version} or older "
        f"({TORCH_INSTALL_URL})",
        1,
    )


def _run_selftest() -> int:
    """Build and run the core's self-test kernels; returns the number of failures."""
    from .selftest import gen_selftest_module

    try:
        import torch
    except ImportError:
        print("  selftest          skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("  selftest          skipped: no CUDA GPU visible to torch")
        return 0
    module = gen_selftest_module().build_and_load()
    x = torch.randn(37, 1000, device="cuda")
    out = torch.full((37,), float("nan"), device="cuda")
    module.row_sum(out, x)
    ok = torch.allclose(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-3)
    print(
        f"  selftest          row_sum on {torch.cuda.get_device_name()}: {'ok' if ok else 'WRONG'}"
    )
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# oasr jit ...


def _selected_families(names: list[str] | None):
    families = discover_families()
    if not names:
        return list(families.values())
    unknown = [n for n in names if n not in families]
    if unknown:
        known = ", ".join(families) or "none installed"
        raise SystemExit(f"oasr: error: unknown family {', '.join(unknown)} (installed: {known})")
    return [families[n] for n in names]


def _usage_error(message: str):
    """Exit 2 with one line: the request cannot be served as asked."""
    print(f"oasr: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _pin_arch(arch_text: str | None):
    """The architecture to list or build for (``--arch`` pins it for the process), refused up
    front (exit 2) when it is not one or the CUDA toolkit cannot build for it."""
    from . import arch, toolchain

    if arch_text:
        try:
            parsed = arch.parse_arch(arch_text)
        except ValueError as exc:
            _usage_error(f"--arch: {exc}")
        os.environ["OASR_CUDA_ARCH_LIST"] = parsed.name
    target = arch.target_arch()
    try:
        compiler = toolchain.nvcc()
    except (RuntimeError, ValueError):
        return target  # no nvcc: the CUDA modules' requirement check names it
    reason = toolchain.arch_unsupported_reason(compiler, target)
    if reason is not None:
        _usage_error(reason)
    return target


#: the architectures asked for when a family declares none: those of OASR's targets
_PROBE_ARCHES = ("7.5", "8.0", "8.6", "8.9", "9.0a", "10.0a", "10.3a", "12.0a")


def _candidate_arches() -> list:
    from . import arch, toolchain

    try:
        found = toolchain.buildable_arches(toolchain.nvcc())
    except (RuntimeError, ValueError):
        found = None
    return found or [arch.parse_arch(a) for a in _PROBE_ARCHES]


def _served_arches(fam) -> list:
    """The architectures a family builds production modules for."""
    from . import arch

    if fam.supported_compute_capability:
        return [arch.CudaArch(cc // 10, cc % 10) for cc in fam.supported_compute_capability]
    served = []
    for candidate in _candidate_arches():
        try:
            if list(fam.production_specs(candidate)):
                served.append(candidate)
        except Exception:
            continue
    return served


def _family_specs(fam, target) -> tuple[list, str]:
    """(the family's production specs for ``target``, why there are none: "" when there are)."""
    refused = fam.unsupported_reason(target)
    if refused is not None:
        served = ", ".join(a.sm for a in _served_arches(fam))
        return [], f"does not serve {target.sm} (serves {served})"
    specs = list(fam.production_specs(target))
    if specs:
        return specs, ""
    served = [a.sm for a in _served_arches(fam) if a[:2] != target[:2]]
    why = f"serves {', '.join(served)}" if served else "it builds no modules for any architecture"
    return [], f"no production modules for {target.sm} ({why})"


def _select(specs: list, modules: list[str] | None, filters: list[str] | None, target) -> list:
    """The specs named by ``--module`` (exact) or holding a ``--filter`` substring; all of them
    when neither is given. An unknown name or a filter matching nothing exits 2."""
    import difflib

    if not modules and not filters:
        return specs
    names = [s.name for s in specs]
    for name in modules or ():
        if name not in names:
            close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
            close += [n for n in names if name.lower() in n.lower() and n not in close][:5]
            hint = f"close: {', '.join(close)}" if close else "`oasr jit list` names them"
            _usage_error(
                f"--module {name}: no production module of that name for {target.sm} ({hint})"
            )
    for pattern in filters or ():
        if not any(pattern.lower() in n.lower() for n in names):
            _usage_error(
                f"--filter {pattern}: no production module for {target.sm} has it in its name "
                "(`oasr jit list` names them)"
            )
    wanted = set(modules or ())
    patterns = [p.lower() for p in filters or ()]
    return [s for s in specs if s.name in wanted or any(p in s.name.lower() for p in patterns)]


def _collect(args, target) -> tuple[list, list[tuple], list[str]]:
    """(selected specs, [(family, its selected specs, its production count, why none)], the
    reasons of families that build nothing for ``target``)."""
    families = _selected_families(args.family)
    per_family, reasons = [], []
    for fam in families:
        specs, why = _family_specs(fam, target)
        per_family.append((fam, specs, why))
        if why:
            reasons.append(f"{fam.name}: {why}")
    everything = [s for _, specs, _ in per_family for s in specs]
    chosen = {id(s) for s in _select(everything, args.module, args.filter, target)}
    rows = [
        (fam, [s for s in specs if id(s) in chosen], len(specs), why)
        for fam, specs, why in per_family
    ]
    selected = [s for _, specs, _, _ in rows for s in specs]
    return selected, rows, reasons


def _missing_line(missing, total: int) -> str:
    return "; ".join(
        f"{len(m.modules)} of {total} selected modules need {m.what}: {m.problem}" for m in missing
    )


def cmd_jit_list(args) -> int:
    from .core import check_requirements
    from .elf import is_complete_shared_object
    from .prebuilt import prebuilt_key, source_of

    if not discover_families():
        print("no OASR families installed (pip install oasr-<family>)")
        return 0
    target = _pin_arch(args.arch)
    selected, rows, _ = _collect(args, target)
    missing = check_requirements(selected)
    lacking = {name: m.what for m in missing for name in m.modules}
    print(f"production modules for {target.sm}:")
    for fam, specs, count, why in rows:
        if why:
            print(f"  {fam.name} ({fam.module} {fam.version}): {why}")
            continue
        if not specs:
            continue
        shown = f"{len(specs)} of {count}" if len(specs) != count else f"{count}"
        print(f"  {fam.name} ({fam.module} {fam.version}): {shown} modules")
        for spec in specs:
            shipped = source_of(spec)
            if shipped is not None:
                print(f"    {spec.name:<40} {prebuilt_key(spec)}  prebuilt ({shipped})")
                continue
            if spec.name in lacking:
                print(f"    {spec.name:<40} (no key: needs {lacking[spec.name]})")
                continue
            built = "built" if is_complete_shared_object(spec.lib_path) else "not built"
            print(f"    {spec.name:<40} {spec.key}  {built}")
    if missing:
        print(f"missing: {_missing_line(missing, len(selected))}")
    return 0


def _cache_package_rows() -> list[dict]:
    from .prebuilt import installed_packages

    return [
        {
            "distribution": p.distribution,
            "version": p.version,
            "path": str(p.root),
            "modules": sorted(p.modules),
        }
        for p in installed_packages()
    ]


def cmd_jit_status(args) -> int:
    from .cache import inventory

    entries = inventory()
    packages = _cache_package_rows()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "module": e.module,
                        "key": e.key,
                        "state": e.state,
                        "size_bytes": e.size_bytes,
                        "last_used": e.last_used,
                        "holder": e.holder,
                        "path": str(e.path),
                    }
                    for e in entries
                ]
                + [
                    {
                        "module": m,
                        "state": "prebuilt",
                        "package": f"{p['distribution']} {p['version']}",
                        "path": p["path"],
                    }
                    for p in packages
                    for m in p["modules"]
                ],
                indent=1,
            )
        )
        return 0
    for p in packages:
        print(
            f"prebuilt: {p['distribution']} {p['version']} ({p['path']}): "
            f"{len(p['modules'])} modules; `oasr jit list` says which of them this process "
            "loads from it"
        )
    root = env.jit_dir()
    print(
        f"JIT cache {root}: {len(entries)} keys, {_human_bytes(sum(e.size_bytes for e in entries))}"
    )
    if not entries:
        return 0
    width = max(len(e.module) for e in entries)
    from .cache import finished_objects

    for e in entries:
        extra = f"  locked by {e.holder}" if e.state == "building" else ""
        if e.state == "incomplete":
            kept = finished_objects(e.path)
            if kept:
                extra = f"  {kept} objects kept: the next build resumes"
        print(
            f"  {e.module:<{width}}  {e.key}  {e.state:<10}  {_human_bytes(e.size_bytes):>9}  "
            f"used {_ago(e.last_used)}{extra}"
        )
    counts = {
        s: sum(e.state == s for e in entries) for s in ("built", "failed", "building", "incomplete")
    }
    print("  " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return 0


def cmd_jit_prebuild(args) -> int:
    from .build import BatchProgress, set_batch
    from .cache import finished_objects
    from .core import check_requirements
    from .errors import JitBuildError

    if args.jobs is not None:
        if args.jobs < 1:
            raise SystemExit("oasr: error: --jobs must be at least 1")
        os.environ["MAX_JOBS"] = str(args.jobs)
    if not discover_families() or not _selected_families(args.family):
        print("no OASR families installed: nothing to prebuild")
        return 0
    target = _pin_arch(args.arch)
    # A family named with --family that does not serve the architecture refuses the build.
    refusals = [r for f in _selected_families(args.family) if (r := f.unsupported_reason(target))]
    if args.family and refusals:
        _usage_error("; ".join(refusals))
    specs, rows, reasons = _collect(args, target)
    narrowed = bool(args.module or args.filter)
    for fam, family_specs, count, why in rows:
        if why:
            print(f"{fam.name}: {why}", flush=True)
        elif not narrowed:
            print(f"{fam.name}: {count} modules for {target.sm}", flush=True)
        elif family_specs:
            print(f"{fam.name}: {len(family_specs)} of {count} modules for {target.sm}", flush=True)
    if not specs:
        _usage_error(f"nothing to build for {target.sm}: " + "; ".join(reasons))
    missing = check_requirements(specs)
    if missing:
        print(
            f"oasr: error: {_missing_line(missing, len(specs))} (nothing was compiled)",
            file=sys.stderr,
        )
        return 1

    progress = BatchProgress(len(specs))

    def build(spec) -> tuple[bool, str]:
        """(failed, the line to print) of one module."""
        set_batch(progress)
        start = time.monotonic()
        was_built = spec.is_built
        kept = 0 if was_built else finished_objects(spec.key_dir)
        try:
            spec.build()
        except (JitBuildError, RuntimeError) as exc:
            return True, f"  FAILED {spec.name}: {str(exc).splitlines()[0]}"
        finally:
            progress.finished()
            set_batch(None)
        verdict = "cached" if was_built else f"built in {time.monotonic() - start:.1f} s"
        if kept:
            verdict += f" (resumed: kept {kept} of {len(spec.sources)} objects)"
        return False, f"  {spec.name:<40} {spec.key}  {verdict}"

    # The modules build side by side: concurrent builds share one budget of compiler jobs
    # (build.py), so modules of a few units each fill the machine together.
    failures = 0
    with ThreadPoolExecutor(max(1, len(specs))) as pool:
        for failed, line in pool.map(build, specs):
            failures += failed
            print(line, flush=True)
    if failures:
        print(f"{failures} module(s) failed to build", file=sys.stderr)
        if args.wheel:
            print("no wheel written: every selected module must build", file=sys.stderr)
        return 1
    if args.wheel:
        from .prebuilt import write_wheel

        wheel = write_wheel(specs, Path(args.wheel), arch=target, version=args.wheel_version)
        print(f"wrote {wheel} ({len(specs)} modules for {target.sm})", flush=True)
    return 0


def cmd_jit_prune(args) -> int:
    from .cache import prune

    removed, busy = prune(keep=args.keep, unused_days=args.unused_days, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for e in removed:
        print(
            f"{verb} {e.module}/{e.key} ({e.state}, {_human_bytes(e.size_bytes)}, "
            f"used {_ago(e.last_used)})"
        )
    for e in busy:
        print(f"kept {e.module}/{e.key}: its build lock is held ({e.holder or 'in use'})")
    total = sum(e.size_bytes for e in removed)
    print(f"{verb} {len(removed)} keys, {_human_bytes(total)}")
    return 0


def cmd_jit_clear(args) -> int:
    from .cache import clear_cache

    removed, busy = clear_cache()
    print(
        f"removed {len(removed)} keys from {env.jit_dir()}"
        + (f"; kept {len(busy)} being built" if busy else "")
    )
    return 0


def cmd_jit_forget_failures(args) -> int:
    from .cache import inventory

    count = 0
    for e in inventory():
        if e.state == "failed":
            (e.path / f"{e.module}.so.failed").unlink(missing_ok=True)
            count += 1
    print(f"forgot {count} failed builds; the next use of each builds it again")
    return 0


# ---------------------------------------------------------------------------------------------
# oasr bench <family>


def _check_bench_args(args) -> None:
    """Everything that can be refused before torch is imported or a case is timed."""
    from . import bench

    if args.reps < 1:
        raise SystemExit(f"oasr: error: --reps must be at least 1, got {args.reps}")
    if args.plot and Path(args.plot).suffix.lower() != ".png":
        raise SystemExit(f"oasr: error: --plot must name a .png file, got {args.plot}")
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path and not Path(path).resolve().parent.is_dir():
            raise SystemExit(f"oasr: error: {option} {path}: its directory does not exist")
    if args.publish and not Path(args.publish).is_dir():
        raise SystemExit(f"oasr: error: --publish {args.publish}: no such directory")
    families = bench.bench_families()
    if args.family not in families:
        known = ", ".join(families) or "none installed"
        raise SystemExit(
            f"oasr: error: no benchmark routines for family {args.family!r} (installed: {known})"
        )
    if args.plot or args.publish:
        try:
            bench.require_matplotlib()
        except ImportError as exc:
            option = "--plot" if args.plot else "--publish"
            raise SystemExit(f"oasr: error: {option}: {exc}") from exc


def _print_progress(idx: int, total: int, result: dict) -> None:
    if result["error"]:
        verdict = f"FAILED: {result['error']}"
    else:
        verdict = (
            f"{result['oasr_us']:.2f} µs vs {result['peer_us']:.2f} µs ({result['peer_name']}): "
            f"{result['ratio']:.2f}x"
        )
    print(f"[{idx + 1}/{total}] {result['name']}: {verdict}", file=sys.stderr, flush=True)


def cmd_bench(args) -> int:
    from . import bench

    _check_bench_args(args)
    if args.list:
        for case in bench.collect_cases(args.family, args.suite, args.filter):
            print(case.name)
        return 0
    header, results = bench.run(
        args.family, args.suite, args.filter, reps=args.reps, progress=_print_progress
    )
    print(bench.format_header(header))
    print()
    print(bench.format_table(results))
    if args.json:
        bench.write_json(args.json, header, results)
        print(f"wrote {args.json}")
    if args.plot:
        bench.plot(args.plot, results, header)
        print(f"wrote {args.plot}")
    if args.publish:
        for path in bench.publish(args.publish, header, results):
            print(f"wrote {path}")
    return 1 if any(r["error"] for r in results) else 0


# ---------------------------------------------------------------------------------------------


def _add_selection_arguments(p) -> None:
    p.add_argument("--family", action="append", help="only this family (repeatable)")
    p.add_argument("--arch", help="architecture, e.g. 9.0a (default: OASR_CUDA_ARCH_LIST or GPU)")
    p.add_argument(
        "--module",
        action="append",
        metavar="NAME",
        help="only this module, named as `oasr jit list` prints it (repeatable)",
    )
    p.add_argument(
        "--filter",
        action="append",
        metavar="SUBSTRING",
        help="only modules whose name holds it, case-insensitive (repeatable: any of them)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="oasr", description="OASR: GPU kernels for speech recognition.")
    parser.add_argument("--version", action="version", version=f"oasr {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    doctor = sub.add_parser(
        "doctor", help="report GPU, arch, driver, compilers, TVM-FFI, CUTLASS, cache, families"
    )
    doctor.add_argument(
        "--selftest", action="store_true", help="also build and run the core's test kernel (GPU)"
    )
    doctor.set_defaults(func=cmd_doctor)

    jit = sub.add_parser("jit", help="inspect and manage the JIT cache")
    jsub = jit.add_subparsers(dest="jit_command", metavar="ACTION", parser_class=_Parser)
    jit.set_defaults(func=lambda a: (jit.print_help(), 2)[1])

    p = jsub.add_parser("list", help="the installed families' production modules and their keys")
    _add_selection_arguments(p)
    p.set_defaults(func=cmd_jit_list)

    p = jsub.add_parser("status", help="every cached key: state, size, last use, lock holder")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_jit_status)

    p = jsub.add_parser(
        "prebuild",
        help="compile the families' production modules (no GPU needed; resumes an interrupted "
        "build)",
    )
    _add_selection_arguments(p)
    p.add_argument("--jobs", type=int, help="parallel compiler jobs (default: cores and memory)")
    p.add_argument(
        "--wheel",
        metavar="DIR",
        help="also package the built modules as the wheel oasr-jit-cache-smNN into DIR",
    )
    p.add_argument(
        "--wheel-version", metavar="VERSION", help="the wheel's version (default: oasr-jit's)"
    )
    p.set_defaults(func=cmd_jit_prebuild)

    p = jsub.add_parser(
        "prune", help="remove old keys: keep each module's K most recent; never a locked key"
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed")
    p.add_argument(
        "--unused-days",
        type=float,
        default=0.0,
        help="only keys nothing loaded for N days (default 0)",
    )
    p.add_argument(
        "--keep", type=int, default=1, help="most recent keys kept per module (default 1)"
    )
    p.set_defaults(func=cmd_jit_prune)

    p = jsub.add_parser("clear", help="remove every cached module not being built")
    p.set_defaults(func=cmd_jit_clear)

    p = jsub.add_parser("forget-failures", help="drop recorded build failures")
    p.set_defaults(func=cmd_jit_forget_failures)

    p = sub.add_parser(
        "bench",
        help="time a family's ops against their peers (GPU; host-clock cases also without)",
        description="Check each case against its peer, then time both, interleaved, in this "
        "process (CUDA-graph replays for calls under 20 µs, inputs rotated past L2; cases with a "
        "CPU side on the host clock, up to the GPU's completion); print medians, the ratio "
        "peer/OASR (> 1: OASR is faster), GB/s and the % of the measured copy ceiling. A GPU is "
        "needed only when a selected case is timed with CUDA events. Exits 1 if a case fails "
        "its check.",
    )
    p.add_argument("family", help="a family with benchmark routines, e.g. norm")
    p.add_argument(
        "--suite", default="asr", help="which set of cases (default asr; e.g. quick, smoke)"
    )
    p.add_argument(
        "--filter", metavar="SUBSTRING", help="only cases whose name holds it (any case)"
    )
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the ratios (needs matplotlib)")
    p.add_argument(
        "--publish",
        metavar="DIR",
        help="write DIR/<gpu>_<family>.json and .png, then regenerate DIR/<gpu>.md and the "
        "measured table of DIR/../<family>.md from every published file (e.g. docs/perf)",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=DEFAULT_BENCH_REPS,
        metavar="N",
        help=f"timed samples per side; the median is reported (default {DEFAULT_BENCH_REPS})",
    )
    p.add_argument("--list", action="store_true", help="list the cases and exit (no GPU needed)")
    p.set_defaults(func=cmd_bench)

    for ep in entry_points(CLI_ENTRY_POINT_GROUP):
        try:
            ep.load()(sub)
        except Exception as exc:
            print(
                f"oasr: warning: CLI plugin {ep.name} ({ep.value}) failed: {exc}", file=sys.stderr
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "keep", 0) < 0:
        parser.error("--keep must be >= 0")
    if getattr(args, "unused_days", 0) < 0:
        parser.error("--unused-days must be >= 0")
    try:
        return int(args.func(args) or 0)
    except (ValueError, RuntimeError) as exc:
        print(f"oasr: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
