// Splitting a flat index into (row, column) without a hardware division in the common case.
//
// A kernel that walks a [rows, cols] view by flat index needs n / cols and n % cols for every
// element or vector; a 64-bit division is ~60 instructions, more than the arithmetic of most
// memory-bound kernels. When every dividend is below 2^31 (the host knows the largest one), the
// quotient is one 32x32->64 multiply and a shift (Granlund & Montgomery, "Division by invariant
// integers using multiplication", PLDI 1994): with l = ceil(log2 d) and m = ceil(2^(31+l) / d),
// floor(n * m / 2^(31+l)) == floor(n / d) for all n < 2^31, and m < 2^32. Larger dividends fall
// back to the 64-bit division (a uniform branch: the flag is the same for every thread).
#pragma once

#include <cstdint>

#include "oasr/common/types.h"

namespace oasr {

struct IndexDivmod {
  int64_t divisor = 1;
  uint32_t multiplier = 0;
  uint32_t shift = 0;
  bool fast = false;  // every dividend is < 2^31 (and so is the divisor)

  IndexDivmod() = default;

  // `max_dividend`: the largest index that will be divided (the host's promise).
  __host__ IndexDivmod(int64_t d, int64_t max_dividend) : divisor(d) {
    constexpr int64_t kLimit = int64_t(1) << 31;
    fast = d > 0 && d < kLimit && max_dividend >= 0 && max_dividend < kLimit;
    if (fast) {
      uint32_t l = 0;
      while ((int64_t(1) << l) < d) ++l;
      const uint64_t numerator = uint64_t(1) << (31 + l);
      multiplier = static_cast<uint32_t>((numerator + uint64_t(d) - 1) / uint64_t(d));
      shift = 31 + l;
    }
  }

  // n / divisor without the branch, where the host checked `fast` (every dividend < 2^31).
  OASR_HOST_DEVICE uint32_t div_fast(uint32_t n) const {
    return static_cast<uint32_t>((uint64_t(n) * multiplier) >> shift);
  }
  OASR_HOST_DEVICE int64_t div(int64_t n) const {
    if (fast) {
      return static_cast<int64_t>((uint64_t(static_cast<uint32_t>(n)) * multiplier) >> shift);
    }
    return n / divisor;
  }
};

}  // namespace oasr
