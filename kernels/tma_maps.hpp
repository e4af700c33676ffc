// The tensor maps of the loads by the tensor memory accelerator: the warp-specialised d128
// forward's (kernels/sm90a/varlen_attention_wgmma_ws.cuh, the checked form's first launch: q, k,
// v) and the warp-specialised backward's (kernels/sm90a/varlen_attention_bwd_wgmma_ws.cuh, the
// checked form's in-bounds key blocks: q, k, v, dout). Each operand a 3-d tensor
// [rows][heads][head_dim] with the caller's strides, boxes of 64 columns x 1 head x the kernel's
// tile rows, 128-byte swizzle (one Sw128Panels panel of a tile per box). Encoded on the
// host at each launch from the params' pointers, as the other params are (a captured CUDA graph
// keeps them), and passed to the kernel as a __grid_constant__ parameter.
//
// CUDA headers (cuda.h for CUtensorMap, a type only: the encoder comes from the runtime's
// cudaGetDriverEntryPointByVersion, so nothing links libcuda): the launcher and the sm_90a
// kernels include this, never the plain C++ side.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernel_params.hpp"

// The first launch of the checked d128 forward loads its in-bounds tiles with the tensor memory
// accelerator (1) or with cp.async as the unchecked kernel does (0).
#ifndef ATTN_DOCTOR_FWD_TMA
#define ATTN_DOCTOR_FWD_TMA 1
#endif

namespace ad::kern {

inline constexpr int kTmaBoxRows = 128;        // the forward's Q tile and K/V tile rows (kBlockM, kBlockN)
inline constexpr int kBwdTmaQueryRows = 64;    // the backward's query rows per step (bwd::kWgmmaBlockM)
inline constexpr int kBwdTmaKeyRows = 128;     // the backward's key block (bwd::kBwdBlockN)

struct FwdTmaMaps {
  CUtensorMap q, k, v;
  // Which maps hold an encoded operand (tma_operand_ok held and the encoder took it); a tile
  // of an operand without one is loaded by cp.async.
  int32_t has_q = 0, has_k = 0, has_v = 0;
};

// The maps of the call's q, k and v (elements bf16 or fp16, head_dim a multiple of 64); none
// (every has_* 0) where the build has ATTN_DOCTOR_FWD_TMA=0 or the runtime gives no encoder.
FwdTmaMaps fwd_tma_maps(const VarlenFwdParams& p);

inline constexpr int kBwdTmaDqCols = 32;      // the dq_accum map's box: 32 fp32 columns (128 bytes) x
                                              // kBwdTmaQueryRows rows

struct BwdTmaMaps {
  CUtensorMap q, k, v, dout;  // boxes of kBwdTmaQueryRows rows (q, dout) and kBwdTmaKeyRows (k, v)
  // dq_accum as a 2-d fp32 tensor [ceil(dq_accum_size / row stride)][row stride], boxes of
  // kBwdTmaDqCols x kBwdTmaQueryRows, 128-byte swizzle: the dQ tiles are added through it
  // (cp.reduce.async.bulk.tensor; key_block_in_bounds keeps each dQ row within one of its rows)
  CUtensorMap dq;
  int32_t has_q = 0, has_k = 0, has_v = 0, has_dout = 0, has_dq = 0;
  bool all() const { return has_q && has_k && has_v && has_dout && has_dq; }
};

// The maps of the call's q, k, v and dout (bf16 or fp16, head_dim a multiple of 64), and of
// dq_accum; none where the runtime gives no encoder. The backward's warp-specialised kernel
// takes them only when it has all five (all()); otherwise the wgmma kernel runs.
BwdTmaMaps bwd_tma_maps(const VarlenBwdParams& p);

}  // namespace ad::kern
