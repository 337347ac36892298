// What the softmax launchers (softmax.cu, masked_softmax_launcher.h) share.
#pragma once

#include "tvm_ffi_utils.h"

namespace oasr {

// out is x itself (same first element, both contiguous of one shape): a row is in registers
// before any of it is written, so the op may run in place.
inline bool same_contiguous_view(const TensorView& out, const TensorView& x) {
  return data_bytes(out) == data_bytes(x) && x.IsContiguous();
}

}  // namespace oasr
