// Experiment: how close the GEMM epilogue's exact GELU is to GELU, over every fp32 input.
//
// Session 27 replaced the epilogue's 0.5 x (1 + erff(x / sqrt 2)) with the normal-tail form of
// gemm_activation.cuh (`oasr::gemm::Gelu`: e^(-x^2/2) P(|x|) / Q(|x|), half the instructions).
// For each of the 2^32 fp32 bit patterns (NaN and infinities apart) both forms are compared with
// GELU in float64 (0.5 x erfc(-x / sqrt 2)): the largest fp32 relative error where |GELU| is a
// normal float, and after rounding to fp16 and bf16 (what the epilogue stores) how many outputs
// differ from the correctly rounded value and by how many units of the 16-bit type at most.
// Counted over every finite input and over |x| <= 10. It also prints the special values.
//
// Build from the repository root with CUTLASS's headers (experiments README):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I$CUT/include \
//     -Ipackages/oasr-gemm/src/oasr_gemm/include -Ipackages/oasr-jit/src/oasr_jit/include \
//     packages/oasr-gemm/benchmarks/experiments/gelu_epilogue_accuracy.cu -o gelu_accuracy
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "oasr/gemm/gemm_activation.cuh"

// The form the epilogue had through session 26.
struct GeluErff {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
};

struct Stats {
  unsigned long long mismatch[2][2];  // [fp16, bf16][all finite, |x| <= 10]
  unsigned long long inputs[2];       // [all finite, |x| <= 10]
  unsigned int max_ulp[2][2];
  unsigned long long worst_rel;       // relative error's bits << 32 | x's bits
};

// 16-bit values in an order where neighbours differ by one (sign-magnitude to biased)
__device__ int ordered16(uint16_t bits) {
  return (bits & 0x8000) ? 0x8000 - int(bits & 0x7fff) : 0x8000 + int(bits);
}

template <class Gelu>
__global__ void compare(Stats* stats) {
  unsigned long long mismatch[2][2] = {}, inputs[2] = {};
  unsigned int max_ulp[2][2] = {};
  unsigned long long worst = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    const uint32_t bits = uint32_t(i);
    const float x = __uint_as_float(bits);
    if (!isfinite(x)) continue;
    const double exact = 0.5 * double(x) * erfc(-double(x) * 0.70710678118654752440);
    const float got = Gelu{}(x);
    const bool near = fabsf(x) <= 10.0f;
    inputs[0]++;
    inputs[1] += near;
    const uint16_t h_got = __half_as_ushort(__float2half_rn(got));
    const uint16_t h_exact = __half_as_ushort(__double2half(exact));
    const uint16_t b_got = __bfloat16_as_ushort(__float2bfloat16_rn(got));
    const uint16_t b_exact = __bfloat16_as_ushort(__double2bfloat16(exact));
    const unsigned int ulps[2] = {unsigned(abs(ordered16(h_got) - ordered16(h_exact))),
                                  unsigned(abs(ordered16(b_got) - ordered16(b_exact)))};
    for (int t = 0; t < 2; ++t) {
      mismatch[t][0] += ulps[t] != 0;
      mismatch[t][1] += near && ulps[t] != 0;
      max_ulp[t][0] = max(max_ulp[t][0], ulps[t]);
      if (near) max_ulp[t][1] = max(max_ulp[t][1], ulps[t]);
    }
    if (fabs(exact) >= 1.1754943508222875e-38) {
      const float rel = float(fabs((double(got) - exact) / exact));
      const unsigned long long key = (uint64_t(__float_as_uint(rel)) << 32) | bits;
      worst = key > worst ? key : worst;
    }
  }
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r) {
      atomicAdd(&stats->mismatch[t][r], mismatch[t][r]);
      atomicMax(&stats->max_ulp[t][r], max_ulp[t][r]);
    }
  atomicAdd(&stats->inputs[0], inputs[0]);
  atomicAdd(&stats->inputs[1], inputs[1]);
  atomicMax(&stats->worst_rel, worst);
}

template <class Gelu>
__global__ void specials(float* out) {
  const float x[8] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, -13.0f, -14.0f, 1e30f};
  for (int i = 0; i < 8; ++i) out[i] = Gelu{}(x[i]);
}

template <class Gelu>
void report(const char* name) {
  Stats* d;
  cudaMalloc(&d, sizeof(Stats));
  cudaMemset(d, 0, sizeof(Stats));
  compare<Gelu><<<132 * 16, 256>>>(d);
  Stats s;
  cudaMemcpy(&s, d, sizeof(Stats), cudaMemcpyDeviceToHost);
  float* dv;
  cudaMalloc(&dv, 8 * sizeof(float));
  specials<Gelu><<<1, 1>>>(dv);
  float v[8];
  cudaMemcpy(v, dv, sizeof(v), cudaMemcpyDeviceToHost);
  if (cudaGetLastError() != cudaSuccess) std::printf("CUDA error\n");
  const uint32_t rel_bits = uint32_t(s.worst_rel >> 32), x_bits = uint32_t(s.worst_rel);
  float rel, worst_x;
  std::memcpy(&rel, &rel_bits, 4);
  std::memcpy(&worst_x, &x_bits, 4);
  std::printf("%s: largest relative error %.3g at x = %.6g (|GELU| normal)\n", name, rel, worst_x);
  const char* range[2] = {"all finite x", "|x| <= 10"};
  for (int r = 0; r < 2; ++r)
    std::printf("  %-12s (%llu inputs): fp16 %llu differ from correctly rounded (%.4f%%, max %u "
                "ulp), bf16 %llu (%.4f%%, max %u ulp)\n",
                range[r], s.inputs[r], s.mismatch[0][r], 100.0 * s.mismatch[0][r] / s.inputs[r],
                s.max_ulp[0][r], s.mismatch[1][r], 100.0 * s.mismatch[1][r] / s.inputs[r],
                s.max_ulp[1][r]);
  std::printf("  GELU(inf, -inf, nan, 0, -0, -13, -14, 1e30) = %g %g %g %g %g %g %g %g\n", v[0],
              v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
  cudaFree(d);
  cudaFree(dv);
}

int main() {
  report<GeluErff>("erff form (through session 26)");
  report<oasr::gemm::Gelu>("normal-tail form (oasr::gemm::Gelu)");
  return 0;
}
