"""Resumable builds: a build killed part-way keeps the objects it finished, the rerun compiles
only the rest (ninja's log, content-keyed directory), and an object cut short is never linked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from oasr_jit import gen_jit_spec
from oasr_jit.build import discard_incomplete_objects
from oasr_jit.elf import is_complete_object_file

PARTS = 4


def _sources(tmp_path):
    directory = tmp_path / "multi"
    directory.mkdir()
    sources = []
    for i in range(PARTS):
        src = directory / f"part{i}.cc"
        src.write_text(
            "#include <tvm/ffi/function.h>\n"
            f"int64_t part{i}(int64_t x) {{ return x + {i}; }}\n"
            f"TVM_FFI_DLL_EXPORT_TYPED_FUNC(part{i}, part{i});\n"
        )
        sources.append(src)
    return sources


def _objects(spec) -> dict[str, int]:
    """Object name -> mtime (ns) of the complete objects in the key's obj/."""
    obj_dir = spec.key_dir / "obj"
    if not obj_dir.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in obj_dir.glob("*.o") if is_complete_object_file(p)}


def _logged(spec, obj: str) -> bool:
    log = spec.key_dir / ".ninja_log"
    return log.exists() and f"obj/{obj}" in log.read_text()


def test_killed_build_resumes_with_finished_objects(tmp_path, counting_cxx, monkeypatch):
    sources = _sources(tmp_path)
    spec = gen_jit_spec("resumable", sources)
    monkeypatch.setenv("MAX_JOBS", "1")  # one compile at a time: part0, then part1, ...
    counting_cxx.slow_down(2.0)
    code = f"""
        import oasr_jit
        oasr_jit.gen_jit_spec("resumable", {[str(s) for s in sources]!r}).build()
    """
    builder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (_logged(spec, "part0.cc.o") and counting_cxx.compiles >= 2):
            assert builder.poll() is None, "the build ended before it could be interrupted"
            assert time.monotonic() < deadline, "the first object never finished"
            time.sleep(0.05)
    finally:
        builder.send_signal(signal.SIGKILL)
        builder.wait(timeout=30)
    time.sleep(0.5)  # ninja (PDEATHSIG) stops the compile it runs
    finished = _objects(spec)
    assert "part0.cc.o" in finished, f"the finished object must survive the kill: {finished}"
    assert not spec.lib_path.exists()
    compiles_before = counting_cxx.compiles

    counting_cxx.slow_down(None)
    module = gen_jit_spec("resumable", sources).build_and_load()
    assert module.part3(1) == 4 and module.part0(1) == 1
    rebuilt = counting_cxx.compiles - compiles_before
    assert rebuilt == PARTS - len(finished), (
        f"{rebuilt} compiles on resume; {len(finished)} of {PARTS} objects were finished"
    )
    after = _objects(spec)
    for name, mtime in finished.items():
        assert after[name] == mtime, f"{name} was compiled again"


def test_truncated_object_is_compiled_again(tmp_path, counting_cxx):
    sources = _sources(tmp_path)
    spec = gen_jit_spec("resumable", sources)
    spec.build()
    assert counting_cxx.compiles == PARTS
    before = _objects(spec)
    spec.lib_path.unlink()  # what a later, interrupted build of the same key leaves
    victim = spec.key_dir / "obj" / "part1.cc.o"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])  # ninja's log still names it finished
    assert not is_complete_object_file(victim)

    module = gen_jit_spec("resumable", sources).build_and_load()
    assert module.part1(1) == 2
    assert counting_cxx.compiles == PARTS + 1, "only the truncated object is compiled again"
    after = _objects(spec)
    assert after["part1.cc.o"] != before["part1.cc.o"]
    assert all(after[n] == before[n] for n in before if n != "part1.cc.o")


def test_discard_incomplete_objects(tmp_path):
    obj = tmp_path / "obj"
    obj.mkdir()
    (obj / "empty.o").write_bytes(b"")
    (obj / "header_only.o").write_bytes(b"\x7fELF" + b"\0" * 60)
    (obj / "text.o").write_text("not an object")
    removed = discard_incomplete_objects(tmp_path)
    assert sorted(p.name for p in removed) == ["empty.o", "header_only.o", "text.o"]
    assert not os.listdir(obj)
