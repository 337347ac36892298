// TVM-FFI exports of the oasr_gelu_table module.
#include "tvm_ffi_utils.h"

void gelu16(TensorView out, TensorView x, int64_t path);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gelu16, gelu16);
