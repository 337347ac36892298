// Experiment (session 23): does the GELU table gathered through L1 beat the shared-memory table
// for bfloat16, and how much does either depend on how the inputs spread over the table?
//
// gelu_table.cu (session 22, inputs uniform over [-4, 4)) timed a global table read through L1
// (the library's chunked launch shape, no table copy) as fast as relu for bf16 at 32000 x 5120
// (157 against the shared-memory table's 175 us as graph replays) and level with it at 8000 x
// 2048, but the slowest variant for fp16, whose inputs touch ~8000 entries, not ~1000: a warp's
// 32 lookups then fall in ~32 different sectors. So the L1 gather's speed depends on the data,
// the shared-memory table's much less. This probe times, per input distribution:
//   0 the library's gelu (launch_activation: the shared-memory table at these sizes)
//   1 the library's relu (the memory-bound reference)
//   2 the table gathered from global memory through L1 (the module's own table)
// over inputs uniform over [-4, 4); N(0, 1); N(0, 1) scaled by 64 (every binade from 2^-10 to
// 2^8 in use); and uniform random bit patterns (NaNs cleared: every entry alike, the worst case
// for any gather). Each variant's outputs are checked against the library's erff kernel (same
// bits by construction). -DDTYPE=0 half, 1 bf16; build line in README.md.
//
// H200 (session 23): every output of both tables equal to the erff kernel's, every distribution.
// One call between events, us (graph replays alike):
//                             library gelu (smem)   table via L1          relu
//   bf16 8000x2048  uniform   21.44                 21.57                 18.85
//                   N(0,1)    21.82                 21.66                 18.53
//                   N(0,64^2) 21.44                 21.98                 18.40
//                   bits      21.02                 32.96                 18.50
//   bf16 32000x5120 uniform   167.97                160.32                156.96
//                   N(0,1)    167.26                159.90                157.50
//                   N(0,64^2) 167.81                160.54                157.47
//                   bits      166.37                233.18                157.44
//   fp16 8000x2048  N(0,1)    21.70                 29.22                 18.75
//   fp16 32000x5120 N(0,1)    166.24                210.50                156.45
// The shared-memory table's time does not depend on the data; the L1 gather's does. For bf16 it
// is level at 8000 x 2048 and 4-5% faster at 32000 x 5120 where the inputs touch few entries,
// 40-57% slower on random bits; fp16 is slower everywhere. Not adopted: a data-independent
// kernel over 4% at one size.
#include <cstring>
#include <string>
#include <vector>

#include "oasr/norm/activation.cuh"
#include "probe_util.cuh"

using namespace oasr;

// p[i] by distribution: 0 uniform [-4, 4), 1 N(0, 1), 2 N(0, 64^2), 3 random bits (no NaN)
__global__ void fill_spread(T* p, size_t n, uint32_t seed, int kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = (uint32_t(i) * 2654435761u) ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    uint32_t g = h * 0x9e3779b9u + 0x7f4a7c15u;
    g ^= g >> 16; g *= 0x85ebca6bu; g ^= g >> 13;
    const float u1 = ((h >> 8) + 1) / 16777217.0f, u2 = (g >> 8) / 16777216.0f;
    const float normal = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (kind == 0) {
      p[i] = from_float<T>((h & 0xffff) / 65536.0f * 8.0f - 4.0f);
    } else if (kind == 1) {
      p[i] = from_float<T>(normal);
    } else if (kind == 2) {
      p[i] = from_float<T>(64.0f * normal);
    } else {
      uint16_t bits = uint16_t(h);
      const bool nan = DTYPE == 0 ? (bits & 0x7c00) == 0x7c00 : (bits & 0x7f80) == 0x7f80;
      if (nan) bits &= 0xbfff;  // clear the exponent's top bit: a finite value
      memcpy(&p[i], &bits, 2);
    }
  }
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  bool ready = false;
  CHECK_CUDA(norm::make_gelu_tables(s, &ready));
  if (!ready) return 1;
  void* table;  // the module's table, made by the line above
  CHECK_CUDA(cudaGetSymbolAddress(&table, DTYPE == 0 ? norm::detail::gelu_table_fp16
                                                     : norm::detail::gelu_table_bf16));
  const char* kinds[4] = {"uniform[-4,4)", "N(0,1)", "N(0,64^2)", "random bits"};
  for (const auto shape : {std::pair<int64_t, int64_t>{8000, 2048}, {32000, 5120}}) {
    const int64_t rows = shape.first, cols = shape.second;
    const int64_t n = rows * cols, num_vecs = n / kVec128<T>;
    RotatingSets sets(n, -4.0f);
    auto launch = [&](int k, T* y, const T* x) {
      const norm::ActivationArgs<T> a{y, x, rows, cols, cols};
      if (k == 0) {
        CHECK_CUDA(norm::launch_activation<norm::Activation::kGelu>(a, s));
      } else if (k == 1) {
        CHECK_CUDA(norm::launch_activation<norm::Activation::kRelu>(a, s));
      } else if (k == 2) {
        table_l1<<<unsigned((num_vecs + 255) / 256), 128, 0, s>>>(
            reinterpret_cast<uint4*>(y), reinterpret_cast<const uint4*>(x), num_vecs,
            static_cast<const uint16_t*>(table));
      } else {  // the erff kernel, the reference
        CHECK_CUDA((norm::launch_chunked<Vec<T, kVec128<T>>>(
            norm::activation_kernel<norm::Activation::kGelu, T, kVec128<T>, true>, a,
            IndexDivmod(), num_vecs, s)));
      }
    };
    for (int kind = 0; kind < 4; ++kind) {
      for (int k = 0; k < sets.sets; ++k) fill_spread<<<1024, 256, 0, s>>>(sets.xs[k], n, 7 + k, kind);
      CHECK_CUDA(cudaStreamSynchronize(s));
      // outputs of variants 0 and 2 against the erff kernel's, on set 0
      std::vector<uint16_t> want(n), got(n);
      launch(3, sets.ys[0], sets.xs[0]);
      CHECK_CUDA(cudaMemcpyAsync(want.data(), sets.ys[0], n * 2, cudaMemcpyDeviceToHost, s));
      for (int k : {0, 2}) {
        CHECK_CUDA(cudaMemsetAsync(sets.ys[0], 0xff, n * 2, s));
        launch(k, sets.ys[0], sets.xs[0]);
        CHECK_CUDA(cudaMemcpyAsync(got.data(), sets.ys[0], n * 2, cudaMemcpyDeviceToHost, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) bad += got[i] != want[i];
        printf("%s %lldx%lld %s variant %d: %lld outputs differ from the erff kernel\n", kDtype,
               (long long)rows, (long long)cols, kinds[kind], k, (long long)bad);
      }
      const std::string g = std::string(kinds[kind]) + " library gelu";
      const std::string r = std::string(kinds[kind]) + " library relu";
      const std::string l1 = std::string(kinds[kind]) + " table via L1";
      print_elementwise_times({g.c_str(), r.c_str(), l1.c_str()}, sets, rows, cols, s, launch);
    }
  }
  return 0;
}
