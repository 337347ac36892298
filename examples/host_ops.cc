// A host-only JIT module (no CUDA): what the demo and CPU-side code (e.g. CTC decoders) use.
// It includes the core's launcher helpers, which work on CPU tensors too.
#include "tvm_ffi_utils.h"

// out[i] = x[0] + ... + x[i] over a float32 CPU vector.
void cumsum(TensorView out, TensorView x) {
  oasr::check_dtype(x, {oasr::kFloat32}, "x");
  oasr::check_same_dtype(out, "out", x, "x");
  oasr::check_ndim(x, 1, "x");
  oasr::check_same_shape(out, "out", x, "x");
  oasr::check_contiguous(x, "x");
  oasr::check_contiguous(out, "out");
  if (x.device().device_type != kDLCPU || out.device().device_type != kDLCPU) {
    TVM_FFI_THROW(ValueError) << "cumsum runs on the CPU: pass CPU tensors";
  }
  const float* src = reinterpret_cast<const float*>(oasr::data_bytes(x));
  float* dst = reinterpret_cast<float*>(oasr::data_bytes(out));
  double acc = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<float>(acc += src[i]);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(cumsum, cumsum);
