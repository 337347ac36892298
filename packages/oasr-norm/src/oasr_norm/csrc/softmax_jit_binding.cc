// TVM-FFI exports of the oasr_norm_softmax module (host C++).
#include "tvm_ffi_utils.h"

void softmax(TensorView out, TensorView x, bool log_output);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(softmax, softmax);
