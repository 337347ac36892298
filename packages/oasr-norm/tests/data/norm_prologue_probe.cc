// Test-only host module: the launcher prologues the norm launchers open with (tvm_ffi_utils.h's
// check_out_like, check_param, optional_ptr), called on CPU tensors (they read metadata only).
#include "tvm_ffi_utils.h"

void out_like(TensorView out, TensorView x) { oasr::check_out_like(out, x, "x"); }

void param(OptionalTensor p, int64_t numel, TensorView x) {
  oasr::check_param(p, "weight", numel, x, "x");
}

// Whether optional_ptr gives p's first element (an offset view's, not its storage's), or null.
bool points_at_first(OptionalTensor p) {
  const float* ptr = oasr::optional_ptr<float>(p);
  return p.has_value() ? ptr == reinterpret_cast<const float*>(oasr::data_bytes(p.value()))
                       : ptr == nullptr;
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(out_like, out_like);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(param, param);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(points_at_first, points_at_first);
