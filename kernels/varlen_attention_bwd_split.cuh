// The tensor-core varlen backward's key-block kernel at head dims 192 and 256 (bf16 / fp16),
// with the contract, the three launches and the checks of varlen_attention_bwd.cuh; its
// instantiations are varlen_attention_bwd_tc_d{192,256}_{bf16,fp16}.cu (one file per head dim
// and element type, so that they compile in parallel).
//
// FA2 walks these head dims in 64 x 64 tiles (flash_bwd_launch_template.h run_mha_bwd_hdim192 /
// hdim256: kBlockM = kBlockN = 64, 8 warps), so the key block is 64 keys (the contract's
// tile_for). The 64 and 128 kernel's layout, where each warp holds the dK and dV rows of its 16
// keys across the whole head dim, would need 2 D accumulator registers a thread (384 / 512):
// here the columns are split between two warps. Per query step of BM rows:
//
//   warp w = (key group kg = w % 4: keys 16 kg .. 16 kg + 15, half = w / 4)
//   1. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for the warp's 16 keys x BM / 2 query columns (its half);
//      P and dS as in the 64 / 128 kernel (p_and_ds), written to shared memory as Pᵀ and dSᵀ
//      ([BN][BM], swizzled);
//   2. dV += Pᵀ dO and dK += dSᵀ Q for the warp's 16 keys x D / 2 columns (its half), Pᵀ and
//      dSᵀ read back as A operands (ldmatrix);
//   3. dQ (BM x D) = dS K as in the 64 / 128 kernel: BM / 16 row tiles x column groups.
// The accumulators a thread holds across the walk are dK and dV of 16 x D / 2 (D / 2 registers
// together: 96 at 192, 128 at 256). BM is 32: K, V (64 x D), Q and dO (two buffers of BM x D),
// Pᵀ and dSᵀ take 104 KB at 192 and 136 KB at 256, inside an A100's 163 KB (sm_80 and sm_90 run
// the same instantiation). Every access goes through the same helpers as at 64 / 128
// (load_rows, load_row_stats, add_dq, write_dk_dv_rows, trim_walk, key_block_in_bounds), and the
// steps the two bodies share are one definition (steps_to_walk, start_walk, begin_query_step,
// load_key_block, load_query_step, s_dp_product, p_ds_step, dq_step), so the checked form
// records and refuses exactly what they do.
#pragma once

#include "varlen_attention_bwd.cuh"

namespace ad::kern::bwd {

template <int D, int BM>
struct BwdSplitShape {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockN = kSplitBlockN;           // keys per CTA (FA2's tile_n)
  static constexpr int kBlockM = BM;                     // query rows per step
  static constexpr int kKeyGroups = kBlockN / 16;        // 4 groups of 16 keys
  static constexpr int kHalves = kWarps / kKeyGroups;    // 2 warps per key group
  static constexpr int kSCols = BM / kHalves;            // query columns of a warp's Sᵀ / dPᵀ
  static constexpr int kKvCols = D / kHalves;            // dK / dV columns a warp holds
  static constexpr int kDqRowTiles = BM / 16;            // dQ = dS K: row tiles x column groups
  static constexpr int kDqColGroups = kWarps / kDqRowTiles;
  static constexpr int kDqCols = D / kDqColGroups;
  // elements of T: K, V, Q x2, dO x2, Pᵀ, dSᵀ; then fp32 LSE x2, softmax_d x2
  static constexpr size_t smem_elems() {
    return 2 * size_t(kBlockN) * D + 4 * size_t(BM) * D + 2 * size_t(kBlockN) * BM;
  }
  static constexpr size_t smem_bytes(size_t elem) { return smem_elems() * elem + 4 * BM * sizeof(float); }
  static_assert(kSCols % 16 == 0 && kKvCols % 16 == 0 && kDqCols % 16 == 0 && kDqRowTiles * kDqColGroups == kWarps,
                "the warp layouts cover the tiles in 16-column ldmatrix steps");
};

// Key block n_block (64 keys) of CTA `cta` (segment cta.y, head cta.z); its dq goes into
// dq_accum copy `split`.
template <class T, int D, int BM, bool Checked>
__device__ __forceinline__ void key_block_body_split(const VarlenBwdParams& p, const Cta& cta, int n_block, int split,
                                                     unsigned char* smem_raw) {
  using Shape = BwdSplitShape<D, BM>;
  constexpr int BN = Shape::kBlockN, NT = Shape::kThreads;
  constexpr int NBS = Shape::kSCols / 8;   // n8 blocks of the warp's Sᵀ / dPᵀ
  constexpr int KVB = Shape::kKvCols / 8;  // n8 blocks of the warp's dK / dV

  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ0 = sV + BN * D;        // Q [2][BM][D]
  T* sdO0 = sQ0 + 2 * BM * D;  // dO [2][BM][D]
  T* sP = sdO0 + 2 * BM * D;   // Pᵀ [BN][BM]
  T* sdS = sP + BN * BM;       // dSᵀ [BN][BM]
  float* sLse = reinterpret_cast<float*>(sdS + BN * BM);  // [2][BM], the LSE
  float* sDs = sLse + 2 * BM;                              // [2][BM], softmax_d

  const KeyBlockWalk w = key_block_walk(p, cta, n_block, BM, BN);
  if (w.kb.exits) return;  // FA2: n_block * kBlockN >= actual_seqlen_k
  const Segment& seg = w.seg;
  const int n0 = w.n0, key_valid = w.key_valid;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const Cta& at = w.at;
  const fa2::Flags& flags = w.flags;
  const int kr = (warp % Shape::kKeyGroups) * 16;  // the warp's first key row in the block
  const int half = warp / Shape::kKeyGroups;
  const int q0 = half * Shape::kSCols;   // the warp's first query column of Sᵀ / dPᵀ
  const int c0 = half * Shape::kKvCols;  // the warp's first dK / dV column

  float dk[KVB][4], dv[KVB][4];
  zero_frags(dk, dv);

  decltype(KeyBlockWalk::steps) run;
  if (!steps_to_walk<BM, BN, Checked>(p, w, n_block, run)) return;

  if (run.m_max > run.m_min) {
    start_walk<T, D, BM, BN, NT, Checked>(p, w, n_block, run, sK, sV, sQ0, sdO0, sLse, sDs);
    int buf = 0;
    const int key_a = n0 + kr + (lane >> 2);  // segment key of accumulator rows e < 2 (e >= 2: + 8)
    for (int m = int(run.m_max) - 1; m >= int(run.m_min); --m) {
      const int m0 = m * BM;
      // this step's tiles are in; every warp is done with the other buffer, sP and sdS
      begin_query_step<T, D, BM, NT, Checked>(p, w, run, m, buf, sQ0, sdO0, sLse, sDs);
      const T* sQ = sQ0 + buf * BM * D;
      const T* sdO = sdO0 + buf * BM * D;

      // 1. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: the warp's 16 keys x its kSCols query columns; P and dS
      // in place, then Pᵀ and dSᵀ into shared memory (rows: keys, columns: the step's queries)
      float s[NBS][4], dp[NBS][4];
      s_dp_product<T, D>(s, dp, sK, sV, sQ, sdO, kr, q0);
      p_ds_step(w.sm, fa2::block_needs_mask(n0, BN, m0, BM, seg.len_q, seg.len_k, flags), sLse + buf * BM,
                sDs + buf * BM, m0, q0, key_a, s, dp);
#pragma unroll
      for (int i = 0; i < NBS; ++i) {
        const int r0 = kr + (lane >> 2), cc = q0 + i * 8 + 2 * (lane & 3);
        *reinterpret_cast<uint32_t*>(sP + swz_ds<BM>(r0, cc)) = Elem<T>::pack(s[i][0], s[i][1]);
        *reinterpret_cast<uint32_t*>(sP + swz_ds<BM>(r0 + 8, cc)) = Elem<T>::pack(s[i][2], s[i][3]);
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0, cc)) = Elem<T>::pack(dp[i][0], dp[i][1]);
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0 + 8, cc)) = Elem<T>::pack(dp[i][2], dp[i][3]);
      }
      __syncthreads();  // Pᵀ and dSᵀ complete

      // 2. dV += Pᵀ dO and dK += dSᵀ Q: the warp's 16 keys x its kKvCols columns
#pragma unroll
      for (int kc = 0; kc < BM / 16; ++kc) {
        uint32_t pa[4], da[4];
        const int ar = kr + (lane & 7) + ((lane >> 3) & 1) * 8, ac = kc * 16 + (lane >> 4) * 8;
        ldmatrix_x4(pa, sP + swz_ds<BM>(ar, ac));
        ldmatrix_x4(da, sdS + swz_ds<BM>(ar, ac));
#pragma unroll
        for (int db2 = 0; db2 < KVB / 2; ++db2) {
          uint32_t of[4], qf[4];
          const int br = kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, bc = c0 + db2 * 16 + (lane >> 4) * 8;
          ldmatrix_x4_trans(of, sdO + swz<D>(br, bc));
          Mma<T>::run(dv[2 * db2], pa, of[0], of[1]);
          Mma<T>::run(dv[2 * db2 + 1], pa, of[2], of[3]);
          ldmatrix_x4_trans(qf, sQ + swz<D>(br, bc));
          Mma<T>::run(dk[2 * db2], da, qf[0], qf[1]);
          Mma<T>::run(dk[2 * db2 + 1], da, qf[2], qf[3]);
        }
      }

      // 3. dQ (BM x D) = dS K as in key_block_body
      dq_step<Shape, T, D, Checked>(p, w, split, m0, sdS, sK);
      buf ^= 1;
    }
  }

  // Epilogue: dK * scale and dV through sK / sV (no longer read) into dk / dv. A key block no
  // query block sees writes zeros, as FA2 does.
  __syncthreads();
  const float dk_scale = p.softmax_scale;
#pragma unroll
  for (int i = 0; i < KVB; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = kr + (lane >> 2) + hh * 8, c = c0 + i * 8 + 2 * (lane & 3);
      *reinterpret_cast<uint32_t*>(sK + swz<D>(r, c)) =
          Elem<T>::pack(dk[i][2 * hh] * dk_scale, dk[i][2 * hh + 1] * dk_scale);
      *reinterpret_cast<uint32_t*>(sV + swz<D>(r, c)) = Elem<T>::pack(dv[i][2 * hh], dv[i][2 * hh + 1]);
    }
  __syncthreads();
  write_dk_dv_rows<T, D, BN, NT, Checked>(p, at, seg, n_block, n0, key_valid, sK, sV);
}

// CTA (x, b, h) of the key-block grid (for_each_key_block), as varlen_bwd_kernel: the checked
// form runs the checked body only for a key block that can reach past a buffer.
template <class T, int D, int BM, bool Checked>
__global__ void __launch_bounds__(BwdSplitShape<D, BM>::kThreads, 1) varlen_bwd_split_kernel(const VarlenBwdParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const Cta at = this_cta(key_grid_x(p));
  for_each_key_block(p, at, [&](int n, int split) {
    if (n != at.x) __syncthreads();  // the previous block's epilogue reads are done
    if (Checked && !key_block_in_bounds(p, at, n, split))
      key_block_body_split<T, D, BM, true>(p, at, n, split, smem_raw);
    else
      key_block_body_split<T, D, BM, false>(p, at, n, split, smem_raw);
  });
}

// The instantiation of head dim D (192 or 256), block_m query rows per step (0: default_block_m).
template <class T, int D>
detail::BwdKernel bwd_kernel_split(int block_m, bool checked) {
  constexpr int BM = default_block_m(D);
  using Shape = BwdSplitShape<D, BM>;
  const int bm = block_m > 0 ? block_m : BM;
  if (bm != BM)
    throw cuda::LaunchConfigError("tensor-core varlen backward: head_dim " + std::to_string(D) + " block_m " +
                                  std::to_string(bm) + " has no instantiation (d" + std::to_string(D) + " m" +
                                  std::to_string(BM) + ")");
  return {checked ? &varlen_bwd_split_kernel<T, D, BM, true> : &varlen_bwd_split_kernel<T, D, BM, false>,
          Shape::kThreads, int(Shape::smem_bytes(sizeof(T)))};
}

}  // namespace ad::kern::bwd
