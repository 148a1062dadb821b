// Elementary functions with one result on every machine: exp, log, pow, sin and cos evaluated by
// our own polynomials with a fixed sequence of IEEE double operations (compiled with
// -ffp-contract=off, no FMA, no libm), so that the engine's scalar uses (rotary angles, router
// sigmoids) give the same bits on any x86 or ARM machine whatever its libm. Accurate to a few
// units in the last place of a double (far below f32 rounding); not for |x| beyond the ranges
// noted. See docs/design/kernels.md "Determinism contract".
#pragma once

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

}  // namespace stoa::kernels
