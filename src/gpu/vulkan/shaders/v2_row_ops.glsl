// Engine arithmetic v2's row reductions for a workgroup of 32 invocations, shared by the shaders
// that include it (v2_rows.comp, v2_attention.comp). The including shader declares, before the
// #include, a storage buffer whose member `v2_row` (f32 bits) holds the rows worked on in place,
// and must run with local_size_x = 32. Invocation j owns partial sum j (the values i with
// i mod 32 = j, added in index order), and the 32 partials are reduced by the spec's tree
// s[j] += s[j + w], w = 16, 8, 4, 2, 1, in shared memory with a barrier per level: the same sum
// as kernels::v2's, never a subgroup operation (those have no defined order).

shared float v2_partial[32];
shared float v2_row_max[32];
shared uint v2_row_nan[32];

// The fixed tree over v2_partial[] (every invocation calls it; the result is v2_partial[0]).
float v2_tree_sum(uint j) {
  for (uint width = 16u; width >= 1u; width /= 2u) {
    barrier();
    if (j < width) {
      precise float s = v2_partial[j] + v2_partial[j + width];
      v2_partial[j] = s;
    }
  }
  barrier();
  return v2_partial[0];
}

// kernels::v2::softmax_row on v2_row[base .. base + n), in place, by the 32 invocations (each
// touches only its own elements until the sums meet in shared memory).
void v2_softmax_inplace(uint base, uint n, uint j) {
  float mx = uintBitsToFloat(0xff800000u);  // -inf
  uint nan = 0u;
  for (uint i = j; i < n; i += 32u) {
    const float v = v2_flush(uintBitsToFloat(v2_row[base + i]));
    v2_row[base + i] = floatBitsToUint(v);
    if (v2_is_nan_bits(floatBitsToUint(v))) nan = 1u;
    else if (v > mx) mx = v;  // exact in any order
  }
  v2_row_max[j] = mx;
  v2_row_nan[j] = nan;
  for (uint width = 16u; width >= 1u; width /= 2u) {
    barrier();
    if (j < width) {
      v2_row_max[j] = max(v2_row_max[j], v2_row_max[j + width]);  // neither is NaN
      v2_row_nan[j] = v2_row_nan[j] | v2_row_nan[j + width];
    }
  }
  barrier();
  mx = v2_row_max[0];
  // No finite maximum (a NaN, all -inf, or a +inf): the row is NaN.
  if (v2_row_nan[0] != 0u || (floatBitsToUint(mx) & V2_ABS) >= V2_INF) {
    for (uint i = j; i < n; i += 32u) v2_row[base + i] = V2_NAN;
    return;
  }
  precise float s = 0.0;
  for (uint i = j; i < n; i += 32u) {
    precise float shifted = uintBitsToFloat(v2_row[base + i]) - mx;
    const float e = v2_exp(shifted);
    v2_row[base + i] = floatBitsToUint(e);
    precise float next = s + e;
    s = next;
  }
  v2_partial[j] = s;
  const float inv = v2_recip(v2_tree_sum(j));
  for (uint i = j; i < n; i += 32u) {
    precise float p = uintBitsToFloat(v2_row[base + i]) * inv;
    v2_row[base + i] = floatBitsToUint(v2_flush(p));
  }
}
