// TVM-FFI exports of the oasr_gemm_log_softmax_head module: gemm_log_softmax's one-kernel head
// (log_softmax_head_sm90.cu) and cluster head (log_softmax_cluster_sm90.cu).
#include "tvm_ffi_utils.h"

void log_softmax_head_sm90(TensorView out, TensorView a, TensorView b, OptionalTensor bias);
void log_softmax_cluster_sm90(TensorView out, TensorView a, TensorView b, OptionalTensor bias,
                              int64_t max_chunks);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(log_softmax_head_sm90, log_softmax_head_sm90);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(log_softmax_cluster_sm90, log_softmax_cluster_sm90);
