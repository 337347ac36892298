"""The norm family's registration with the JIT core (cheap to import: no torch, no build)."""

from __future__ import annotations

from pathlib import Path

from oasr_jit import Family

from ._version import __version__

#: public name -> the submodule defining it: the package's lazy table (`__init__`) and the
#: names the `oasr` metapackage re-exports, one list
OPS = {
    **dict.fromkeys(
        ("layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm", "bias_norm",
         "batch_norm1d", "fold_batch_norm", "group_norm"),
        "normalization",
    ),
    **dict.fromkeys(
        ("gelu", "gelu_tanh", "sigmoid", "tanh", "relu", "swish", "swoosh_l", "swoosh_r", "glu"),
        "activations",
    ),
    **dict.fromkeys(("softmax", "log_softmax", "masked_softmax"), "softmaxes"),
}  # fmt: skip

#: submodules reachable as attributes of the package
SUBMODULES = ("layers", "twins", "bench")

#: the compute capabilities the family serves (its kernels use no architecture-specific feature)
SUPPORTED_COMPUTE_CAPABILITY = (80, 86, 89, 90, 100, 120)


def _production_specs(arch):
    from ._jit import production_specs

    return production_specs(arch)


FAMILY = Family(
    name="norm",
    version=__version__,
    module="oasr_norm",
    include_dir=Path(__file__).resolve().parent / "include",
    production_specs=_production_specs,
    exports=tuple(OPS),
    supported_compute_capability=SUPPORTED_COMPUTE_CAPABILITY,
)
