// Log-space arithmetic of the CTC decoders, in double precision.
//
// Scores are natural-log probabilities. log_add_exp is written so that it is symmetric bit for
// bit (log_add_exp(a, b) == log_add_exp(b, a)): a prefix's probability merges at most two terms
// per frame, so with a symmetric sum the result does not depend on the order in which the
// search visits its candidates, and the float64 reference of the tests, which evaluates the same
// expression with the same libm, reproduces every score exactly.
#pragma once

#include <cmath>
#include <limits>

namespace oasr::decoder {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)); -inf when both are -inf.
inline double log_add_exp(double a, double b) {
  const double hi = a > b ? a : b;
  const double lo = a > b ? b : a;
  if (hi == kNegInf) return kNegInf;
  return hi + std::log1p(std::exp(lo - hi));
}

}  // namespace oasr::decoder
