"""PyTorch twins of every op: the same contract (arguments, output shape and dtype, ``out=``),
computed with PyTorch in float32 and rounded once to the output dtype. They run on any device,
serve as the test reference and as the CPU path of `oasr_norm.layers`."""

from __future__ import annotations

from .activation_twins import (  # noqa: F401
    gelu,
    gelu_tanh,
    glu,
    relu,
    sigmoid,
    swish,
    swoosh_l,
    swoosh_r,
    tanh,
)
from .norm_twins import (  # noqa: F401
    add_layer_norm,
    add_rms_norm,
    batch_norm1d,
    bias_norm,
    group_norm,
    layer_norm,
    rms_norm,
)
from .softmax_twins import log_softmax, masked_softmax, softmax  # noqa: F401
