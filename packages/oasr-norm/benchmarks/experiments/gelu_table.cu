// Experiment (session 22): exact GELU on 16-bit data as a table lookup.
//
// Why: exact GELU is the one activation under 75% of copy in the bench (64% at 8000 x 2048, 80%
// at 32000 x 5120, where relu / swish / sigmoid reach 79-92% / 98%): erff is two polynomial
// branches, ~25 FMA-pipe instructions an element, and a warp of mixed inputs runs both. A 16-bit
// input has only 65536 values, so GELU of every one of them, rounded to the dtype, is a 128 KB
// table: one shared-memory load an element instead of erff. Its entries come from float64
// (x * erfc(-x / sqrt 2) / 2, rounded once to the dtype: the correctly rounded GELU), not from
// PyTorch's float32 formula, so they are at least as accurate as PyTorch's.
//
// The table fills most of an SM's shared memory, so its kernel is persistent: one block an SM
// copies the table from global memory (L2 after the first block) and then walks the tensor in
// steps of two 16-byte vectors a thread, loading the next step before it maps the current one.
//
// Variants, timed on hashed inputs uniform over [-4, 4):
//   0 the library's erff GELU kernel       1 the library's relu (the memory-bound reference)
//   2 table in shared memory, 1024 threads  3 table in shared memory, 512 threads
//   4 table gathered from global memory (L1) by the library's chunked launch shape
//   5 the table copy alone (variant 2 with no elements)
// Each table variant is checked bit for bit against the host's table; the library's erff GELU
// (bit-identical to PyTorch's F.gelu) is compared with the table over all 65536 inputs: how
// many differ, by how many ulps, and where. -DDTYPE=0 half, 1 bf16; build line in README.md.
//
// H200 (session 22). Every table variant equal to the host's table on every output. The erff
// GELU against the table over all 65536 inputs: fp16 373 differ (328 by one ulp; 298 below x =
// -4, where PyTorch's 1 + erff cancels; worst 2 ulps at x = -4.05), bf16 201 (14 by one ulp; 200
// below -4, worst x = -5.56: erff gives -0, the table -7.4e-8). us as graph replays / one call
// between events:
//                          fp16 8000x2048   fp16 32000x5120   bf16 8000x2048   bf16 32000x5120
//   library gelu (erff)    21.62 / 24.54    189.75 / 196.54   21.77 / 24.61    188.15 / 194.94
//   library relu           16.44 / 18.85    155.90 / 157.12   16.42 / 18.85    155.88 / 157.09
//   table smem, 1024 thr   19.23 / 21.86    174.87 / 169.28   19.19 / 21.89    173.98 / 168.96
//   table smem, 512 thr    22.24 / 24.96    186.73 / 189.63   22.18 / 24.90    186.67 / 189.15
//   table global (L1)      25.13 / 28.00    199.17 / 200.90   19.02 / 21.28    157.35 / 158.72
//   table copy alone        2.63 /  5.31
// Adopted: the shared-memory table with 1024 threads (oasr/norm/gelu_table.cuh), for contiguous
// tensors of 4M+ elements (gelu_table_sizes.py), with the table made on the device from the erff
// kernel's own expression instead of this probe's float64 one, so that the bits are PyTorch's
// whichever kernel runs. The global
// table through L1 is fast only where the inputs use few entries: bf16's 7-bit mantissa puts
// these inputs on ~1000 of them, fp16's on ~8000, and then it is the slowest variant.
// gelu_table_fill.cu tries to shorten the table copy.
#include <cstring>
#include <vector>

#include "oasr/norm/activation.cuh"
#include "probe_util.cuh"

using namespace oasr;

constexpr int kEntries = 1 << 16;
constexpr int kTableBytes = kEntries * 2;

// The nearest value of a format with kMant stored mantissa bits and smallest normal exponent
// kMinExp to d, ties to even (d / ulp and q * ulp are exact: ulp is a power of two).
template <int kMant, int kMinExp>
double round_to_format(double d) {
  if (!std::isfinite(d) || d == 0) return d;
  int e;
  std::frexp(d, &e);
  const double ulp = std::ldexp(1.0, std::max(e - 1, kMinExp) - kMant);
  return std::nearbyint(d / ulp) * ulp;  // overflow: float(q) below rounds to inf
}

uint16_t bits_of(T v) {
  uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

T from_bits(uint16_t b) {
  T v;
  std::memcpy(&v, &b, 2);
  return v;
}

// table[bits] = GELU of the 16-bit value with those bits, correctly rounded.
std::vector<uint16_t> gelu_table() {
  std::vector<uint16_t> table(kEntries);
  for (int b = 0; b < kEntries; ++b) {
    const double x = to_float(from_bits(uint16_t(b)));
    const double g = x * 0.5 * std::erfc(-x * 0.70710678118654752440);
#if DTYPE == 0
    const double q = round_to_format<10, -14>(g);
#else
    const double q = round_to_format<7, -126>(g);
#endif
    table[b] = bits_of(from_float<T>(float(q)));  // q is exact in float; float -> T exact
  }
  return table;
}

OASR_DEVICE uint32_t map_word(const uint16_t* tab, uint32_t w) {
  return uint32_t(tab[w & 0xffff]) | (uint32_t(tab[w >> 16]) << 16);
}

OASR_DEVICE uint4 map_vec(const uint16_t* tab, uint4 v) {
  return make_uint4(map_word(tab, v.x), map_word(tab, v.y), map_word(tab, v.z),
                    map_word(tab, v.w));
}

// Persistent: gridDim.x blocks (one an SM), each copies the table to shared memory, then takes
// steps of 2 * kThreads vectors, the next step's loads issued before the current one is mapped.
template <int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    table_smem(uint4* out, const uint4* x, int64_t num_vecs, const uint4* table) {
  extern __shared__ uint4 smem[];
  norm::PersistentVecWalk<kThreads> walk(x, out, num_vecs);
  for (int i = threadIdx.x; i < kTableBytes / 16; i += kThreads) smem[i] = table[i];
  __syncthreads();
  const uint16_t* tab = reinterpret_cast<const uint16_t*>(smem);
  walk.run([&](uint4 q) { return map_vec(tab, q); });
}

int ulp_distance(uint16_t p, uint16_t q) {
  auto ordered = [](uint16_t b) { return b & 0x8000 ? -int(b & 0x7fff) : int(b); };
  return std::abs(ordered(p) - ordered(q));
}

bool is_nan_bits(uint16_t b) {
  return DTYPE == 0 ? (b & 0x7c00) == 0x7c00 && (b & 0x3ff) : (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int sms;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (auto f : {table_smem<1024>, table_smem<512>}) {
    CHECK_CUDA(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, kTableBytes));
  }
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  const std::vector<uint16_t> table = gelu_table();
  uint16_t* d_table;
  CHECK_CUDA(cudaMalloc(&d_table, kTableBytes));
  CHECK_CUDA(cudaMemcpy(d_table, table.data(), kTableBytes, cudaMemcpyHostToDevice));

  // The library's erff GELU over every 16-bit input against the table.
  {
    std::vector<uint16_t> all(kEntries), lib(kEntries);
    for (int b = 0; b < kEntries; ++b) all[b] = uint16_t(b);
    T *dx, *dy;
    CHECK_CUDA(cudaMalloc(&dx, kTableBytes));
    CHECK_CUDA(cudaMalloc(&dy, kTableBytes));
    CHECK_CUDA(cudaMemcpy(dx, all.data(), kTableBytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(norm::launch_activation<norm::Activation::kGelu>(
        norm::ActivationArgs<T>{dy, dx, 1, kEntries, kEntries}, s));
    CHECK_CUDA(cudaMemcpy(lib.data(), dy, kTableBytes, cudaMemcpyDeviceToHost));
    int differ = 0, one_ulp = 0, worst = 0, worst_at = 0, nan_mismatch = 0;
    int tail_differ = 0;  // x < -4, where PyTorch's 1 + erff(x / sqrt 2) cancels
    for (int b = 0; b < kEntries; ++b) {
      if (is_nan_bits(table[b]) || is_nan_bits(lib[b])) {
        nan_mismatch += is_nan_bits(table[b]) != is_nan_bits(lib[b]);
        continue;
      }
      if (table[b] == lib[b]) continue;
      ++differ;
      const int d = ulp_distance(table[b], lib[b]);
      one_ulp += d == 1;
      if (to_float(from_bits(uint16_t(b))) < -4.0f) ++tail_differ;
      if (d > worst) {
        worst = d;
        worst_at = b;
      }
    }
    printf("%s all 65536 inputs: library erff GELU vs correctly rounded table: %d differ "
           "(%d by 1 ulp, %d at x < -4), worst %d ulps at x = %g (lib %g, table %g), NaN "
           "mismatches %d\n",
           kDtype, differ, one_ulp, tail_differ, worst, to_float(from_bits(uint16_t(worst_at))),
           to_float(from_bits(lib[worst_at])), to_float(from_bits(table[worst_at])),
           nan_mismatch);
    cudaFree(dx);
    cudaFree(dy);
  }

  for (const auto shape : {std::pair<int64_t, int64_t>{8000, 2048}, {32000, 5120}}) {
    const int64_t rows = shape.first, cols = shape.second;
    const int64_t n = rows * cols, num_vecs = n / kVec128<T>;
    RotatingSets sets(n, -4.0f);
    auto launch = [&](int k, T* y, const T* x) {
      auto* yv = reinterpret_cast<uint4*>(y);
      const auto* xv = reinterpret_cast<const uint4*>(x);
      const auto* tv = reinterpret_cast<const uint4*>(d_table);
      switch (k) {
        case 0:  // the erff kernel (launch_activation now takes a table at these sizes)
          norm::launch_chunked<Vec<T, kVec128<T>>>(
              norm::activation_kernel<norm::Activation::kGelu, T, kVec128<T>, true>,
              norm::ActivationArgs<T>{y, x, rows, cols, cols}, IndexDivmod(), num_vecs, s);
          break;
        case 1:
          norm::launch_activation<norm::Activation::kRelu>(
              norm::ActivationArgs<T>{y, x, rows, cols, cols}, s);
          break;
        case 2: table_smem<1024><<<sms, 1024, kTableBytes, s>>>(yv, xv, num_vecs, tv); break;
        case 3: table_smem<512><<<sms, 512, kTableBytes, s>>>(yv, xv, num_vecs, tv); break;
        case 4:
          table_l1<<<unsigned((num_vecs + 255) / 256), 128, 0, s>>>(yv, xv, num_vecs,
                                                                       d_table);
          break;
        default: table_smem<1024><<<sms, 1024, kTableBytes, s>>>(yv, xv, 0, tv); break;
      }
    };
    // Correctness: each table variant bit for bit against the host table.
    for (int k = 2; k <= 4; ++k) {
      const int64_t bad = table_mismatches(k, sets, n, table, s, launch);
      printf("%s %lldx%lld variant %d: %lld of %lld outputs differ from the host table\n", kDtype,
             (long long)rows, (long long)cols, k, (long long)bad, (long long)n);
    }
    const std::vector<const char*> names = {"library gelu (erff)", "library relu",
                                            "table smem 1024 thr", "table smem 512 thr",
                                            "table global (L1)",   "table copy alone"};
    print_elementwise_times(names, sets, rows, cols, s, launch);
  }
  return 0;
}
