// group_gemm: G problems of one launch, D[rows of g] = A[rows of g] · B[g]ᵀ, the rows of group g
// being offsets[g] .. offsets[g + 1] (a segment GEMM: ragged batches, per-group weights).
//
// CUTLASS 2.x GemmGrouped (mma.sync, fp32 accumulation) with the device-only problem visitor: the
// problem sizes and pointers live in device arrays, filled by `group_gemm_prepare_kernel` from
// the offsets, so nothing is read back to the host and a launch is graph-capturable.
// A [total, K] and D [total, N] row-major, B [G, N, K] (each group an nn.Linear weight), 16-byte
// rows (K and N multiples of 8): the launcher checked them.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/device/gemm_grouped.h>
#include <cutlass/gemm/kernel/default_gemm_grouped.h>

#include <atomic>
#include <cstdint>

namespace oasr::gemm {

static_assert(sizeof(cutlass::gemm::GemmCoord) == 12,
              "oasr_gemm/grouped.py sizes the workspace for a 12-byte GemmCoord");

// The device arrays of one launch, carved from one workspace (`GroupArrays::bytes`).
template <typename T>
struct GroupArrays {
  int32_t* status;  // bit 0: some offsets were invalid (their groups are left empty)
  T** ptr_a;
  T** ptr_b;
  T** ptr_d;
  int64_t* lda;
  int64_t* ldb;
  int64_t* ldd;
  cutlass::gemm::GemmCoord* problems;

  static constexpr int64_t kHeader = 16;  // the status word, padded to 16 bytes
  static int64_t bytes(int64_t groups) {
    return kHeader + groups * (6 * 8 + static_cast<int64_t>(sizeof(cutlass::gemm::GemmCoord)));
  }
  static GroupArrays carve(void* workspace, int64_t groups) {
    char* p = static_cast<char*>(workspace);
    GroupArrays arr;
    arr.status = reinterpret_cast<int32_t*>(p);
    p += kHeader;
    arr.ptr_a = reinterpret_cast<T**>(p);
    arr.ptr_b = arr.ptr_a + groups;
    arr.ptr_d = arr.ptr_b + groups;
    arr.lda = reinterpret_cast<int64_t*>(arr.ptr_d + groups);
    arr.ldb = arr.lda + groups;
    arr.ldd = arr.ldb + groups;
    arr.problems = reinterpret_cast<cutlass::gemm::GemmCoord*>(arr.ldd + groups);
    return arr;
  }
};

// One thread per group. Invalid offsets (not starting at 0, decreasing, past `total`, or not
// ending at it) set the status bit and leave their groups empty.
template <typename T>
__global__ void group_gemm_prepare_kernel(const int32_t* offsets, int32_t groups, int64_t total,
                                          int32_t n, int32_t k, const T* a, int64_t lda,
                                          const T* b, int64_t b_group_stride, int64_t ldb, T* d,
                                          int64_t ldd, GroupArrays<T> arr) {
  const int32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  int64_t lo = offsets[g], hi = offsets[g + 1];
  const bool bad = lo < 0 || hi < lo || hi > total || (g == 0 && lo != 0) ||
                   (g == groups - 1 && hi != total);
  if (bad) {
    atomicOr(arr.status, 1);
    lo = hi = 0;
  }
  arr.problems[g] = cutlass::gemm::GemmCoord(static_cast<int>(hi - lo), n, k);
  arr.ptr_a[g] = const_cast<T*>(a + lo * lda);
  arr.ptr_b[g] = const_cast<T*>(b + g * b_group_stride);
  arr.ptr_d[g] = d + lo * ldd;
  arr.lda[g] = lda;
  arr.ldb[g] = ldb;
  arr.ldd[g] = ldd;
}

template <typename T>
struct Sm80GroupGemm {
  static constexpr int kAlign = 8;  // 16-byte accesses
  using Kernel = typename cutlass::gemm::kernel::DefaultGemmGrouped<
      T, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlign, T,
      cutlass::layout::ColumnMajor, cutlass::ComplexTransform::kNone, kAlign, T,
      cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<128, 128, 32>, cutlass::gemm::GemmShape<64, 64, 32>,
      cutlass::gemm::GemmShape<16, 8, 16>,
      cutlass::epilogue::thread::LinearCombination<T, kAlign, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1>, 4,
      cutlass::gemm::kernel::GroupScheduleMode::kDeviceOnly>::GemmKernel;
  using Gemm = cutlass::gemm::device::GemmGrouped<Kernel>;

  // Persistent CTAs for one wave: SMs × occupancy. Gemm::sufficient queries the occupancy on
  // every call; it is a property of the device, so it is asked once per device.
  static int threadblocks(int device, int num_sms) {
    constexpr int kMaxDevices = 64;
    static std::atomic<int> cached[kMaxDevices] = {};
    if (device < 0 || device >= kMaxDevices) return Gemm::sufficient(nullptr, 0, num_sms);
    int count = cached[device].load(std::memory_order_relaxed);
    if (count <= 0) {
      count = Gemm::sufficient(nullptr, 0, num_sms);
      cached[device].store(count, std::memory_order_relaxed);
    }
    return count;
  }

  // The grouped kernel over the prepared arrays.
  static cutlass::Status run(const GroupArrays<T>& arr, int32_t groups, int device, int num_sms,
                             cudaStream_t stream) {
    const int threadblocks = Sm80GroupGemm::threadblocks(device, num_sms);
    if (threadblocks <= 0) return cutlass::Status::kErrorInternal;
    typename Gemm::Arguments args(arr.problems, groups, threadblocks, {1.0f, 0.0f}, arr.ptr_a,
                                  arr.ptr_b, arr.ptr_d, arr.ptr_d, arr.lda, arr.ldb, arr.ldd,
                                  arr.ldd);
    Gemm gemm;
    // the device-only visitor needs no workspace
    cutlass::Status status = gemm.initialize(args, nullptr, stream);
    if (status != cutlass::Status::kSuccess) return status;
    return gemm.run(stream);
  }
};

}  // namespace oasr::gemm
