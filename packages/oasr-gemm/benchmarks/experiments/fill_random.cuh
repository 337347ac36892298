// The experiments' random fill: uniform in [-scale, scale), from a hash of the index and the seed
// (the same data on every run, no host round trip). T converts from float.
#pragma once

#include <cstddef>
#include <cstdint>

template <typename T>
__global__ void fill_random(T* x, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    x[i] = T(scale * (float(h >> 8) * (2.0f / 16777216.0f) - 1.0f));
  }
}
