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
// (load_rows, load_row_stats, add_dq, write_dk_dv_rows, trim_walk, key_block_in_bounds), so the
// checked form records and refuses exactly what they do.
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
  constexpr int KD = D / 16;               // k16 steps over the head dim
  constexpr int DQ_COLS = Shape::kDqCols;
  constexpr int DQB = DQ_COLS / 8;

  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ0 = sV + BN * D;        // Q [2][BM][D]
  T* sdO0 = sQ0 + 2 * BM * D;  // dO [2][BM][D]
  T* sP = sdO0 + 2 * BM * D;   // Pᵀ [BN][BM]
  T* sdS = sP + BN * BM;       // dSᵀ [BN][BM]
  float* sLse = reinterpret_cast<float*>(sdS + BN * BM);  // [2][BM], the LSE
  float* sDs = sLse + 2 * BM;                              // [2][BM], softmax_d

  const int h = cta.z;
  const KeyBlockWalk w = key_block_walk(p, cta, n_block, BM, BN);
  if (w.kb.exits) return;  // FA2: n_block * kBlockN >= actual_seqlen_k
  const Segment& seg = w.seg;
  const int n0 = w.n0, h_kv = w.h_kv, tm = w.tm, key_valid = w.key_valid;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const Cta& at = w.at;
  const int64_t m_top = w.m_top;
  const int32_t cu_q_b = w.cu_q_b;
  const fa2::Flags& flags = w.flags;
  const StepMath& sm = w.sm;
  const int kr = (warp % Shape::kKeyGroups) * 16;  // the warp's first key row in the block
  const int half = warp / Shape::kKeyGroups;
  const int q0 = half * Shape::kSCols;   // the warp's first query column of Sᵀ / dPᵀ
  const int c0 = half * Shape::kKvCols;  // the warp's first dK / dV column

  float dk[KVB][4], dv[KVB][4];
#pragma unroll
  for (int i = 0; i < KVB; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  auto run = w.steps;
  if constexpr (Checked) {
    if (!trim_walk<BM, BN>(p, w, n_block, run)) return;
  }

  if (run.m_max > run.m_min) {
    load_rows<T, D, BN, NT, Checked>(p, at, static_cast<const T*>(p.k.data), p.k.heads, p.k.rows, p.k.buffer, sK,
                                     seg.start_k, n0, key_valid, h_kv, n_block, oc::kMainKeyReads, 0);
    load_rows<T, D, BN, NT, Checked>(p, at, static_cast<const T*>(p.v.data), p.v.heads, p.v.rows, p.v.buffer, sV,
                                     seg.start_k, n0, key_valid, h_kv, n_block, oc::kMainKeyReads,
                                     int64_t(order::kValueBit));
    // Q / dO / LSE / softmax_d of query block m into buffer `buf` (as key_block_body)
    auto load_q_block = [&](int m, int buf) {
      const int m0 = m * BM;
      load_rows<T, D, BM, NT, Checked>(p, at, static_cast<const T*>(p.q.data), p.q.heads, p.q.rows, p.q.buffer,
                                       sQ0 + buf * BM * D, seg.start_q, m0, seg.len_q, h, m0 / tm, oc::kMainQueryReads, 0,
                                       p.dout.rows == p.q.rows ? 2 : 1);  // a q row past q: its dO row too
      load_rows<T, D, BM, NT, Checked>(p, at, static_cast<const T*>(p.dout.data), p.dout.heads, p.dout.rows,
                                       p.dout.buffer, sdO0 + buf * BM * D, seg.start_q, m0, seg.len_q, h, m0 / tm,
                                       oc::kMainQueryReads, 0, p.dout.rows == p.q.rows ? 0 : 1);
      load_row_stats<BM, Checked>(p, at, seg, cu_q_b, tm, m0, sLse + buf * BM, sDs + buf * BM);
    };

    int buf = 0;
    load_q_block(int(run.m_max) - 1, 0);
    cp_async_commit();
    const int key_a = n0 + kr + (lane >> 2);  // segment key of accumulator rows e < 2 (e >= 2: + 8)
    for (int m = int(run.m_max) - 1; m >= int(run.m_min); --m) {
      const int m0 = m * BM;
      cp_async_wait<0>();
      __syncthreads();  // this block's tiles are in; every warp is done with the other buffer, sP and sdS
      if (m > run.m_min) load_q_block(m - 1, buf ^ 1);
      cp_async_commit();
      const T* sQ = sQ0 + buf * BM * D;
      const T* sdO = sdO0 + buf * BM * D;
      const float* lse = sLse + buf * BM;
      const float* dsm = sDs + buf * BM;

      // 1. Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: the warp's 16 keys x its kSCols query columns
      float s[NBS][4], dp[NBS][4];
#pragma unroll
      for (int i = 0; i < NBS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[i][e] = dp[i][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) {
        uint32_t ka[4], va[4];
        ldmatrix_x4(ka, sK + swz<D>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8));
        ldmatrix_x4(va, sV + swz<D>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int nb2 = 0; nb2 < NBS / 2; ++nb2) {
          uint32_t qf[4], of[4];
          const int qr = q0 + nb2 * 16 + (lane & 7) + ((lane >> 4) << 3), qc = kk * 16 + ((lane >> 3) & 1) * 8;
          ldmatrix_x4(qf, sQ + swz<D>(qr, qc));
          Mma<T>::run(s[2 * nb2], ka, qf[0], qf[1]);
          Mma<T>::run(s[2 * nb2 + 1], ka, qf[2], qf[3]);
          ldmatrix_x4(of, sdO + swz<D>(qr, qc));
          Mma<T>::run(dp[2 * nb2], va, of[0], of[1]);
          Mma<T>::run(dp[2 * nb2 + 1], va, of[2], of[3]);
        }
      }

      // P = exp(S - LSE) and dS = P (dP - softmax_d), masked as in key_block_body; then Pᵀ
      // and dSᵀ into shared memory (rows: keys, columns: the step's queries)
      const bool mask = fa2::block_needs_mask(n0, BN, m0, BM, seg.len_q, seg.len_k, flags);
      with_p_ds_form(sm, mask, [&](auto softcap, auto masked) {
#pragma unroll
        for (int i = 0; i < NBS; ++i)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = q0 + i * 8 + 2 * (lane & 3) + c;
            const float lse2 = lse[col] * kLog2e, d = dsm[col];
            const fa2::KeyLimits kl = row_keys_if<masked.value>(sm, m0 + col);
#pragma unroll
            for (int e = c; e < 4; e += 2)
              p_and_ds<softcap.value, masked.value>(sm, kl, key_a + (e >> 1) * 8, lse2, d, s[i][e], dp[i][e]);
          }
      });
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

      // 3. dQ (BM x D) = dS (BM x BN) K (BN x D): warp = (row tile mt, column group ch)
      {
        const int mt = warp % Shape::kDqRowTiles, ch = warp / Shape::kDqRowTiles;
        float dq[DQB][4];
#pragma unroll
        for (int i = 0; i < DQB; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[i][e] = 0.f;
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
          uint32_t a[4];
          ldmatrix_x4_trans(a, sdS + swz_ds<BM>(kc * 16 + (lane & 7) + (lane >> 4) * 8, mt * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
          for (int db2 = 0; db2 < DQB / 2; ++db2) {
            uint32_t kf[4];
            ldmatrix_x4_trans(kf, sK + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                              ch * DQ_COLS + db2 * 16 + (lane >> 4) * 8));
            Mma<T>::run(dq[2 * db2], a, kf[0], kf[1]);
            Mma<T>::run(dq[2 * db2 + 1], a, kf[2], kf[3]);
          }
        }
        add_dq<DQB, Checked>(p, at, seg, cu_q_b, tm, m_top, split, m0 + mt * 16 + (lane >> 2),
                             ch * DQ_COLS + 2 * (lane & 3), (lane & 3) == 0 && ch == 0,
                             reinterpret_cast<const float(&)[DQB * 4]>(dq));
      }
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
