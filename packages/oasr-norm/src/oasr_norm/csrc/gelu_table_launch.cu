// Launcher of the exact GELU of 16-bit tensors by table (module oasr_gelu_table).
#include "oasr/norm/gelu_table.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;

namespace oasr::norm {
cudaError_t gelu_table_address(bool bf16, const uint16_t** table);  // the rendered gelu_table.cu
}

// out = GELU(x), x [..., C] float16 / bfloat16 (uniformly strided rows), out contiguous; out may
// be x itself. path: a norm::GeluTablePath (0 the launcher's choice; 1 / 2 force a kernel).
void gelu16(TensorView out, TensorView x, int64_t path) {
  DeviceScope scope(out);
  scope.check_same_device(x, "x");
  check_dtype(x, {kFloat16, kBFloat16}, "x");
  check_same_dtype(out, "out", x, "x");
  check_same_shape(out, "out", x, "x");
  check_contiguous(out, "out");
  const RowView rows = as_rows(x, "x");
  const bool in_place = data_bytes(out) == data_bytes(x) && x.IsContiguous();
  if (!in_place) check_no_overlap(out, "out", x, "x");
  if (path < 0 || path > int64_t(norm::GeluTablePath::kGather)) {
    TVM_FFI_THROW(ValueError) << "path must be 0 (auto), 1 (smem) or 2 (gather), got " << path;
  }
  if (rows.rows == 0 || rows.cols == 0) return;
  const uint16_t* table = nullptr;
  check_cuda_status(norm::gelu_table_address(same_dtype(x.dtype(), kBFloat16), &table),
                    "GELU table address");
  const norm::GeluTableArgs a{reinterpret_cast<uint16_t*>(data_bytes(out)),
                              reinterpret_cast<const uint16_t*>(data_bytes(x)), rows.rows,
                              rows.cols, rows.row_stride, table};
  const auto kernel = static_cast<norm::GeluTablePath>(path);
  if (kernel == norm::GeluTablePath::kSmem && !norm::gelu_table_smem_fits(a)) {
    TVM_FFI_THROW(ValueError) << "path 1 (smem) needs x and out contiguous and 16-byte aligned";
  }
  check_cuda_status(norm::launch_gelu_table(a, kernel, scope.stream()), "GELU table kernel");
}
