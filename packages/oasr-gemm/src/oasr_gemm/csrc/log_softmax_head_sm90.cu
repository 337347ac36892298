// The launcher of the one-kernel head: operand checks, tensor maps, the launch as a programmatic
// dependent. The kernel (what it computes and how):
// include/oasr/gemm/log_softmax_head_kernel_sm90.cuh.
#include "log_softmax_head_launch.h"
#include "oasr/gemm/log_softmax_head_kernel_sm90.cuh"

using namespace oasr;
using namespace oasr::head;
using namespace oasr::head::one_cta;

namespace {

template <typename T, int kGroups, int kGroupCols>
void launch(const HeadMaps& maps, const void* bias, TensorView out, int64_t M, int64_t K, int64_t V,
            const DeviceScope& scope) {
  const int smem_bytes = int(sizeof(SharedStorage<T>)) + 1024;  // + the 1024-byte alignment
  static std::atomic<uint64_t> opted_in{0};  // per device
  auto kernel = log_softmax_head_kernel<T, kGroups, kGroupCols>;
  opt_in_shared_memory(kernel, smem_bytes, scope.device_id(), opted_in, "the one-kernel head");
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned((M + kRows - 1) / kRows));
  config.blockDim = dim3(kGroups * 128);
  config.dynamicSmemBytes = smem_bytes;
  config.stream = scope.stream();
  cudaLaunchAttribute dependent{};  // programmatic dependent launch (the kernel's comment)
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &dependent;
  config.numAttrs = 1;
  check_cuda_status(cudaLaunchKernelEx(&config, kernel, maps, static_cast<const T*>(bias),
                                       reinterpret_cast<T*>(data_bytes(out)), int(M), int(K),
                                       int(V)),
                    "launching the one-kernel head");
}

}  // namespace

// out [M, V] (contiguous, 16-byte aligned) = log_softmax(a [M, K] · b [V, K]ᵀ + bias [V]):
// a's rows with any 16-byte-multiple stride and a unit column stride, b contiguous, V <= 512,
// K a multiple of 8 and at least 1; sm_90 only.
void log_softmax_head_sm90(TensorView out, TensorView a, TensorView b, OptionalTensor bias) {
  DeviceScope scope(out);
  const void* bias_ptr = check_head_operands(scope, out, a, b, bias, "the one-kernel head");
  const int64_t M = a.size(0), K = a.size(1), V = b.size(0);
  if (V < 1 || V > kCols) {
    TVM_FFI_THROW(ValueError) << "the one-kernel head takes 1 to " << kCols << " columns, got V = "
                              << V << "; larger vocabularies take the two-pass route";
  }
  if (M == 0) return;
  // warpgroups of 128 columns where they cover V with fewer columns than those of 256
  const int group_cols = V <= 128 || (V > 256 && V <= 384) ? 128 : 256;
  const HeadMaps maps{
      k_major_map(data_bytes(a), a.dtype(), M, K, a.size(0) > 1 ? a.stride(0) : K, kRows, "A"),
      k_major_map(data_bytes(b), b.dtype(), V, K, K, unsigned(group_cols), "B")};
  OASR_DISPATCH_HALF_DTYPE(out.dtype(), "out", T, [&] {
    if (V <= 128) {
      launch<T, 1, 128>(maps, bias_ptr, out, M, K, V, scope);
    } else if (V <= 256) {
      launch<T, 1, 256>(maps, bias_ptr, out, M, K, V, scope);
    } else if (V <= 384) {
      launch<T, 3, 128>(maps, bias_ptr, out, M, K, V, scope);
    } else {
      launch<T, 2, 256>(maps, bias_ptr, out, M, K, V, scope);
    }
  });
}
