// TVM-FFI exports of the oasr_decoder_topk module.
#include "tvm_ffi_utils.h"

void topk(OptionalTensor values, TensorView indices, TensorView x, int64_t k,
          int64_t warps_per_row);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(topk, topk);
