// TVM-FFI exports of the oasr_gemm_log_softmax module (gemm_log_softmax's row pass).
#include "tvm_ffi_utils.h"

void log_softmax_rows(TensorView out, TensorView logits);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(log_softmax_rows, log_softmax_rows);
