// Row softmax and log-softmax in float32, shared by the norm family (softmax, log_softmax, and
// the row machinery of its masked_softmax, oasr/norm/masked_softmax.cuh) and gemm_log_softmax's
// row pass (oasr-gemm csrc/log_softmax_rows.cu, launch_softmax_padded).
//
//   softmax         y = exp(x - m) / s,  m = max(x), s = sum(exp(x - m))      over each row
//   log_softmax     y = (x - m) - log(s)
//
// A row of -inf gives torch's answer (NaN) for softmax; masked row sources (kMasked) make a row
// that kept nothing all zeros instead.
//
// The layers, each including the one before it:
//   softmax/math.cuh      exp2 and 1 / x on the MUFU alone
//   softmax/rows.cuh      the arguments, the register capacity and the row sources (how a
//                         kernel reads a row: DenseRow, PaddedDenseRow, AlignedBodyRow)
//   softmax/stores.cuh    how a kernel writes a row (whole vectors, element by element, or
//                         realigned 16-byte vectors into rows that start anywhere)
//   softmax/kernels.cuh   the kernels: register-resident rows, the aligned body, long rows
//   softmax/dispatch.cuh  host side: the kernel and vector width a row takes (launch_softmax,
//                         launch_softmax_padded)
#pragma once

#include "oasr/common/softmax/dispatch.cuh"
