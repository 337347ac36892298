// gemm_log_softmax's row pass (module oasr_gemm_log_softmax): out [M, V] (contiguous) = the
// log_softmax over V of the first V columns of logits [M, W], W >= V (unit column stride, any row
// stride), or of out itself in place. logits wider than out are the padded buffer that an odd
// V's GEMM writes (head.py's padded_vocab): its padding may be read (16-byte loads of the row's
// last vector) but is never used. Each row is read once (into registers up to V = 16384) and
// written once: oasr/common/softmax.cuh, the kernels of oasr-norm's softmax.
#include "oasr/common/softmax.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;

void log_softmax_rows(TensorView out, TensorView logits) {
  DeviceScope scope(out);
  scope.check_same_device(logits, "logits");
  check_same_dtype(out, "out", logits, "logits");
  check_ndim(out, 2, "out");
  check_ndim(logits, 2, "logits");
  check_contiguous(out, "out");
  const int64_t vocab = out.size(1);
  if (logits.size(0) != out.size(0) || logits.size(1) < vocab) {
    TVM_FFI_THROW(ValueError) << "logits " << shape_str(logits) << " must have out's rows and at "
                              << "least its columns " << shape_str(out);
  }
  const RowView rows = as_rows(logits, "logits");
  if (data_bytes(out) != data_bytes(logits)) check_no_overlap(out, "out", logits, "logits");
  if (rows.rows == 0 || vocab == 0) return;
  if (rows.rows > INT32_MAX) TVM_FFI_THROW(ValueError) << "logits has 2^31 rows or more";
  if (data_bytes(out) == data_bytes(logits) &&
      (rows.cols != vocab || (rows.rows > 1 && rows.row_stride != vocab))) {
    TVM_FFI_THROW(ValueError) << "in place, logits must be out itself";
  }
  OASR_DISPATCH_HALF_DTYPE(out.dtype(), "out", T, [&] {
    const SoftmaxArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                           reinterpret_cast<const T*>(data_bytes(logits)), rows.rows, vocab,
                           rows.row_stride, /*log_output=*/true};
    check_cuda_status(launch_softmax_padded(a, rows.cols, scope.stream()),
                      "log_softmax rows kernel");
  });
}
