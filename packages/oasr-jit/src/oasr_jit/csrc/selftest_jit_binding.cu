// TVM-FFI exports of the core's self-test module.
#include "tvm_ffi_utils.h"

void row_sum(TensorView out, TensorView x);
void scale(TensorView out, TensorView x, double factor);
void compiled_sm(TensorView out);
int64_t target_sm();
int64_t sm_count(int64_t device);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(row_sum, row_sum);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(compiled_sm, compiled_sm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(target_sm, target_sm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(sm_count, sm_count);
