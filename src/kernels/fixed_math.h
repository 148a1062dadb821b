// Elementary functions with one result on every machine: exp, log, pow, sin and cos evaluated by
// our own polynomials with a fixed sequence of IEEE double operations (compiled with
// -ffp-contract=off, no FMA, no libm), so that the engine's scalar uses (rotary angles, router
// sigmoids, the sampler's log-sum-exp and draw) give the same bits on any x86 or ARM machine
// whatever its libm. Against long double libm (tests/kernels/fixed_math_test.cpp): exp within
// 1.5 ulp (measured 1.10), log within 3 ulp (measured 2.79); far below f32 rounding. Not for |x|
// beyond the ranges noted. Vector versions over arrays: fixed_math_span.h. See
// docs/design/kernels.md "Determinism contract".
#pragma once
#include <array>

namespace stoa::kernels {

// e^x; 0 below -708, +inf above 709.78; NaN stays NaN.
double fixed_exp(double x);
// ln x for x > 0; -inf at 0, NaN below 0, +inf at +inf.
double fixed_log(double x);
// base^e for base > 0 (as exp(e * log(base))).
double fixed_pow(double base, double e);
// sin x and cos x for |x| < 2^30 (reduced by pi/2 in three parts).
void fixed_sincos(double x, double* sin_out, double* cos_out);
// e^x in f32 through the double version (correctly rounded in practice).
float fixed_expf(float x);

// The constants fixed_exp is made of, shared with its vector version (fixed_math_span.cpp), which
// runs the same sequence of operations in every lane.
namespace fixed_math_detail {
// Round-to-nearest-integer shifter 1.5 * 2^52: (x + s) - s rounds x (|x| < 2^51), ties to even.
inline constexpr double kShifter = 6755399441055744.0;
// ln 2 split: the high part has 32 significant bits, so n * kLn2Hi is exact for |n| < 2^20.
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;
inline constexpr double kInvLn2 = 1.44269504088896338700e+00;
// fixed_exp's range: e^-708 is still a normal double, e^709.78 the largest below overflow.
inline constexpr double kExpLo = -708.0;
inline constexpr double kExpHi = 709.78;
// e^r on |r| <= 0.35: Taylor coefficients 1/13!, ..., 1/1!, 1/0!, highest first (Horner).
inline constexpr std::array<double, 14> kExpTaylor = {1.0 / 6227020800.0,
                                                      1.0 / 479001600.0,
                                                      1.0 / 39916800.0,
                                                      1.0 / 3628800.0,
                                                      1.0 / 362880.0,
                                                      1.0 / 40320.0,
                                                      1.0 / 5040.0,
                                                      1.0 / 720.0,
                                                      1.0 / 120.0,
                                                      1.0 / 24.0,
                                                      1.0 / 6.0,
                                                      0.5,
                                                      1.0,
                                                      1.0};
}  // namespace fixed_math_detail

}  // namespace stoa::kernels
