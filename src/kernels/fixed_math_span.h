// fixed_exp over arrays and the log-sum-exp the sampler normalises with, in double, vectorised
// per SIMD target with the same bits on every target (SCALAR, SSE4, AVX2, AVX-512, NEON): each
// lane runs fixed_exp's exact sequence of operations (fixed_math.h), and a sum keeps 32 partial
// sums — value i goes to partial sum i mod 32 whatever the vector width — reduced by one fixed
// tree (s[j] += s[j + w], w = 16, 8, 4, 2, 1). The *_reference functions are the plain scalar
// transcription of that order (the tests' oracle and the documented definition). See
// docs/design/kernels.md "Determinism contract".
#pragma once
#include <cstddef>

namespace stoa::kernels {

// out[i] = fixed_exp(x[i] - shift), bit for bit; out may alias x.
void fixed_exp_array(const double* x, double shift, size_t n, double* out);

// Σ_i fixed_exp(x[i] - shift) in the fixed 32-partial-sum order. -inf entries add 0.
double fixed_sum_exp(const double* x, double shift, size_t n);
double fixed_sum_exp_reference(const double* x, double shift, size_t n);

// max_i x[i] + fixed_log(fixed_sum_exp(x, max)): ln Σ e^x[i] without overflow. -inf when n is 0
// or every entry is -inf. Entries must not be NaN or +inf.
double fixed_logsumexp(const double* x, size_t n);
double fixed_logsumexp_reference(const double* x, size_t n);

}  // namespace stoa::kernels
