// flash-attn's host checks: the argument checks each release family's entry point makes on
// the host before launching anything (TORCH_CHECK in csrc/flash_attn/flash_api.cpp for FA1 and
// FA2 and hopper/flash_api.cpp for FA3; Python asserts in flash_attn/cute/interface.py for
// FA4), one ordered table per family with the exact upstream message. The order is upstream's:
// the first check that fails is the one the user sees. The static checks (lib/check), the
// execution plan (lib/exec), the symptom table (lib/predict) and the replay (lib/convert) read
// their messages here; none repeats them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "vocab/version.hpp"

namespace ad {

// What one host check requires (its condition in the table's words: HostCheckEntry::condition).
enum class HostCheck : uint8_t {
  q_dtype,              // q's dtype is one the family runs
  k_dtype,              // k's dtype is q's
  v_dtype,              // v's dtype is q's
  cu_seqlens_q_dtype,   // int32
  cu_seqlens_k_dtype,
  cu_seqlens_q_device,  // on a CUDA device
  cu_seqlens_k_device,
  softcap_dropout,      // softcap > 0 only without dropout
  batch_size_positive,  // cu_seqlens_q.numel() - 1 > 0
  head_dim_max,         // head_dim at most the family's maximum
  head_dim_aligned,     // head_dim a multiple of the alignment
  heads_divide,         // num_heads % num_kv_heads == 0
  kv_heads_equal,       // num_kv_heads == num_heads (FA1: no MQA/GQA)
  cu_seqlens_q_shape,   // (batch_size + 1)
  cu_seqlens_k_shape,
  seqused_k_shape,      // (batch_size)
  seqused_q_shape,      // (batch_size): FA3 / FA4, which take seqused_q
  // FA3's paged KV and q_v (hopper/flash_api.cpp mha_fwd)
  page_table_dtype,     // int32
  batch_size_k,         // the key side's batch (page_table rows, cu_seqlens_k.size(0) - 1) is q's
  qv_head_dim,          // head_size <= 64
  qv_q_dtype,           // q is fp16 or bf16
  qv_arch,              // a Hopper GPU (compute capability 9.0)
  qv_dtype,             // q_v's dtype is q's
  qv_shape,             // (total_q, num_heads, head_size_v)
};

// Which entry point makes the check: both, or only the varlen one (mha_varlen_fwd,
// flash_attn_varlen_func) or only the dense one (mha_fwd, flash_attn_func), where the two
// order a check differently.
enum class HostScope : uint8_t { both, varlen, dense };

struct HostCheckEntry {
  HostCheck check;
  HostScope scope;
  std::string_view condition;  // what must hold, as upstream writes it
  std::string_view type;       // the exception: "RuntimeError" (TORCH_CHECK), "AssertionError"
  std::string_view message;    // upstream's message, exactly
  std::string_view source;     // release and file (and function) it was read from
  // "RuntimeError: cu_seqlens_q must have dtype int32", as the user reads it
  std::string_view raised() const;
};

struct HostCheckTable {
  std::string_view name;                   // "fa2"
  std::string_view source;                 // where the order was read
  std::span<const HostCheckEntry> entries; // in upstream order
  const HostCheckEntry* find(HostCheck c, HostScope scope = HostScope::varlen) const;
  // The message of check `c` ("" when the family makes no such check).
  std::string_view message(HostCheck c, HostScope scope = HostScope::varlen) const;
  // Of the checks in `failing`, the one the family makes first (nullptr: it makes none of them).
  const HostCheckEntry* first_of(std::initializer_list<HostCheck> failing, HostScope scope = HostScope::varlen) const;
  bool applies(const HostCheckEntry& e, bool dense) const {
    return e.scope == HostScope::both || (e.scope == HostScope::dense) == dense;
  }
};

// Tables by name: "fa1" (v1.0.9), "fa2" (v2.6.3; 2.0 - 2.8.3), "fa3" (hopper, v2.8.3), "fa4"
// (fa4-v4.0.0.beta0), "fa4-fp8" (fa4-v4.0.0.beta10), "torch-varlen" (torch 2.10 / 2.11
// varlen_attn through PyTorch's bundled FA2). Throws std::logic_error for another name.
const HostCheckTable& host_checks(std::string_view name);
std::span<const HostCheckTable> host_check_tables();
// flash-attn 2's table: what the symptom table and the catalogue quote.
inline const HostCheckTable& fa2_host_checks() { return host_checks("fa2"); }

// FLA's rotary (fla/modules/rotary.py; fla-core 0.6.0 fla/modules/rotary/ops.py) asserts
// `TR >= T` on the host before the launch: T is x.shape[1] without cu_seqlens; with cu_seqlens
// it is max_seqlen in 0.1 - 0.1.2 and the packed length from 0.2.0 (FLA #515), and 0.6.0 no
// longer makes the assertion in varlen. The message is "TR must be >= T" up to 0.2.2 and
// "TR must be >= T, got {TR} and {T}" from 0.3.0 (measured on an H100 for 0.5.0, 0.5.1, 0.6.0).
// The static check and the execution plan both read it here.
struct FlaRotaryTableAssert {
  int64_t T = 0;          // the T the release compares with the table's rows
  bool makes = false;     // the release makes the assertion for this call
  bool fails = false;     // it makes it and T > TR
  std::string message;    // the AssertionError's message when it fails
};
// `fla`: the release (nullopt: the newest); `rows`: x.shape[1] (the padded length, or the packed
// length in varlen); `max_seqlen`: the call's max_seqlen (varlen); `table_rows`: TR.
FlaRotaryTableAssert fla_rotary_table_assert(const std::optional<Version>& fla, bool varlen, int64_t rows,
                                             int64_t max_seqlen, int64_t table_rows);

}  // namespace ad
