"""The README's Install section, run as a new user would: a clean virtualenv with the CPU build
of torch, the README's commands from this checkout, then a first call of a host-only op (the CPU
CTC decoder, compiled on first use) through the family and through the metapackage, and
CUTLASS's headers found in the installed oasr-cutlass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _install_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- install:checkout -->\s*```bash\n(.*?)```", readme, re.S)
    assert block, "README.md has no <!-- install:checkout --> block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _torch_pin() -> str:
    return re.search(r'TORCH_CPU = "([^"]+)"', (ROOT / "noxfile.py").read_text()).group(1)


FIRST_CALL = """
    import torch, oasr_decoder
    log_probs = torch.tensor([[[0.1, 0.7, 0.2], [0.1, 0.7, 0.2], [0.8, 0.1, 0.1],
                               [0.1, 0.1, 0.8]]]).log()
    (hyp,) = oasr_decoder.ctc_greedy_search(log_probs)
    assert list(hyp.tokens) == [1, 2], hyp
    print("first call ok")
"""

NO_CUTLASS_YET = """
    from oasr_jit import env
    assert env.cutlass_info() is None, env.cutlass_info()
    print("no cutlass")
"""

CUTLASS_FROM_THE_PACKAGE = """
    import sys
    from pathlib import Path
    from oasr_jit import env
    info = env.require_cutlass()
    assert info.source == "oasr-cutlass", info
    prefix = Path(sys.prefix).resolve()
    assert all(d.is_relative_to(prefix) for d in info.include_dirs), (prefix, info)
    assert (info.include_dirs[0] / "cute" / "tensor.hpp").is_file()
    print("cutlass", info.version)
"""

METAPACKAGE_CALL = """
    import pydoc, torch, oasr
    text = pydoc.render_doc(oasr, renderer=pydoc.plaintext)
    for family in ("norm", "gemm", "decoder"):
        assert f"    {family} (oasr_{family} " in text, family
    (hyp,) = oasr.ctc_greedy_search(torch.tensor([[[0.9, 0.1], [0.2, 0.8]]]).log())
    assert list(hyp.tokens) == [1], hyp
    print("metapackage ok")
"""


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the packages need Python 3.10+")
def test_the_readme_install_section_works_in_a_clean_virtualenv(tmp_path):
    commands = _install_commands()
    assert len(commands) == 2, commands
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["OASR_JIT_DIR"] = str(tmp_path / "jit")

    def run(*argv, code=None):
        argv = [python, "-c", textwrap.dedent(code)] if code else list(argv)
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"{' '.join(argv)[:200]}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    run(python, "-m", "pip", "install", "-q", _torch_pin())
    first, everything = (c.replace("python3", python, 1).split() for c in commands)
    run(*first)
    assert "first call ok" in run(code=FIRST_CALL)
    assert "no cutlass" in run(code=NO_CUTLASS_YET), "one family pulls only what it needs"
    run(*everything)
    assert "metapackage ok" in run(code=METAPACKAGE_CALL)
    # oasr-gemm's headers come with it: oasr-cutlass, installed in the virtualenv
    assert "cutlass 4.2.0" in run(code=CUTLASS_FROM_THE_PACKAGE)
