// TVM-FFI exports of every masked-softmax module (oasr_norm_masked_softmax_fp16, ...; host C++).
#include "tvm_ffi_utils.h"

void masked_softmax(TensorView out, TensorView scores, OptionalTensor bias, OptionalTensor mask,
                    OptionalTensor key_padding_mask, double scale);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(masked_softmax, masked_softmax);
