// TVM-FFI exports of the oasr_norm_softmax module.
#include "tvm_ffi_utils.h"

void softmax(TensorView out, TensorView x, bool log_output);
void masked_softmax(TensorView out, TensorView scores, OptionalTensor bias, OptionalTensor mask,
                    OptionalTensor key_padding_mask, double scale);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(softmax, softmax);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(masked_softmax, masked_softmax);
