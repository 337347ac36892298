"""@oasr_api (call logging, exception context) and the backend_requirement /
supported_compute_capability helpers."""

from __future__ import annotations

import logging

import pytest

from oasr_jit import api_logging, backend_requirement, oasr_api, supported_compute_capability
from oasr_jit.requirements import BackendUnsupportedError


class FakeTensor:
    shape = (2, 80)
    dtype = "torch.float16"
    device = "cuda:1"

    def stride(self):
        return (80, 1)


@oasr_api
def scale_op(x, factor=2.0, *, out=None):
    if factor < 0:
        raise ValueError("factor must be >= 0")
    return factor


def test_exception_keeps_type_and_names_the_call():
    with pytest.raises(ValueError) as info:
        scale_op(FakeTensor(), -1.0)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "oasr.scale_op(" in notes
    assert "x=Tensor[2, 80] float16 cuda:1 stride=(80, 1)" in notes
    assert "factor=-1.0" in notes


def test_nested_ops_note_once():
    @oasr_api
    def outer(x):
        return scale_op(x, -3.0)

    with pytest.raises(ValueError) as info:
        outer(FakeTensor())
    notes = info.value.__notes__
    assert len(notes) == 1 and "oasr.scale_op" in notes[0]


@pytest.mark.parametrize("level, expect", [(0, None), (1, "oasr.scale_op"), (2, "Tensor[2, 80]")])
def test_log_levels(level, expect, caplog):
    api_logging.set_log_level(level)
    try:
        with caplog.at_level(logging.DEBUG, logger="oasr"):
            assert scale_op(FakeTensor(), 3.0) == 3.0
        messages = [r.getMessage() for r in caplog.records if r.name == "oasr"]
        if expect is None:
            assert messages == []
        else:
            assert any(expect in m for m in messages), messages
    finally:
        api_logging.set_log_level(0)


def test_bad_log_level():
    with pytest.raises(ValueError, match="OASR_LOG_LEVEL"):
        api_logging.set_log_level("loud")


def test_describe_never_prints_values():
    assert api_logging.describe([1, 2, 3, 4, 5, 6]) == "list(len=6)"
    assert api_logging.describe("x" * 200).endswith("...")


# ---------------------------------------------------------------------------------------------


@supported_compute_capability([80, 90])
def _cutlass_check(x, backend="auto"):
    if x > 100:
        raise ValueError("cutlass: x must be <= 100")
    return True


@supported_compute_capability([75, 80, 86, 89, 90, 100, 120])
def _torch_check(x, backend="auto"):
    return True


def _prefer_cutlass(suitable, x, backend="auto"):
    return [b for b in ("cutlass", "torch") if b in suitable]


calls = []


@backend_requirement(
    {"cutlass": _cutlass_check, "torch": _torch_check}, heuristic_func=_prefer_cutlass
)
def op(x, backend="auto"):
    chosen = backend if backend != "auto" else op.suitable_auto_backends[0]
    calls.append(chosen)
    return chosen


def test_auto_picks_by_heuristic_among_passing_backends():
    assert op(5) == "cutlass"
    assert op(500) == "torch", "cutlass's check refused x > 100"


def test_named_backend_serves_or_raises():
    assert op(5, backend="torch") == "torch"
    with pytest.raises(ValueError, match="x must be <= 100"):
        op(500, backend="cutlass")
    with pytest.raises(ValueError, match="unknown backend 'triton'"):
        op(5, backend="triton")


def test_skip_check():
    assert op(500, backend="cutlass", skip_check=True) == "cutlass"


def test_capability_queries():
    assert _cutlass_check.is_compute_capability_supported(90)
    assert not _cutlass_check.is_compute_capability_supported(120)
    assert op.is_backend_supported("cutlass", cc=90)
    assert not op.is_backend_supported("cutlass", cc=120)
    assert op.is_compute_capability_supported(120)  # torch serves it
    assert not op.is_compute_capability_supported(70)
    assert op.has_backend("torch") and not op.has_backend("triton")
    assert op.has_backend_choices()


def test_no_backend_can_serve():
    @backend_requirement({"cutlass": _cutlass_check})
    def only_cutlass(x, backend="auto"):
        return x

    with pytest.raises(BackendUnsupportedError, match="(?s)no backend can serve.*x must be <= 100"):
        only_cutlass(1000)


def test_common_check_only():
    @supported_compute_capability([90])
    def _check(n):
        if n % 8:
            raise ValueError(f"n must be a multiple of 8, got {n}")
        return True

    @backend_requirement(common_check=_check)
    def aligned(n):
        return n

    assert aligned(16) == 16
    with pytest.raises(ValueError, match="multiple of 8"):
        aligned(3)
    assert not aligned.has_backend_choices()
    assert aligned.is_compute_capability_supported(90)
    assert not aligned.is_compute_capability_supported(80)


def test_backend_checks_need_a_backend_parameter():
    with pytest.raises(TypeError, match="no `backend` parameter"):
        backend_requirement({"x": _torch_check})(lambda x: x)


def test_lazy_package_refuses_a_name_its_submodule_would_hide_and_lists_only_public_names(
    tmp_path, monkeypatch
):
    """``softmax`` exported from ``softmax.py`` would be replaced by the submodule once imported:
    the package says so when it is defined. ``dir()`` shows the public names, not the package's
    own imports."""
    import importlib
    import sys

    from oasr_jit.families import lazy_package

    with pytest.raises(ValueError, match=r"lazyfam: .*\(softmax\).*rename the submodule"):
        lazy_package("lazyfam", {"softmax": "softmax", "relu": "act"})
    pkg = tmp_path / "lazyfam"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from oasr_jit.families import lazy_package\n"
        "__getattr__, __dir__, __all__ = lazy_package(__name__, {'relu': 'act'}, ('act',))\n"
    )
    (pkg / "act.py").write_text("def relu(): return 'r'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("lazyfam", None)
    lazyfam = importlib.import_module("lazyfam")
    assert dir(lazyfam) == ["__version__", "act", "relu"]
    assert lazyfam.relu() == "r"


def test_calling_op_names_the_outermost_op():
    @oasr_api
    def inner():
        return api_logging.calling_op()

    @oasr_api
    def outer():
        return inner()

    assert inner() == "oasr.inner"
    assert outer() == "oasr.outer", "a build names the op the user called"
    assert api_logging.calling_op() is None
