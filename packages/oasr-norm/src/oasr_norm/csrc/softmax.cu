// Launcher of softmax / log_softmax over the last dimension (module oasr_norm_softmax; the
// masked attention softmax has a module per dtype: masked_softmax_launcher.h).
#include "oasr/common/softmax.cuh"
#include "softmax_in_place.h"
#include "tvm_ffi_utils.h"

using namespace oasr;

// out = softmax(x) (log_output: log_softmax) over the last dim of x [..., C] (uniformly strided
// rows); out contiguous, may be x itself.
void softmax(TensorView out, TensorView x, bool log_output) {
  DeviceScope scope(out);
  check_out_like(out, x, "x");
  const RowView rows = as_rows(x, "x");
  if (!same_contiguous_view(out, x)) check_no_overlap(out, "out", x, "x");
  if (rows.rows == 0 || rows.cols == 0) return;
  if (rows.rows > INT32_MAX) TVM_FFI_THROW(ValueError) << "x has 2^31 rows or more";
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    const SoftmaxArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                                 reinterpret_cast<const T*>(data_bytes(x)), rows.rows, rows.cols,
                                 rows.row_stride, log_output};
    check_cuda_status(launch_softmax(a, scope.stream()), "softmax kernel");
  });
}
