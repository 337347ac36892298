"""The decoder family's registration: entry point, exports (re-exported as oasr.<name>, no clash
with other families), cheap registration import, and a host module that builds with no GPU and
no architecture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import oasr_decoder
import oasr_jit
from oasr_decoder._family import FAMILY, OPS


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_registered_through_the_entry_point():
    family = oasr_jit.discover_families()["decoder"]
    assert family == FAMILY
    assert family.module == "oasr_decoder" and family.version == oasr_decoder.__version__
    assert (family.include_dir / "oasr" / "decoder" / "ctc_prefix_beam_search.h").is_file()


def test_exports_resolve_and_do_not_clash():
    assert set(OPS) <= set(dir(oasr_decoder))
    for name in OPS:
        assert getattr(oasr_decoder, name) is not None
    others = {
        name: family.name
        for family in oasr_jit.discover_families().values()
        if family.name != "decoder"
        for name in family.exports
    }
    assert not set(OPS) & set(others), {n: others[n] for n in set(OPS) & set(others)}
    import oasr

    assert oasr.CtcPrefixBeamSearch is oasr_decoder.CtcPrefixBeamSearch
    assert oasr.group_words is oasr_decoder.group_words


def test_registration_and_package_import_do_not_import_torch():
    proc = _run(
        """
        import sys
        import oasr_decoder._family
        import oasr_decoder
        assert "torch" not in sys.modules, "registration imported torch"
        oasr_decoder.group_words  # alignment is pure Python
        assert "torch" not in sys.modules, "alignment imported torch"
        print("ok")
        """
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_production_module_builds_without_gpu_or_arch(tmp_path, monkeypatch):
    """A fresh cache, no OASR_CUDA_ARCH_LIST, no visible GPU, and an architecture query that
    raises: the host module builds and loads anyway."""
    monkeypatch.delenv("OASR_CUDA_ARCH_LIST", raising=False)
    proc = _run(
        """
        import oasr_jit
        import oasr_jit.arch as arch

        def no_arch():
            raise AssertionError("a host module must not need an architecture")

        arch.target_arch = no_arch
        from oasr_decoder._jit import gen_ctc_cpu_module
        spec = gen_ctc_cpu_module()
        assert spec.name == "oasr_decoder_ctc_cpu" and not spec.is_cuda
        lib = spec.build()
        assert oasr_jit.is_complete_shared_object(lib)
        assert spec.build_and_load().ctc_stream_num_frames is not None
        print("built", lib)
        """,
        OASR_JIT_DIR=str(tmp_path / "jit"),
        CUDA_VISIBLE_DEVICES="",
    )
    assert proc.returncode == 0 and "built" in proc.stdout, proc.stderr
