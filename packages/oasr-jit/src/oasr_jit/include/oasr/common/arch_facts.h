// Per-architecture hardware facts (compile time) and per-device facts (run time, cached).
// Source of the constants: the CUDA C++ Programming Guide, "Technical Specifications per
// Compute Capability". Never hard-code an SM count: ask `num_sms(device)`.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace oasr {

struct ArchFacts {
  int sm;                         // 90 for sm_90
  int smem_per_sm_bytes;          // shared memory per multiprocessor
  int smem_per_block_optin_bytes; // largest dynamic shared memory a block may opt into
  int max_threads_per_sm;
  int regs_per_sm;
};

constexpr ArchFacts arch_facts(int sm) {
  switch (sm) {
    case 80: return {80, 164 * 1024, 163 * 1024, 2048, 65536};
    case 86: return {86, 100 * 1024, 99 * 1024, 1536, 65536};
    case 89: return {89, 100 * 1024, 99 * 1024, 1536, 65536};
    case 90: return {90, 228 * 1024, 227 * 1024, 2048, 65536};
    case 100: return {100, 228 * 1024, 227 * 1024, 2048, 65536};
    case 120: return {120, 100 * 1024, 99 * 1024, 1536, 65536};
    default: return {sm, 48 * 1024, 48 * 1024, 1024, 65536};  // conservative floor
  }
}

inline constexpr int kMaxDevices = 64;

// Multiprocessor count of `device`, asked of the runtime once per device and process.
// Returns 0 when the runtime cannot answer (the caller raises).
inline int num_sms(int device) {
  static std::atomic<int> cached[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  int value = cached[device].load(std::memory_order_relaxed);
  if (value == 0) {
    if (cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      cudaGetLastError();  // clear the (non-sticky) error this query left behind
      return 0;
    }
    cached[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

}  // namespace oasr
