// The launcher of the cluster head: operand checks, tensor maps, the launch as a programmatic
// dependent. The kernel (what it computes and how):
// include/oasr/gemm/log_softmax_cluster_kernel_sm90.cuh.
#include "log_softmax_head_launch.h"
#include "oasr/gemm/log_softmax_cluster_kernel_sm90.cuh"

using namespace oasr;
using namespace oasr::head;
using namespace oasr::head::cluster;

namespace {

template <typename T, int kVec>
void launch(const HeadMaps& maps, const void* bias, TensorView out, int64_t M, int64_t V,
            const Layout& layout, int limit, const DeviceScope& scope) {
  auto kernel = log_softmax_cluster_kernel<T, kVec>;
  static std::atomic<uint64_t> opted_in{0};  // per device: the most shared memory, clusters of 16
  opt_in_shared_memory(kernel, limit, scope.device_id(), opted_in, "the cluster head",
                       /*non_portable_clusters=*/true);
  const int cluster = int((V + int64_t(layout.chunks) * kChunkN - 1) / (layout.chunks * kChunkN));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(cluster), unsigned((M + kRows - 1) / kRows));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = layout.bytes() + 1024;  // + the 1024-byte alignment
  config.stream = scope.stream();
  cudaLaunchAttribute attributes[2] = {};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = unsigned(cluster);
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = 2;
  check_cuda_status(cudaLaunchKernelEx(&config, kernel, maps, static_cast<const T*>(bias),
                                       reinterpret_cast<T*>(data_bytes(out)), int(M), int(V),
                                       layout),
                    "launching the cluster head");
}

}  // namespace

// out [M, V] (contiguous, 16-byte aligned) = log_softmax(a [M, K] · b [V, K]ᵀ + bias [V]):
// a's rows with any 16-byte-multiple stride and a unit column stride, b contiguous, K a
// multiple of 8 up to 512, V up to 16 CTAs' shared memory (12288 at any such K); sm_90 only.
// max_chunks caps the 128-column chunks a CTA owns (0: as many as fit); benchmarks set it.
void log_softmax_cluster_sm90(TensorView out, TensorView a, TensorView b, OptionalTensor bias,
                              int64_t max_chunks) {
  DeviceScope scope(out);
  const void* bias_ptr = check_head_operands(scope, out, a, b, bias, "the cluster head");
  const int64_t M = a.size(0), K = a.size(1), V = b.size(0);
  if (K > kMaxKChunks * kChunkK) {
    TVM_FFI_THROW(ValueError) << "the cluster head keeps A's rows in shared memory: K up to "
                              << kMaxKChunks * kChunkK << ", got K = " << K
                              << "; use the two-pass route";
  }
  if (max_chunks < 0) TVM_FFI_THROW(ValueError) << "max_chunks must be 0 (any) or positive";
  const int limit = shared_memory_limit(scope.device_id());
  const Layout layout =
      plan(V, K, limit, max_chunks == 0 ? kMaxCluster * 4 : int(std::min<int64_t>(max_chunks, 64)));
  if (V < 1 || layout.chunks == 0) {
    TVM_FFI_THROW(ValueError) << "the cluster head cannot split V = " << V << " at K = " << K
                              << " over 16 CTAs of " << limit << " bytes of shared memory; "
                              << "use the two-pass route";
  }
  if ((M + kRows - 1) / kRows > 65535) {
    TVM_FFI_THROW(ValueError) << "the cluster head takes up to " << 65535 * kRows
                              << " rows, got " << M << "; split the call";
  }
  if (M == 0) return;
  const HeadMaps maps{
      k_major_map(data_bytes(a), a.dtype(), M, K, a.size(0) > 1 ? a.stride(0) : K, kRows, "A"),
      k_major_map(data_bytes(b), b.dtype(), V, K, K, kChunkN, "B")};
  OASR_DISPATCH_HALF_DTYPE(out.dtype(), "out", T, [&] {
    if (V % 8 == 0) {
      launch<T, 8>(maps, bias_ptr, out, M, V, layout, limit, scope);
    } else if (V % 4 == 0) {
      launch<T, 4>(maps, bias_ptr, out, M, V, layout, limit, scope);
    } else if (V % 2 == 0) {
      launch<T, 2>(maps, bias_ptr, out, M, V, layout, limit, scope);
    } else {
      launch<T, 1>(maps, bias_ptr, out, M, V, layout, limit, scope);
    }
  });
}
