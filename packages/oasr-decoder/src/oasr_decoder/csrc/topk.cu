// Launcher of the sorted top-k of rows (module oasr_decoder_topk); the kernel is
// include/oasr/decoder/topk.cuh.
#include "oasr/decoder/topk.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;

namespace {

// t is [..., k] contiguous: x's leading dims, then k.
void check_topk_output(const TensorView& t, const TensorView& x, int64_t k, const char* name) {
  bool ok = t.ndim() == x.ndim() && t.size(-1) == k;
  for (int i = 0; ok && i + 1 < x.ndim(); ++i) ok = t.size(i) == x.size(i);
  if (!ok) {
    TVM_FFI_THROW(ValueError) << name << " must have x's leading dims then k = " << k
                              << " (x " << shape_str(x) << "), got " << shape_str(t);
  }
  check_contiguous(t, name);
  check_no_overlap(t, name, x, "x");
}

// x's rows: uniformly strided (as_rows), or else [outer, inner] rows where the last leading dim
// (inner) and the ones before it (outer, uniformly strided among themselves) each have their
// own stride: x[:, t0:t1] of a [B, T, V] tensor, or a [T, B, V] one transposed.
struct TwoLevelRows {
  RowView rows;
  int64_t inner = INT64_MAX, outer_stride = 0;
};

TwoLevelRows rows_of(const TensorView& x) {
  TwoLevelRows r;
  if (try_as_rows(x, &r.rows)) return r;
  if (x.ndim() >= 3) {
    // the leading dims but the last as rows of their own
    int64_t outer = 1, stride = 0;
    bool uniform = true;
    for (int i = x.ndim() - 3; i >= 0; --i) {
      if (x.size(i) == 1) continue;
      if (outer == 1) {
        stride = x.stride(i);
      } else if (x.stride(i) != stride * outer) {
        uniform = false;
      }
      outer *= x.size(i);
    }
    if (uniform && x.size(-1) > 0) {
      r.rows = RowView{outer * x.size(-2), x.size(-1), x.stride(-2)};
      r.inner = std::max<int64_t>(x.size(-2), 1);
      r.outer_stride = stride;
      return r;
    }
  }
  TVM_FFI_THROW(ValueError) << "x with shape " << shape_str(x) << " and strides "
                            << strides_str(x)
                            << " is not a set of rows with a unit-stride last dimension; call "
                               ".contiguous()";
}

template <typename T, typename IdxT>
void run_topk(const DeviceScope& scope, T* values, const TensorView& indices, const TensorView& x,
              const TwoLevelRows& rows, int64_t k, int team_warps) {
  decoder::TopkArgs<T, IdxT> a{reinterpret_cast<const T*>(data_bytes(x)),
                               values,
                               reinterpret_cast<IdxT*>(data_bytes(indices)),
                               rows.rows.rows,
                               rows.rows.cols,
                               rows.rows.row_stride,
                               k};
  a.inner = rows.inner;
  a.outer_stride = rows.outer_stride;
  if (team_warps == 0) team_warps = decoder::topk_team_warps_on(scope.device_id(), a);
  check_cuda_status(decoder::launch_topk(a, team_warps, scope.stream()), "topk kernel");
}

}  // namespace

// indices[..., :] = the columns of the k largest values of each row of x [..., V] (value
// descending, equal values by column ascending, NaN largest, -0.0 == +0.0); values, when given,
// those elements. x: float32/float16/bfloat16, unit stride over V, rows uniformly strided or
// [outer, inner] rows (TwoLevelRows);
// indices [..., k] int64 or int32, values [..., k] of x's dtype or None, both contiguous.
// warps_per_row: 0 (the launcher's choice for the number of rows), or 1, 2, 4 or 8 (tests).
void topk(OptionalTensor values, TensorView indices, TensorView x, int64_t k,
          int64_t warps_per_row) {
  DeviceScope scope(indices);
  scope.check_same_device(x, "x");
  if (x.ndim() < 1) TVM_FFI_THROW(ValueError) << "x must be [..., V], got a 0-D tensor";
  const TwoLevelRows rows = rows_of(x);
  if (const char* why = decoder::topk_can_implement(rows.rows.rows, rows.rows.cols, k)) {
    TVM_FFI_THROW(ValueError) << why << ", got k = " << k << " for x " << shape_str(x);
  }
  if (warps_per_row != 0 && warps_per_row != 1 && warps_per_row != 2 && warps_per_row != 4 &&
      warps_per_row != 8) {
    TVM_FFI_THROW(ValueError) << "warps_per_row must be 0 (choose), 1, 2, 4 or 8, got "
                              << warps_per_row;
  }
  check_dtype(indices, {kInt64, kInt32}, "indices");
  check_topk_output(indices, x, k, "indices");
  if (values.has_value()) {
    scope.check_same_device(*values, "values");
    check_same_dtype(*values, "values", x, "x");
    check_topk_output(*values, x, k, "values");
    check_no_overlap(*values, "values", indices, "indices");
  }
  if (rows.rows.rows == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    T* values_ptr = values.has_value() ? reinterpret_cast<T*>(data_bytes(*values)) : nullptr;
    if (same_dtype(indices.dtype(), kInt64)) {
      run_topk<T, int64_t>(scope, values_ptr, indices, x, rows, k, int(warps_per_row));
    } else {
      run_topk<T, int32_t>(scope, values_ptr, indices, x, rows, k, int(warps_per_row));
    }
  });
}
