// TVM-FFI exports of every row-norm module (oasr_norm_layer_fp16, ...: oasr_norm._jit).
#include "tvm_ffi_utils.h"

void row_norm(TensorView out, OptionalTensor residual_out, TensorView x, OptionalTensor residual,
              OptionalTensor weight, OptionalTensor beta, OptionalTensor center,
              OptionalTensor log_scale, int64_t kind, double eps, int64_t activation);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(row_norm, row_norm);
