"""The `oasr` metapackage: lazy re-export of installed families' ops, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def _family_site(tmp_path, name, exports, module_body):
    site = tmp_path / f"site_{name}"
    dist = site / f"oasr_{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: oasr-{name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[oasr.families]\n{name} = {name}_reg:FAMILY\n")
    (site / f"{name}_reg.py").write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            import oasr_jit
            FAMILY = oasr_jit.Family(name={name!r}, version="0.1", module={name + "_ops"!r},
                                     include_dir=Path("."), exports={tuple(exports)!r})
            """
        )
    )
    (site / f"{name}_ops.py").write_text(textwrap.dedent(module_body))
    return site


def _run(code, *sites):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([*map(str, sites), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_core_only():
    import oasr

    assert oasr.jit.__name__ == "oasr_jit"
    assert isinstance(oasr.families(), dict)
    with pytest.raises(AttributeError, match="pip install oasr-<family>"):
        oasr.no_such_op  # noqa: B018


def test_lazy_reexport(tmp_path):
    site = _family_site(
        tmp_path,
        "fakenorm",
        ["fake_layer_norm"],
        """
        import sys
        IMPORTED = True
        def fake_layer_norm(x):
            return x * 2
    """,
    )
    proc = _run(
        """
        import sys, oasr
        assert "fakenorm_ops" not in sys.modules, "import oasr must not import families"
        assert "fake_layer_norm" in dir(oasr)
        assert oasr.fake_layer_norm(21) == 42
        assert "fakenorm_ops" in sys.modules
        assert "fakenorm" in oasr.families()
        print("ok")
    """,
        site,
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_two_families_exporting_one_name(tmp_path):
    a = _family_site(tmp_path, "famone", ["shared_op"], "def shared_op(): return 1\n")
    b = _family_site(tmp_path, "famtwo", ["shared_op"], "def shared_op(): return 2\n")
    proc = _run("import oasr; oasr.shared_op", a, b)
    assert proc.returncode != 0
    assert "exported by two families" in proc.stderr and "uninstall one" in proc.stderr


def test_help_lists_the_installed_families_ops_and_dir_leaks_nothing(tmp_path):
    site = _family_site(tmp_path, "fakeconv", ["fake_conv1d"], "def fake_conv1d(x): return x\n")
    proc = _run(
        """
        import pydoc, sys, oasr
        names = dir(oasr)
        assert "fake_conv1d" in names and "families" in names and "jit" in names, names
        leaked = [n for n in names if n.startswith("_") and n != "__version__"]
        leaked += [n for n in ("annotations", "importlib", "sys", "types") if n in names]
        assert not leaked, leaked
        text = pydoc.render_doc(oasr, renderer=pydoc.plaintext)
        assert "fakeconv (fakeconv_ops 0.1)" in text and "fake_conv1d" in text, text[:2000]
        assert "fake_conv1d" in oasr.__all__
        print("ok")
        """,
        site,
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr
