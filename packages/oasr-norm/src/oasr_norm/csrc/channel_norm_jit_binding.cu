// TVM-FFI exports of the oasr_norm_channels module.
#include "tvm_ffi_utils.h"

void batch_norm_channels_last(TensorView out, TensorView x, TensorView mean, TensorView var,
                              OptionalTensor weight, OptionalTensor bias, double eps,
                              int64_t activation);
void group_norm(TensorView out, TensorView x, OptionalTensor weight, OptionalTensor bias,
                int64_t groups, double eps);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(batch_norm_channels_last, batch_norm_channels_last);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(group_norm, group_norm);
