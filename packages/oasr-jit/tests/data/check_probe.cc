// Test-only host module: exposes the launcher-side checks of csrc/tvm_ffi_utils.h so the CPU
// tests can call them on CPU tensors (they read metadata only, so the device does not matter).
#include "oasr/common/types.h"  // the 16-bit types the dispatch macro names
#include "tvm_ffi_utils.h"

bool overlaps(TensorView a, TensorView b) { return oasr::storage_overlaps(a, b); }

bool aligned_16(TensorView t) { return oasr::is_aligned_16(t); }

// [rows, cols, row_stride], or raises ValueError when t is not a set of uniform rows.
tvm::ffi::Array<int64_t> rows_of(TensorView t) {
  oasr::RowView v = oasr::as_rows(t, "t");
  return {v.rows, v.cols, v.row_stride};
}

void require(TensorView t, tvm::ffi::String what) {
  std::string w = what;
  if (w == "float") {
    oasr::check_dtype(t, {oasr::kFloat32, oasr::kFloat16, oasr::kBFloat16}, "t");
  } else if (w == "contiguous") {
    oasr::check_contiguous(t, "t");
  } else if (w == "last_dim_contiguous") {
    oasr::check_last_dim_contiguous(t, "t");
  } else if (w == "aligned_16") {
    oasr::check_aligned_16(t, "t");
  } else if (w == "2d") {
    oasr::check_ndim(t, 2, "t");
  } else if (w == "cuda") {
    oasr::check_cuda(t, "t");
  } else {
    TVM_FFI_THROW(ValueError) << "unknown check " << w;
  }
}

// The dispatch macro's element size for t's dtype; TypeError for anything else.
int64_t dispatched_size(TensorView t) {
  return OASR_DISPATCH_FLOAT_DTYPE(t.dtype(), "t", c_type, [&] {
    return static_cast<int64_t>(sizeof(c_type));
  });
}

void no_overlap(TensorView out, TensorView in) { oasr::check_no_overlap(out, "out", in, "in"); }

TVM_FFI_DLL_EXPORT_TYPED_FUNC(overlaps, overlaps);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(aligned_16, aligned_16);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rows_of, rows_of);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(require, require);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(dispatched_size, dispatched_size);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(no_overlap, no_overlap);
