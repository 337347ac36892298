// TVM-FFI exports of the oasr_norm_activation module.
#include "tvm_ffi_utils.h"

void activation(TensorView out, TensorView x, int64_t activation);
void gelu_table(TensorView out, TensorView x);
void glu(TensorView out, TensorView x);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(activation, activation);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gelu_table, gelu_table);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(glu, glu);
