// Launchers of the per-channel normalizations: batch_norm1d (channels last) and group_norm.
#include "oasr/common/arch_facts.h"
#include "oasr/norm/channel_norm.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;

// out = act(batch_norm(x)) over the last (channel) dimension of x [..., C].
void batch_norm_channels_last(TensorView out, TensorView x, TensorView mean, TensorView var,
                              OptionalTensor weight, OptionalTensor bias, double eps,
                              int64_t activation) {
  DeviceScope scope(out);
  check_out_like(out, x, "x");
  const RowView rows = as_rows(x, "x");
  check_no_overlap(out, "out", x, "x");
  check_param(mean, "running_mean", rows.cols, x, "x");
  check_param(var, "running_var", rows.cols, x, "x");
  check_param(weight, "weight", rows.cols, x, "x");
  check_param(bias, "bias", rows.cols, x, "x");
  if (activation < 0 || activation >= int64_t(norm::Activation::kCount)) {
    TVM_FFI_THROW(ValueError) << "unknown activation code " << activation;
  }
  if (rows.rows == 0 || rows.cols == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    norm::BatchNormArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                             reinterpret_cast<const T*>(data_bytes(x)),
                             reinterpret_cast<const T*>(data_bytes(mean)),
                             reinterpret_cast<const T*>(data_bytes(var)),
                             optional_ptr<T>(weight),
                             optional_ptr<T>(bias),
                             rows.rows,
                             rows.cols,
                             rows.row_stride,
                             static_cast<float>(eps),
                             static_cast<norm::Activation>(activation)};
    check_cuda_status(norm::launch_batch_norm_channels_last(a, num_sms(scope.device_id()),
                                                            scope.stream()),
                      "batch_norm launch");
  });
}

// out = group_norm(x) for x [N, C, *] contiguous.
void group_norm(TensorView out, TensorView x, OptionalTensor weight, OptionalTensor bias,
                int64_t groups, double eps) {
  DeviceScope scope(out);
  check_out_like(out, x, "x");
  check_contiguous(x, "x");
  check_no_overlap(out, "out", x, "x");
  if (x.ndim() < 2) TVM_FFI_THROW(ValueError) << "x must be [N, C, *], got " << shape_str(x);
  const int64_t channels = x.size(1);
  if (groups < 1 || channels % groups != 0) {
    TVM_FFI_THROW(ValueError) << "groups must divide the " << channels << " channels, got "
                              << groups;
  }
  check_param(weight, "weight", channels, x, "x");
  check_param(bias, "bias", channels, x, "x");
  const int64_t batch = x.size(0);
  const int64_t spatial = channels == 0 || batch == 0 ? 0 : x.numel() / (batch * channels);
  if (x.numel() == 0) return;
  if (batch * groups > 0x7fffffff) TVM_FFI_THROW(ValueError) << "too many groups in x";
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    norm::GroupNormArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                             reinterpret_cast<const T*>(data_bytes(x)),
                             optional_ptr<T>(weight),
                             optional_ptr<T>(bias),
                             batch,
                             channels,
                             spatial,
                             groups,
                             static_cast<float>(eps)};
    check_cuda_status(norm::launch_group_norm(a, scope.stream()), "group_norm launch");
  });
}
