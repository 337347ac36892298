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

// The polynomials are evaluated by Estrin's scheme (pairs of terms, then pairs of pairs, with
// the argument's powers r^2, r^4, r^8): the same operation count as Horner's rule, but a chain of
// 8 dependent operations instead of 28, which a GPU thread waits out one after another.

// exp(x) for -40 <= x <= 0: x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite: ln2 split in a high
// part with trailing zero bits, so k * kLn2Hi is exact), e^r by its Taylor series to r^13
// (remainder < 1e-17 relative), scaled by 2^k (exact: k >= -58).
OASR_LOG_MATH_FN double exp_nonpositive(double x) {
  constexpr double kInvLn2 = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double k = floor(x * kInvLn2 + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  // 1/n! for n = 0 .. 13, paired: (1/0! + r/1!), (1/2! + r/3!), ...
  const double p01 = 1.0 + r;
  const double p23 = 0.5 + r * (1.0 / 6.0);
  const double p45 = 1.0 / 24.0 + r * (1.0 / 120.0);
  const double p67 = 1.0 / 720.0 + r * (1.0 / 5040.0);
  const double p89 = 1.0 / 40320.0 + r * (1.0 / 362880.0);
  const double p1011 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0);
  const double p1213 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0);
  const double p0_3 = p01 + p23 * r2, p4_7 = p45 + p67 * r2, p8_11 = p89 + p1011 * r2;
  const double p = (p0_3 + p4_7 * r4) + (p8_11 + p1213 * r4) * r8;
#if defined(__CUDA_ARCH__)
  // 2^k from its bits (k in [-58, 0]): the same exact product as ldexp, without its range checks
  return p * __longlong_as_double(static_cast<long long>(1023 + static_cast<int>(k)) << 52);
#else
  return ldexp(p, static_cast<int>(k));
#endif
}

// log(1 + y) for 0 <= y <= 1: 2 atanh(s) = 2 (s + s z t(z)) with s = y / (2 + y) <= 1/3, z = s^2
// and t(z) = sum over n = 1 .. 16 of z^(n - 1) / (2 n + 1) (remainder < 2e-17 relative). Adding
// s last keeps the result within 2 ulp (tested).
OASR_LOG_MATH_FN double log1p_unit(double y) {
  const double s = y / (2.0 + y);
  const double z = s * s;
  const double z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  // 1 / (2 n + 1) for n = 1 .. 16, paired
  const double t12 = 1.0 / 3.0 + z * (1.0 / 5.0);
  const double t34 = 1.0 / 7.0 + z * (1.0 / 9.0);
  const double t56 = 1.0 / 11.0 + z * (1.0 / 13.0);
  const double t78 = 1.0 / 15.0 + z * (1.0 / 17.0);
  const double t910 = 1.0 / 19.0 + z * (1.0 / 21.0);
  const double t1112 = 1.0 / 23.0 + z * (1.0 / 25.0);
  const double t1314 = 1.0 / 27.0 + z * (1.0 / 29.0);
  const double t1516 = 1.0 / 31.0 + z * (1.0 / 33.0);
  const double t1_4 = t12 + t34 * z2, t5_8 = t56 + t78 * z2;
  const double t9_12 = t910 + t1112 * z2, t13_16 = t1314 + t1516 * z2;
  const double t = (t1_4 + t5_8 * z4) + (t9_12 + t13_16 * z4) * z8;
  return 2.0 * (s + s * (z * t));
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
