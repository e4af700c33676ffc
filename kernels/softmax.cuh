// The forward's softmax rules, one definition for both tensor-core kernels (the mma.sync
// kernel, varlen_attention.cuh, and the wgmma kernel, sm90a/varlen_attention_wgmma.cuh):
// the scales, the softcap, the mask of a key tile, the online softmax of a tile of S and the
// epilogue's normalisation. The backward's P / dS rule (p_and_ds, varlen_attention_bwd.cuh)
// is shared by its two kernels the same way.
//
// Both kernels hold a warp's 16-row slice of S and O in the m16n8 accumulator layout (PTX ISA,
// "mma.m16n8k16"; wgmma's accumulators have the same layout per warp): element e of 8-column
// block i belongs to row (lane / 4) + 8 (e / 2), column 8 i + 2 (lane % 4) + (e % 2). The
// mma.sync kernel stores a block as [i][e], the wgmma kernel as [4 i + e]; `frag` names
// either, so the helpers below are written once over (i, e). Each row is spread over the 4
// lanes of a quad; its max and sum are reduced over the thread's columns as trees (every
// index a compile-time constant: the values stay in registers) and across the quad by
// shuffles.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "contract/fa2_forward.hpp"
#include "device_common.cuh"

namespace ad::kern {

inline constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Element (i, e) of an m16n8 accumulator tile held as [i][e] or as [4 i + e].
template <int NB>
__device__ __forceinline__ float& frag(float (&s)[NB][4], int i, int e) {
  return s[i][e];
}
template <int N>
__device__ __forceinline__ float& frag(float (&s)[N], int i, int e) {
  return s[4 * i + e];
}

// The scales of a call: FA2 scales S by softmax_scale before the softmax, or, with a softcap,
// inside the tanh (s = softcap * tanh(scale * s / softcap)) and then by 1.
struct SoftmaxScale {
  float nat;      // the scale of S in the softmax and the LSE (1 under softcap)
  float log2;     // nat * log2(e): the exponent's scale (exp2)
  float cap_in;   // softmax_scale / softcap (0 without softcap)
  float softcap;  // 0: none
};
template <class Params>
__device__ __forceinline__ SoftmaxScale softmax_scale_of(const Params& p) {
  const float nat = p.softcap > 0.f ? 1.f : p.softmax_scale;
  return {nat, nat * kLog2e, p.softcap > 0.f ? p.softmax_scale / p.softcap : 0.f, p.softcap};
}

// s = softcap * tanh(s * scale / softcap) over a tile of NB 8-column blocks (no-op without softcap).
template <int NB, class S>
__device__ __forceinline__ void softcap_tile(S& s, const SoftmaxScale& sc) {
  if (sc.softcap > 0.f) {
#pragma unroll
    for (int i = 0; i < NB; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) frag(s, i, e) = sc.softcap * tanhf(frag(s, i, e) * sc.cap_in);
  }
}

// Whether the key tile [n0, n0 + bn) hides a key from a row of the query tile [row0, row0 +
// bm): it reaches outside the keys the CTA reads, [key_lo, key_hi), or crosses a row's causal
// / window bound (fa2::block_needs_mask). Only such tiles are masked.
template <class Key>
__device__ __forceinline__ bool tile_needs_mask(int n0, int bn, int row0, int bm, int32_t len_q, int32_t len_k,
                                                const fa2::Flags& flags, Key key_lo, Key key_hi) {
  return n0 + bn > key_hi || n0 < key_lo || fa2::block_needs_mask(n0, bn, row0, bm, len_q, len_k, flags);
}

// The mask of this thread's part of a warp's 16-row tile of S over keys [n0, n0 + 8 NB):
// keys outside row r's fa2::key_limits (r = row_a for e < 2, row_a + 8 for e >= 2; the CTA
// reads keys [key_lo, key_hi)) get -inf. The limits are taken relative to the thread's first
// column, so each element costs two compares against a constant and a select. (The key range
// comes as two integers, built into the contract's TileRange here, of the width the kernel
// holds them in across its main loop: int in the wgmma kernel, as it held them before this
// helper existed; int64_t in the mma.sync kernel, where ptxas spills less so.)
template <int NB, class S, class Key>
__device__ __forceinline__ void mask_tile(S& s, int n0, int row_a, int lane, int32_t len_q, int32_t len_k,
                                          const fa2::Flags& flags, Key key_lo, Key key_hi) {
  fa2::TileRange keys{};
  keys.key_begin = key_lo;
  keys.key_end = key_hi;
  const int cb = n0 + 2 * (lane & 3);
  int lo_rel[2], hi_rel[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const fa2::KeyLimits kl = fa2::key_limits(row_a + half * 8, len_q, len_k, flags, keys);
    lo_rel[half] = int(kl.lo - cb);
    hi_rel[half] = int(kl.hi - cb);
  }
#pragma unroll
  for (int i = 0; i < NB; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = i * 8 + (e & 1);
      if (c < lo_rel[e >> 1] || c >= hi_rel[e >> 1]) frag(s, i, e) = -INFINITY;
    }
}

// t[0] = op over t[0 .. 2W) as a tree (every index a compile-time constant: t stays in registers).
template <int W, int N, class Op>
__device__ __forceinline__ void tree_reduce(float (&t)[N], Op op) {
  if constexpr (W > 0) {
#pragma unroll
    for (int i = 0; i < W; ++i) t[i] = op(t[i], t[i + W]);
    tree_reduce<W / 2>(t, op);
  }
}

// The online softmax of one tile of S (NB 8-column blocks, masked): for each of the thread's
// two rows, the running max m and the thread's partial sum l are updated, s becomes
// exp(scale (s - m)) (2^(s scale log2(e) - m scale log2(e))), and corr is the factor the
// row's O accumulators must be scaled by (rescale_rows). A row whose keys are all masked keeps
// m = -inf and contributes zeros.
template <int NB, class S>
__device__ __forceinline__ void online_softmax(S& s, float (&m)[2], float (&l)[2], float (&corr)[2], float scale_log2) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float t[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) t[i] = fmaxf(frag(s, i, 2 * half), frag(s, i, 2 * half + 1));
    tree_reduce<NB / 2>(t, [](float a, float b) { return fmaxf(a, b); });
    float mx = fmaxf(m[half], t[0]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_scaled = (mx == -INFINITY ? 0.f : mx) * scale_log2;
    corr[half] = fast_exp2(m[half] * scale_log2 - m_scaled);
    m[half] = mx;
#pragma unroll
    for (int i = 0; i < NB; ++i) {
      frag(s, i, 2 * half) = fast_exp2(fmaf(frag(s, i, 2 * half), scale_log2, -m_scaled));
      frag(s, i, 2 * half + 1) = fast_exp2(fmaf(frag(s, i, 2 * half + 1), scale_log2, -m_scaled));
      t[i] = frag(s, i, 2 * half) + frag(s, i, 2 * half + 1);
    }
    tree_reduce<NB / 2>(t, [](float a, float b) { return a + b; });
    l[half] = l[half] * corr[half] + t[0];
  }
}

// O's rows scaled by f[0] (row lane / 4) and f[1] (row lane / 4 + 8): DB 8-column blocks.
template <int DB, class O>
__device__ __forceinline__ void rescale_rows(O& o, const float (&f)[2]) {
#pragma unroll
  for (int i = 0; i < DB; ++i) {
    frag(o, i, 0) *= f[0];
    frag(o, i, 1) *= f[0];
    frag(o, i, 2) *= f[1];
    frag(o, i, 3) *= f[1];
  }
}

// The epilogue's normalisation: each row's sum reduced over its quad, O divided by it, and
// the row's LSE = m scale + log(l). A row with no key (l = 0, or NaN) keeps O = 0 and gets
// LSE = +inf (FA2: row_sum == 0).
template <int DB, class O>
__device__ __forceinline__ void finish_rows(O& o, const float (&m)[2], const float (&l)[2], float scale_nat,
                                            float (&lse)[2]) {
  float inv[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const bool empty = sum == 0.f || sum != sum;
    inv[half] = empty ? 1.f : 1.f / sum;
    lse[half] = empty ? INFINITY : m[half] * scale_nat + logf(sum);
  }
  rescale_rows<DB>(o, inv);
}

// A warp's 16-row tile of O, converted to T, into shared memory at rows r0 + lane / 4 (+ 8)
// of a tile laid out as Layout (Layout::offset(row, col)), 4 bytes per store.
template <class T, int DB, class Layout, class O>
__device__ __forceinline__ void stage_rows(T* dst, O& o, int r0, int lane) {
#pragma unroll
  for (int i = 0; i < DB; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = r0 + (lane >> 2) + half * 8;
      const int c = i * 8 + 2 * (lane & 3);
      *reinterpret_cast<uint32_t*>(dst + Layout::offset(r, c)) =
          Elem<T>::pack(frag(o, i, 2 * half), frag(o, i, 2 * half + 1));
    }
}

}  // namespace ad::kern
