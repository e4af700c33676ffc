// The words the CPU emulation (lib/exec) and the CUDA kernels (kernels/) share: the element
// types the tensors are stored in, the buffers a call touches, the kinds of access, the
// rotary contracts, and the checked/unchecked forms. One definition each; plain C++ with
// fixed integer values, so a value written by a kernel reads the same on the host.
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"

namespace ad {

// Storage type of q/k/v/out. The emulation keeps fp32 values rounded to it wherever the
// kernel stores (or converts to) it; the kernels store it natively. (The batch file's dtype,
// which also names index and fp64/fp8 tensors, is `DType` in lib/batch.)
enum class ElemType : int32_t { bf16 = 0, fp16 = 1, fp32 = 2 };
AD_HD int elem_bytes(ElemType t) { return t == ElemType::fp32 ? 4 : 2; }
inline const char* to_string(ElemType t) { return t == ElemType::bf16 ? "bf16" : t == ElemType::fp16 ? "fp16" : "fp32"; }

// The buffers a call allocates and every checked access is compared with. Three frames:
// source (what the framework held before the call), packed (what the varlen kernel
// receives), final (what the caller gets back).
enum class Buffer : int32_t {
  none = 0,
  q_src, k_src, v_src,  // source frame: the unpad gather reads them
  q, k, v,              // packed: the gather writes them, attention reads them
  q_rot, k_rot,         // rotary output (the packed tensors themselves when rotary runs in place)
  out, lse,             // attention output (packed) and its log-sum-exp
  out_final,            // pad_input's output (mask path)
  cos, sin,             // rotary table
  row_writes,           // the checked attention kernel's per-row write counters (coverage)
  // the varlen backward (contract/fa2_backward.hpp), packed frame
  dout,                 // dO (total_q x H x D)
  dq,                   // dq (total_q x H x D)
  dk, dv,               // what dq_dk_dv writes: dk/dv, or dk/dv_expanded (total_k x H x D) under GQA
  dq_accum,             // fp32 (nsplits, total_q + 128 N, H, d_rounded)
  softmax_d,            // fp32 rowsum(dO * O): (H, total_q + 128 N), or (N, H, round128(max_seqlen_q))
  page_table,           // FA3's paged KV: the table the k / v rows are addressed through (contract/fa3_paged.hpp)
};
inline const char* to_string(Buffer b) {
  switch (b) {
    case Buffer::q_src: return "q (padded)";
    case Buffer::k_src: return "k (padded)";
    case Buffer::v_src: return "v (padded)";
    case Buffer::q: return "q";
    case Buffer::k: return "k";
    case Buffer::v: return "v";
    case Buffer::q_rot: return "q (rotary output)";
    case Buffer::k_rot: return "k (rotary output)";
    case Buffer::out: return "out";
    case Buffer::lse: return "softmax_lse";
    case Buffer::out_final: return "out (padded)";
    case Buffer::cos: return "cos";
    case Buffer::sin: return "sin";
    case Buffer::row_writes: return "row_writes";
    case Buffer::dout: return "dout";
    case Buffer::dq: return "dq";
    case Buffer::dk: return "dk";
    case Buffer::dv: return "dv";
    case Buffer::dq_accum: return "dq_accum";
    case Buffer::softmax_d: return "softmax_d";
    case Buffer::page_table: return "page_table";
    case Buffer::none: break;
  }
  return "none";
}

enum class AccessKind : int32_t { none = 0, read = 1, write = 2 };
inline const char* to_string(AccessKind k) { return k == AccessKind::write ? "write" : "read"; }

// What `index` and `bound` of an access count.
enum class Unit : int32_t { elements = 0, rows = 1 };
inline const char* to_string(Unit u) { return u == Unit::rows ? "rows" : "elements"; }

// The extent an access left: its buffer, the head its row belongs to (a rotation wider than
// the head), or the rotary table; or, for the backward's launch check (fa2_backward.hpp
// keys_left_out), key rows of a segment the launch leaves out of the gradients: past the key
// blocks max_seqlen_k gives its grid (max_seqlen), or past (or short of) the seqused_k the
// forward used (seqused). Those are not accesses performed or refused: the record counts them.
enum class Region : int32_t { tensor = 0, head = 1, table = 2, max_seqlen = 3, seqused = 4 };
inline const char* to_string(Region r) {
  switch (r) {
    case Region::head: return "head";
    case Region::table: return "table";
    case Region::max_seqlen: return "max_seqlen";
    case Region::seqused: return "seqused";
    case Region::tensor: break;
  }
  return "tensor";
}

// Which rotary kernel a call runs (see contract/rotary.hpp for their geometry):
//  flash_attn  flash_attn.ops.triton.rotary apply_rotary (in place, grid from max_seqlen)
//  fla         fla.modules.rotary rotary_embedding_fwdbwd (a new tensor, chunks of every segment)
//  hf          transformers' apply_rotary_pos_emb (positions per row, in the dtype; host only)
enum class RotaryContract : int32_t { flash_attn = 0, fla = 1, hf = 2 };
inline const char* to_string(RotaryContract c) {
  return c == RotaryContract::flash_attn ? "flash_attn" : c == RotaryContract::fla ? "fla" : "hf";
}

// The checked form compares every access with its buffer's size and records instead of
// performing an out-of-bounds access; the unchecked form is what the real stack runs.
enum class Checks : int32_t { checked = 0, unchecked = 1 };
inline const char* to_string(Checks c) { return c == Checks::checked ? "checked" : "unchecked"; }

}  // namespace ad
