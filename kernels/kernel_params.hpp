// The host/device boundary of every kernel: one plain params struct per kernel family
// (flash-attention's `Flash_fwd_params` is the model), filled and
// validated on the host, passed by value to the kernel. Nothing else crosses the boundary.
//
// Distinct roles are distinct types. Query, key, value and output rows are `RowOperand`s
// tagged by role, the tile pipelines that stream K and V are `PipelineParams<KeyRole>` and
// `PipelineParams<ValueRole>`, and the shared-memory tiles they fill are tagged the same
// way: a key operand cannot be handed to the value pipeline, nor a value tile fed to Q·Kᵀ.
// This is the bug class of flash-attention's Hopper build failure ("no suitable
// user-defined conversion from PipelineParamsK to PipelineParamsV", Dao-AILab/
// flash-attention#1476/#1478): there the compiler caught a K/V mix-up
// by accident; here it catches every one by design, and tests/compile_fail/ proves it.
//
// Plain C++: included by .cu and .cpp files alike (tests/compile_fail/ compiles it with the
// host compiler, so the proof runs on CI machines without nvcc).
#pragma once

#include <cstdint>

#include "contract/access_record.hpp"
#include "contract/fa2_backward.hpp"
#include "contract/fa2_forward.hpp"
#include "contract/host_device.hpp"
#include "contract/vocabulary.hpp"

namespace ad::kern {

// ---------------------------------------------------------------------------------------
// roles

struct QueryRole {};
struct KeyRole {};
struct ValueRole {};
struct OutputRole {};
// the backward's gradients: dO (read), dQ, dK, dV (written)
struct GradOutRole {};
struct GradQueryRole {};
struct GradKeyRole {};
struct GradValueRole {};

// A packed (rows, heads, head_dim) tensor, row-major and contiguous: row r, head h, column
// d lives at element (r * heads + h) * head_dim + d. `rows` is what the allocation holds:
// the bound every checked access is compared with; `buffer` is the name a refused access is
// recorded under.
template <class Role> struct RoleBuffer;
template <> struct RoleBuffer<QueryRole> { static constexpr Buffer value = Buffer::q; };
template <> struct RoleBuffer<KeyRole> { static constexpr Buffer value = Buffer::k; };
template <> struct RoleBuffer<ValueRole> { static constexpr Buffer value = Buffer::v; };
template <> struct RoleBuffer<OutputRole> { static constexpr Buffer value = Buffer::out; };
template <> struct RoleBuffer<GradOutRole> { static constexpr Buffer value = Buffer::dout; };
template <> struct RoleBuffer<GradQueryRole> { static constexpr Buffer value = Buffer::dq; };
template <> struct RoleBuffer<GradKeyRole> { static constexpr Buffer value = Buffer::dk; };
template <> struct RoleBuffer<GradValueRole> { static constexpr Buffer value = Buffer::dv; };

template <class Role, class Pointer>
struct RowOperand {
  Pointer data = nullptr;
  int64_t rows = 0;
  int32_t heads = 0;
  Buffer buffer = RoleBuffer<Role>::value;  // q_rot / k_rot when rotary rotated them
};
using QueryOperand = RowOperand<QueryRole, const void*>;
using KeyOperand = RowOperand<KeyRole, const void*>;
using ValueOperand = RowOperand<ValueRole, const void*>;
using OutputOperand = RowOperand<OutputRole, void*>;

// cu_seqlens as the kernel receives them: int32 on the device, `size` entries (N + 1).
template <class Role>
struct CuSeqlens {
  const int32_t* data = nullptr;
  int64_t size = 0;
};
using CuSeqlensQ = CuSeqlens<QueryRole>;
using CuSeqlensK = CuSeqlens<KeyRole>;

// ---------------------------------------------------------------------------------------
// unpad gather / pad scatter (index_first_axis / pad_input)

// gather:  dst[i, :] = src[indices[i], :]   for i < num_indices       (unpad)
// scatter: dst[indices[i], :] = src[i, :]   for i < num_indices       (pad; dst zeroed first)
struct IndexCopyParams {
  const void* src = nullptr;
  int64_t src_rows = 0;
  void* dst = nullptr;
  int64_t dst_rows = 0;
  int64_t row_bytes = 0;             // heads * head_dim * element size
  const int64_t* indices = nullptr;  // int64, as torch.nonzero returns them
  int64_t num_indices = 0;
  AccessRecord* record = nullptr;    // checked form only
  Buffer src_buffer = Buffer::none;  // what a refused access is recorded as (q_src, ... / out)
  Buffer dst_buffer = Buffer::none;  // (q, ... / out_final)
};

// ---------------------------------------------------------------------------------------
// rotary embedding

// The contracts the kernel runs (contract/vocabulary.hpp, geometry in contract/rotary.hpp):
//  flash_attn: grid (ceil(max_seqlen / BLOCK_M), N, H); rows past the segment or past the
//    grid are skipped; positions past the table are rotated by the identity (cos 1, sin 0)
//    but still read and written; columns bounded by rotary_dim, which the host guarantees is
//    <= head_dim.
//  fla (before the head-dim check): every row of every segment; columns bounded by the rotary
//    dim it was given only, so a rotary dim wider than the head walks into the next heads and
//    past the tensor; positions past the table are skipped.
struct RotaryParams {
  ElemType elem = ElemType::bf16;
  void* x = nullptr;                 // (rows, heads, head_dim), rotated in place
  int64_t rows = 0;
  int32_t heads = 0;
  int32_t head_dim = 0;
  const float* cos = nullptr;        // (table_rows, rotary_dim / 2), fp32
  const float* sin = nullptr;
  int64_t table_rows = 0;
  int32_t rotary_dim = 0;
  bool interleaved = false;
  // Segments: cu_seqlens (varlen, num_segments + 1 entries) or, when null, num_segments
  // batch rows of `segment_rows` rows each (the padded (B, S, H, D) layout).
  const int32_t* cu_seqlens = nullptr;
  int32_t num_segments = 0;
  int64_t segment_rows = 0;
  int32_t max_seqlen = 0;            // flash_attn varlen: the grid covers this many rows
  const int64_t* seqlen_offsets = nullptr;  // per segment, or null: `seqlen_offset` for all
  int64_t seqlen_offset = 0;
  RotaryContract contract = RotaryContract::flash_attn;  // flash_attn or fla
  // flash_attn: BLOCK_M of the release (rope::flash_attn_block_m), the rows per program of the
  // grid and of the launch-order key.
  int32_t block_rows = 0;
  // Checked form: rows outside [0, rows) (a segment running past the tensor, or starting
  // before it) return at once when true; the caller counts their accesses on the host
  // (exec/cpu/rotary_walk.hpp). The launch then covers `launch_rows` rows per segment when > 0 (rows
  // past them are outside for every segment), the launch-order keys still those of the grid.
  bool skip_rows_outside = false;
  int64_t launch_rows = 0;
  Buffer buffer = Buffer::none;      // what a refused access is recorded as (q_rot / k_rot)
  AccessRecord* record = nullptr;
};

// ---------------------------------------------------------------------------------------
// varlen attention: what the forward and the backward share

// The call both passes are made of (FA2's mha_varlen_fwd / mha_varlen_bwd arguments): the
// operands, cu_seqlens, the shape, the scales and masks, the forward's LSE layout, and the
// record of the checked form. VarlenFwdParams and VarlenBwdParams extend it; `set_varlen_call`
// (below) fills it, for the CUDA backend and for bench/gpu's C API alike.
struct VarlenParamsBase {
  ElemType elem = ElemType::bf16;
  QueryOperand q;                    // (total_q, H, D)
  KeyOperand k;                      // (total_k, Hk, D)
  ValueOperand v;                    // (total_k, Hk, D)
  int64_t lse_size = 0;              // the LSE's elements (the forward writes it, the backward reads it)
  fa2::LseLayout lse_layout = fa2::LseLayout::unpadded;  // (H, total_q) from flash-attn 2.6
  int32_t lse_max_seqlen_q = 0;      // padded layout: the per-segment stride
  CuSeqlensQ cu_seqlens_q;
  CuSeqlensK cu_seqlens_k;
  int32_t batch = 0;                 // N = cu_seqlens_q.size - 1
  int32_t num_heads = 0;             // H (the forward: Hk after the single-query swap)
  int32_t num_heads_k = 0;           // Hk
  int32_t head_dim = 0;
  int32_t max_seqlen_q = 0;
  int32_t max_seqlen_k = 0;
  float softmax_scale = 0.f;
  float softcap = 0.f;               // 0: none
  bool causal = false;
  int32_t window_left = -1;          // -1: unlimited
  int32_t window_right = -1;
  bool normalized = false;           // fa2_normalize() / fa2_bwd_normalize() has been applied
  AccessRecord* record = nullptr;    // checked form: the record of the launch running
};

// The shape and the masks of a call, as set_varlen_call takes them.
struct VarlenShape {
  int32_t batch = 0, num_heads = 0, num_heads_k = 0, head_dim = 0, max_seqlen_q = 0, max_seqlen_k = 0;
};
struct VarlenMasks {
  float softmax_scale = 0.f, softcap = 0.f;
  bool causal = false;
  int32_t window_left = -1, window_right = -1;
};

// Fills the shared fields of a forward or backward call (the LSE's size and layout and the
// record are the caller's): q (num_heads heads) and k, v (num_heads_k heads), their row counts
// and the buffer names a refused access is recorded under (q_rot / k_rot after rotary).
inline void set_varlen_call(VarlenParamsBase& p, ElemType elem, QueryOperand q, KeyOperand k, ValueOperand v,
                            CuSeqlensQ cu_seqlens_q, CuSeqlensK cu_seqlens_k, const VarlenShape& shape,
                            const VarlenMasks& masks) {
  p.elem = elem;
  p.q = q;
  p.k = k;
  p.v = v;
  p.cu_seqlens_q = cu_seqlens_q;
  p.cu_seqlens_k = cu_seqlens_k;
  p.batch = shape.batch;
  p.num_heads = shape.num_heads;
  p.num_heads_k = shape.num_heads_k;
  p.head_dim = shape.head_dim;
  p.max_seqlen_q = shape.max_seqlen_q;
  p.max_seqlen_k = shape.max_seqlen_k;
  p.softmax_scale = masks.softmax_scale;
  p.softcap = masks.softcap;
  p.causal = masks.causal;
  p.window_left = masks.window_left;
  p.window_right = masks.window_right;
}

// ---------------------------------------------------------------------------------------
// varlen attention forward (FA2 contract, docs/spec/execution.md)

struct VarlenFwdParams : VarlenParamsBase {
  OutputOperand out;                 // (total_q, H, D)
  float* lse = nullptr;              // fp32, laid out as lse_layout says
  uint32_t* row_writes = nullptr;    // optional: writes per output row (head 0), coverage
  int64_t row_writes_size = 0;
  const int32_t* seqused_k = nullptr;  // optional, N entries
  // FA2's max_seqlen_q == 1 && H > Hk path: q is read as (N, Hk, H / Hk, D) and each
  // segment b owns token b; `ngroups` = H / Hk query rows per kv head.
  bool seqlenq_ngroups_swapped = false;
  int32_t ngroups = 1;
  int32_t block_m = 128;             // FA2's kBlockM for the head dim (grid.x = ceil(max_seqlen_q / block_m))
  // Checked form: CTAs whose rows all lie past q/out (fa2::tile_past_rows) return at once
  // when true; the caller counts their accesses on the host (the CUDA backend does, with
  // exec/plan/clip.cpp, as the CPU twin does), so a phantom segment costs no device time. The
  // launch then covers min(grid, launch_m_blocks) m blocks when launch_m_blocks > 0, the
  // launch-order keys still those of the full grid.
  bool skip_tiles_past_rows = false;
  int32_t launch_m_blocks = 0;
};

// The launch grid's m blocks and the m blocks of the launch-order keys (FA2's grid.x).
AD_HD int64_t fa2_grid_m(const VarlenFwdParams& p) {
  return p.block_m > 0 ? (int64_t(p.max_seqlen_q) + p.block_m - 1) / p.block_m : 0;
}
AD_HD int64_t launch_grid_m(const VarlenFwdParams& p) {
  const int64_t g = fa2_grid_m(p);
  return p.skip_tiles_past_rows && p.launch_m_blocks > 0 && p.launch_m_blocks < g ? p.launch_m_blocks : g;
}
// The contract's flags of a normalised call, for key tiles of `block_n` keys.
AD_HD fa2::Flags fa2_flags(const VarlenFwdParams& p, int block_n) {
  const bool local = !p.causal && (p.window_left >= 0 || p.window_right >= 0);
  return fa2::Flags{p.causal, local, p.window_left, p.window_right, p.block_m, block_n};
}
AD_HD fa2::LseShape lse_shape(const VarlenFwdParams& p) {
  return fa2::LseShape{p.lse_layout, p.q.rows, p.num_heads, p.lse_max_seqlen_q};
}

// The tile pipelines (K and V). Same shape, different types: see the file comment.
template <class Role>
struct PipelineParams {
  RowOperand<Role, const void*> src;
  int32_t head_dim = 0;
  int32_t group = 1;                 // query heads per kv head
};
using KeyPipelineParams = PipelineParams<KeyRole>;
using ValuePipelineParams = PipelineParams<ValueRole>;

// Whether the tensor memory accelerator may load a (rows, heads, head_dim) operand, in boxes of
// 64 columns (128 bytes, one 128-byte swizzle span) x 1 head x some rows (kernels/tma_maps.hpp):
// cuTensorMapEncodeTiled's rules for a 3-d map (CUDA driver API: the global address 16-byte
// aligned, the strides, head_dim and heads * head_dim elements, multiples of 16 bytes below
// 2^40) and the copy's coordinates (PTX ISA cp.async.bulk.tensor: signed 32-bit, so every row
// index must lie below 2^31). An operand that fails keeps the cp.async loads.
template <class Role, class Pointer>
inline bool tma_operand_ok(const RowOperand<Role, Pointer>& op, int32_t head_dim, int elem_bytes) {
  const int64_t head_bytes = int64_t(head_dim) * elem_bytes;
  const int64_t row_bytes = head_bytes * op.heads;
  return op.data != nullptr && reinterpret_cast<uintptr_t>(op.data) % 16 == 0 && elem_bytes == 2 && head_dim > 0 &&
         head_dim % 64 == 0 && op.heads > 0 && head_bytes % 16 == 0 && row_bytes % 16 == 0 &&
         row_bytes < (int64_t(1) << 40) && op.rows > 0 && op.rows < (int64_t(1) << 31);
}

AD_HD KeyPipelineParams key_pipeline(const VarlenFwdParams& p) {
  return KeyPipelineParams{p.k, p.head_dim, p.num_heads_k > 0 ? p.num_heads / p.num_heads_k : 1};
}
AD_HD ValuePipelineParams value_pipeline(const VarlenFwdParams& p) {
  return ValuePipelineParams{p.v, p.head_dim, p.num_heads_k > 0 ? p.num_heads / p.num_heads_k : 1};
}

// ---------------------------------------------------------------------------------------
// varlen attention backward (FA2's mha_varlen_bwd contract)

// The three launches of FA2's varlen backward (flash_bwd_launch_template.h,
// run_flash_bwd_seqk_parallel): the preprocess (softmax_d = rowsum(dO * O) and a zeroed
// dq_accum, grid of query blocks), the key-block kernel (per (n block, segment, head): dK, dV
// of its keys, dQ added into dq_accum in fp32), the dq conversion (dq = dq_accum * scale,
// grid of query blocks); with H > Hk the per-query-head dK / dV ("expanded") are summed over
// each group afterwards, as mha_varlen_bwd does.
struct VarlenBwdParams : VarlenParamsBase {
  RowOperand<OutputRole, const void*> out;     // the forward's output (total_q, H, D)
  RowOperand<GradOutRole, const void*> dout;   // (total_q, H, D)
  RowOperand<GradQueryRole, void*> dq;         // (total_q, H, D)
  // dK / dV as the key-block kernel writes them: (total_k, H, D) when H > Hk (the expanded
  // tensors, summed into dk_out / dv_out per group), else the outputs themselves.
  RowOperand<GradKeyRole, void*> dk;
  RowOperand<GradValueRole, void*> dv;
  void* dk_out = nullptr;                // (total_k, Hk, D) when H > Hk
  void* dv_out = nullptr;
  const float* lse = nullptr;            // the forward's LSE, laid out as lse_layout says
  float* softmax_d = nullptr;            // fp32 workspace, softmax_d_size elements
  int64_t softmax_d_size = 0;
  float* dq_accum = nullptr;             // fp32 workspace, dq_accum_size elements
  int64_t dq_accum_size = 0;
  bool deterministic = false;            // FA2's deterministic mode: nsplits dq_accum copies
  // The release whose rules the launches follow (dq_accum offsets, softmax_d layout, head
  // rounding) and the GPU generation whose tile / SM count they assume.
  fa2::bwd::Release release;
  fa2::GpuArch arch = fa2::GpuArch::sm90;
  // Filled by fa2_bwd_normalize (launch.hpp) from the fields above unless `normalized`: the
  // call as mha_varlen_bwd leaves it (fa2::bwd::normalize: windows, FA2's tile, grids,
  // nsplits) and the workspaces' shapes (sized by q.rows and batch).
  fa2::bwd::Normalized kernel;
  fa2::bwd::DqAccumShape dq_accum_shape;
  fa2::bwd::SoftmaxDShape softmax_d_shape;
  int32_t block_m = 0;                   // the key-block kernel's query rows per step (0: its default)
  uint32_t* dq_writes = nullptr;         // optional: writes per dq row (head 0), coverage
  int64_t dq_writes_size = 0;
  uint32_t* dkv_writes = nullptr;        // optional: writes per dk row (head 0), coverage
  int64_t dkv_writes_size = 0;
  // The launch check (contract/fa2_backward.hpp keys_past_grid, keys_past_seqused), recorded by
  // the checked preprocess kernel when set: what attn_doctor.ops asks for (the CLI's backend
  // leaves it off). seqused_k: the forward's (N entries), read by the launch check only.
  bool launch_check = false;
  const int32_t* seqused_k = nullptr;
  // Set by the launcher when the checked backward's key blocks run the kernel that adds dQ
  // through the dq_accum map: its fallback launch then takes the blocks key_block_in_bounds<true>
  // refuses.
  bool dq_rows_whole = false;
};

// A shared-memory tile filled by one pipeline.
template <class Role, class Elem>
struct SmemTile {
  Elem* data = nullptr;
};

}  // namespace ad::kern
