// Log-space arithmetic of the CTC decoders, in double precision, the same bits everywhere.
//
// Scores are natural-log probabilities. log_add_exp(a, b) = log(exp(a) + exp(b)) is evaluated as
// hi + log1p(exp(lo - hi)) with exp and log1p written out here in +, -, *, /, floor and ldexp
// only: IEEE-754 rounds each of those exactly, so the CPU decoder (host C++ built with
// -ffp-contract=off), the GPU decoder (nvcc --fmad=false) and the tests' Python reference
// (decoder_reference.py, the same steps) get the same bits. libm's exp/log1p and CUDA's differ in
// the last bit now and then, which would break exact ties of scores (two token sequences of equal
// probability) differently on the two devices; with these, the CPU and GPU searches rank every
// candidate identically and return the same n-best, ties included. Accuracy: within a few ulp of
// the exact value (tested against libm).
//
// One shortcut, part of the definition: when the terms are more than 40 apart, the smaller one is
// dropped (exp(-40) < 5e-18: below the rounding of any score but those within 1e-2 of 0). It
// spares the series on the many lopsided merges, and keeps exp's argument where 2^k is normal.
//
// log_add_exp is symmetric bit for bit (log_add_exp(a, b) == log_add_exp(b, a)): a prefix's
// probability merges at most two terms per frame, so the result does not depend on the order in
// which a search visits its candidates.
#pragma once

#include <cmath>
#include <limits>

#if defined(__CUDACC__)
#define OASR_LOG_MATH_FN __host__ __device__ inline
#else
#define OASR_LOG_MATH_FN inline
#endif

namespace oasr::decoder {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// exp(x) for -40 <= x <= 0: x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite: ln2 split in a high
// part with trailing zero bits, so k * kLn2Hi is exact), e^r by its Taylor series to r^13
// (remainder < 1e-17 relative), scaled by 2^k (exact: k >= -58).
OASR_LOG_MATH_FN double exp_nonpositive(double x) {
  constexpr double kInvLn2 = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double k = floor(x * kInvLn2 + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  // 1/n! for n = 13 .. 2
  constexpr double kInvFactorial[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                      1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                      1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                      1.0 / 24.0,         1.0 / 6.0,         0.5};
  double p = kInvFactorial[0];
  for (int i = 1; i < 12; ++i) p = p * r + kInvFactorial[i];
  p = p * r + 1.0;
  p = p * r + 1.0;
#if defined(__CUDA_ARCH__)
  // 2^k from its bits (k in [-58, 0]): the same exact product as ldexp, without its range checks
  return p * __longlong_as_double(static_cast<long long>(1023 + static_cast<int>(k)) << 52);
#else
  return ldexp(p, static_cast<int>(k));
#endif
}

// log(1 + y) for 0 <= y <= 1: 2 atanh(s) with s = y / (2 + y) <= 1/3, the odd series to s^33
// (remainder < 2e-17 relative).
OASR_LOG_MATH_FN double log1p_unit(double y) {
  const double s = y / (2.0 + y);
  const double z = s * s;
  double q = 1.0 / 33.0;
  for (int n = 15; n >= 0; --n) q = q * z + 1.0 / (2 * n + 1);
  return 2.0 * (s * q);
}

// log(exp(a) + exp(b)); -inf when both are -inf.
OASR_LOG_MATH_FN double log_add_exp(double a, double b) {
  const double hi = a > b ? a : b;
  const double lo = a > b ? b : a;
  const double d = lo - hi;  // NaN when both are -inf
  if (!(d >= -40.0)) return hi;
  return hi + log1p_unit(exp_nonpositive(d));
}

}  // namespace oasr::decoder
