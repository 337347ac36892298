// The core's own CUDA module: small kernels that exercise the shared headers (vector access,
// block reduction, arch helpers) and the launcher conventions (checks, device scope, stream).
// Used by `nox -s demo`, `oasr doctor --selftest` and the core's GPU tests; no family uses it.
#include "oasr/common/arch_dispatch.h"
#include "oasr/common/arch_facts.h"
#include "oasr/common/reduction.h"
#include "oasr/common/vec_dtypes.h"
#include "tvm_ffi_utils.h"

namespace oasr::selftest {

constexpr int kRowSumThreads = 256;

// out[r] = sum(x[r, :]) in float; one block per row, 128-bit loads when the row allows.
template <typename T, bool kVectorized>
__global__ void row_sum_kernel(float* __restrict__ out, const T* __restrict__ x, int64_t cols,
                               int64_t row_stride) {
  __shared__ float smem_partials[kRowSumThreads / kWarpSize];
  const T* row = x + blockIdx.x * row_stride;
  float acc = 0.0f;
  if constexpr (kVectorized) {
    constexpr int N = kVec128<T>;
    for (int64_t c = threadIdx.x * N; c < cols; c += kRowSumThreads * N) {
      Vec<T, N> v;
      v.load(row + c);
      float f[N];
      v.to_float(f);
#pragma unroll
      for (int i = 0; i < N; ++i) acc += f[i];
    }
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += kRowSumThreads) acc += to_float(row[c]);
  }
  acc = block_reduce_sum<kRowSumThreads>(acc, smem_partials);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// out[i] = x[i] * factor over contiguous data.
template <typename T>
__global__ void scale_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t n,
                             float factor) {
  constexpr int N = kVec128<T>;
  const int64_t num_vecs = n / N;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < num_vecs;
       v += int64_t(gridDim.x) * blockDim.x) {
    Vec<T, N> in;
    in.load(x + v * N);
    float f[N];
    in.to_float(f);
#pragma unroll
    for (int i = 0; i < N; ++i) f[i] *= factor;
    in.from_float(f);
    in.store(out + v * N);
  }
  for (int64_t i = num_vecs * N + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = from_float<T>(to_float(x[i]) * factor);
  }
}

__global__ void compiled_sm_kernel(int32_t* out) { out[0] = arch::compiled_sm(); }

}  // namespace oasr::selftest

using namespace oasr;

void row_sum(TensorView out, TensorView x) {
  DeviceScope scope(out);
  scope.check_same_device(x, "x");
  check_dtype(out, {kFloat32}, "out");
  RowView rows = as_rows(x, "x");
  check_contiguous(out, "out");
  check_no_overlap(out, "out", x, "x");
  if (out.numel() != rows.rows) {
    TVM_FFI_THROW(ValueError) << "out must have one element per row of x (" << rows.rows
                              << "), got shape " << shape_str(out);
  }
  if (rows.rows == 0) return;
  if (rows.rows > 0x7fffffff) TVM_FFI_THROW(ValueError) << "x has more than 2^31 rows";
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    const T* x_ptr = reinterpret_cast<const T*>(data_bytes(x));
    float* out_ptr = reinterpret_cast<float*>(data_bytes(out));
    const bool vectorized = is_aligned_16(x) && rows.cols % kVec128<T> == 0;
    dim3 grid(static_cast<unsigned>(rows.rows));
    if (vectorized) {
      selftest::row_sum_kernel<T, true><<<grid, selftest::kRowSumThreads, 0, scope.stream()>>>(
          out_ptr, x_ptr, rows.cols, rows.row_stride);
    } else {
      selftest::row_sum_kernel<T, false><<<grid, selftest::kRowSumThreads, 0, scope.stream()>>>(
          out_ptr, x_ptr, rows.cols, rows.row_stride);
    }
    OASR_CHECK_LAUNCH("row_sum kernel");
  });
}

void scale(TensorView out, TensorView x, double factor) {
  DeviceScope scope(out);
  scope.check_same_device(x, "x");
  check_same_dtype(out, "out", x, "x");
  check_same_shape(out, "out", x, "x");
  check_contiguous(x, "x");
  check_contiguous(out, "out");
  check_aligned_16(x, "x");
  check_aligned_16(out, "out");
  if (x.numel() == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    const int sms = num_sms(scope.device_id());
    if (sms == 0) TVM_FFI_THROW(RuntimeError) << "cannot read the multiprocessor count";
    const int64_t vecs = ceil_div<int64_t>(x.numel(), kVec128<T>);
    const unsigned blocks = static_cast<unsigned>(
        std::min<int64_t>(ceil_div<int64_t>(vecs, 256), int64_t(sms) * 8));
    selftest::scale_kernel<T><<<blocks, 256, 0, scope.stream()>>>(
        reinterpret_cast<T*>(data_bytes(out)), reinterpret_cast<const T*>(data_bytes(x)),
        x.numel(), static_cast<float>(factor));
    OASR_CHECK_LAUNCH("scale kernel");
  });
}

// The architecture the device code was compiled for, read on the device: [1] int32.
void compiled_sm(TensorView out) {
  DeviceScope scope(out);
  check_dtype(out, {kInt32}, "out");
  check_size(out, 0, 1, "out");
  selftest::compiled_sm_kernel<<<1, 1, 0, scope.stream()>>>(
      reinterpret_cast<int32_t*>(data_bytes(out)));
  OASR_CHECK_LAUNCH("compiled_sm kernel");
}

int64_t target_sm() { return arch::kTargetSm; }

int64_t sm_count(int64_t device) { return num_sms(static_cast<int>(device)); }
