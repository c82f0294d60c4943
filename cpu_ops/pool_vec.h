// What the max-pooling kernels (cpu_ops/pool.cc, cpu_ops/pool_grad.cc) share: the rule of a running maximum, and
// pair shuffles on 32-byte generic vectors (GCC/clang vector_size(32)) of 8 floats or 4 doubles with constant
// indices (__builtin_shufflevector: GCC and clang) for the stride-2 loads and stores of 2-wide windows. Inline into
// the callers' clones.
#pragma once

namespace ot::cpu::pool_vec {

// Whether v takes over from the running maximum b when scanned after it: the first maximum wins (+0 does not replace
// -0); a NaN, once met, stays (as MaxPool's forward picks it). Branchless; the vector loops write the same
// expression on vectors.
template <typename T>
inline bool TakesMax(T v, T b) {
  return (v > b) | ((v != v) & (b == b));
}

// e, o = the even and the odd lanes of a0 followed by a1: (a0[0] a0[2] ... a1[L-2]) and (a0[1] a0[3] ... a1[L-1]).
template <typename V>
inline __attribute__((always_inline)) void SplitEvenOdd(const V& a0, const V& a1, V& e, V& o) {
  if constexpr (sizeof(a0[0]) == 4) {
    e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14);
    o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15);
  } else {
    e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6);
    o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7);
  }
}

// lo, hi = a and b interleaved (a[0] b[0] a[1] b[1] ...): the first and the second half. SplitEvenOdd's inverse.
template <typename V>
inline __attribute__((always_inline)) void Interleave(const V& a, const V& b, V& lo, V& hi) {
  if constexpr (sizeof(a[0]) == 4) {
    lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
  } else {
    lo = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    hi = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  }
}

}  // namespace ot::cpu::pool_vec
