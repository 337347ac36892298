// The masked attention softmax's launcher. Each JIT module (oasr_norm_masked_softmax_<dtype>)
// is one dtype's instantiation of masked_softmax_launch, defined as the module's `masked_softmax`
// by templates/masked_softmax.cu.jinja: a first call compiles its dtype's kernels (bias of
// scores' dtype or float32), not all six. oasr_norm.softmaxes picks the module.
#pragma once

#include <type_traits>

#include "oasr/norm/masked_softmax.cuh"
#include "softmax_in_place.h"
#include "tvm_ffi_utils.h"

namespace oasr {
namespace masked_detail {

// An operand broadcast against out [B, H, Tq, Tk]: each dim equal, or 1 (read with stride 0).
template <int kDims>
void broadcast_strides(const DeviceScope& scope, const TensorView& t, const TensorView& out,
                       const int (&out_dims)[kDims], const char* name, int64_t (&strides)[kDims]) {
  scope.check_same_device(t, name);
  check_ndim(t, kDims, name);
  for (int i = 0; i < kDims; ++i) {
    const int64_t want = out.size(out_dims[i]);
    if (t.size(i) != want && t.size(i) != 1) {
      TVM_FFI_THROW(ValueError) << name << " " << shape_str(t) << " does not broadcast to "
                                << shape_str(out) << " (dims of size " << want << " or 1)";
    }
    strides[i] = t.size(i) == 1 ? 0 : t.stride(i);
  }
  check_no_overlap(out, "out", t, name);
}

template <typename T, typename TBias>
void run_masked(const DeviceScope& scope, TensorView out, TensorView scores, OptionalTensor bias,
                OptionalTensor mask, OptionalTensor kpm, double scale) {
  MaskedSoftmaxArgs<T, TBias> a{};
  a.out = reinterpret_cast<T*>(data_bytes(out));
  a.scores = reinterpret_cast<const T*>(data_bytes(scores));
  a.batch = out.size(0), a.heads = out.size(1), a.q_len = out.size(2), a.k_len = out.size(3);
  for (int i = 0; i < 3; ++i) a.scores_stride[i] = scores.stride(i);
  if (bias.has_value()) {
    broadcast_strides<4>(scope, *bias, out, {0, 1, 2, 3}, "bias", a.bias_stride);
    a.bias = reinterpret_cast<const TBias*>(data_bytes(*bias));
  }
  if (mask.has_value()) {
    check_dtype(*mask, {kBool, kUInt8}, "mask");
    broadcast_strides<4>(scope, *mask, out, {0, 1, 2, 3}, "mask", a.mask_stride);
    a.mask = reinterpret_cast<const uint8_t*>(data_bytes(*mask));
  }
  if (kpm.has_value()) {
    check_dtype(*kpm, {kBool, kUInt8}, "key_padding_mask");
    broadcast_strides<2>(scope, *kpm, out, {0, 3}, "key_padding_mask", a.kpm_stride);
    a.key_padding_mask = reinterpret_cast<const uint8_t*>(data_bytes(*kpm));
  }
  a.scale = static_cast<float>(scale);
  if (out.numel() == 0) return;
  if (a.batch * a.heads * a.q_len > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "scores has 2^31 rows (B * H * Tq) or more";
  }
  check_cuda_status(launch_masked_softmax(a, scope.stream()), "masked_softmax kernel");
}

}  // namespace masked_detail

// out = softmax(scale * scores + bias) over the kept keys; scores [B, H, Tq, Tk] (unit stride
// over Tk), bias [B|1, H|1, Tq|1, Tk|1] of scores' dtype or float32, mask the same shape (bool,
// true = attend), key_padding_mask [B|1, Tk] (bool, true = padding); out [B, H, Tq, Tk]
// contiguous, may be scores itself.
template <typename TModule>
void masked_softmax_launch(const char* module, TensorView out, TensorView scores,
                           OptionalTensor bias, OptionalTensor mask,
                           OptionalTensor key_padding_mask, double scale) {
  using namespace masked_detail;
  DeviceScope scope(out);
  check_out_like(out, scores, "scores");
  check_ndim(scores, 4, "scores");
  check_last_dim_contiguous(scores, "scores");
  if (!same_contiguous_view(out, scores)) check_no_overlap(out, "out", scores, "scores");
  const bool float_bias = bias.has_value() && !same_dtype(bias.value().dtype(), scores.dtype());
  if (float_bias) check_dtype(*bias, {kFloat32}, "bias (when not of scores' dtype)");
  OASR_DISPATCH_FLOAT_DTYPE(scores.dtype(), "scores", T, [&] {
    if constexpr (!std::is_same_v<T, TModule>) {
      TVM_FFI_THROW(TypeError) << module << " holds the kernels of another dtype than scores' "
                               << dtype_name(scores.dtype());
    } else if (float_bias) {
      run_masked<T, float>(scope, out, scores, bias, mask, key_padding_mask, scale);
    } else {
      run_masked<T, T>(scope, out, scores, bias, mask, key_padding_mask, scale);
    }
  });
}

}  // namespace oasr
