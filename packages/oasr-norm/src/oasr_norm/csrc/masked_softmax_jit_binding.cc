// TVM-FFI exports of the oasr_norm_masked_softmax module (host C++).
#include "tvm_ffi_utils.h"

void masked_softmax(TensorView out, TensorView scores, OptionalTensor bias, OptionalTensor mask,
                    OptionalTensor key_padding_mask, double scale);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(masked_softmax, masked_softmax);
