// What each flash-attn release accepts: dtypes, head-dim limits, features, and the host-side
// behaviours the static checks reproduce (their messages: the family's host-check table,
// vocab/host_checks.hpp). One row per rule set (the first release where the
// behaviour appears); a release maps to the nearest rule set at or below it. Every row was read
// from the release's own source (csrc/flash_attn/flash_api.cpp, flash_attn/flash_attn_interface.py,
// hopper/flash_api.cpp for FA3, flash_attn/cute/interface.py for FA4): `source` says where.
// docs/spec/flash-attn-features.md is generated from this table (`attn-doctor list flash-attn`).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "batch/batch.hpp"
#include "vocab/host_checks.hpp"
#include "vocab/signature.hpp"

namespace ad {

// How a head dim that is not a multiple of the alignment is treated.
enum class HeadDimAlignment {
  required,        // the host check raises
  padded_in_cpp,   // mha_fwd/mha_varlen_fwd pad q/k/v to a multiple of 8 (2.0 - 2.6)
  padded_in_python // flash_attn_interface.py pads before the op (2.7 -)
};

struct FlashAttnRules {
  std::string_view name;   // "fa2-2.6"
  std::string_view first;  // first release the row covers ("2.6.0")
  int family;              // 1, 2, 3 (hopper), 4 (cute)
  bool fp8;                // fp8_e4m3 q/k/v accepted (fp16/bf16 always are)
  int64_t max_head_dim;
  HeadDimAlignment alignment;
  bool gqa;                // num_kv_heads may differ from num_heads (must divide it)
  bool window;             // window_size (local / sliding-window attention)
  bool alibi;
  bool softcap;
  bool softcap_with_dropout;     // false: "Softcapping does not support dropout for now"
  bool dropout;                  // the varlen function has a dropout_p argument
  bool varlen_single_query_swap; // max_seqlen_q == 1 && H > Hk swaps heads into rows
  bool max_seqlen_tensor_ok;     // a 0-d tensor max_seqlen works (host sync) rather than failing
  bool grid_batch_on_y;          // forward grid (m_blocks, batch, heads): batch <= 65535
  bool offsets_64bit;            // element offsets past 2^31 reported to work (FA #767)
  std::string_view host_check_table;  // the family's host checks and messages (vocab/host_checks.hpp)
  std::string_view source;            // where the row was read

  const HostCheckTable& host_checks() const { return ad::host_checks(host_check_table); }
};

std::span<const FlashAttnRules> flash_attn_rule_sets();

struct ResolvedFlashAttn {
  const FlashAttnRules* rules = nullptr;  // never null
  std::string release;                    // the release asked for ("2.6.3"), or "" when none
  std::string note;                       // how the rule set was chosen
  // "2.6.3 (rule set fa2-2.6)" / "none given (rule set fa2-2.7, the newest FA2)"
  std::string label() const;
};

// The rule set for a flash-attn release: the nearest row at or below it; none given -> the
// newest FA2 row (what transformers' "flash_attention_2" loads); below the oldest -> the oldest.
ResolvedFlashAttn resolve_flash_attn(const std::optional<Version>& release);

// The flash_attn/cute copy a flash-attn 2 release bundles (environment.flash_attn_cute, 2.8.3
// on): FA4's family and host checks (its _flash_attn_fwd asserts what fa4-v4.0.0.beta0's do, in
// the same order and words), labelled with the flash-attn release that ships it. Read in the
// 2.8.3, 2.8.3.post1 and 2.8.3.post2 sdists (the same files). Never flash-attn 2's rows.
ResolvedFlashAttn resolve_flash_attn_cute(const Version& bundled);

// torch.nn.attention.varlen.varlen_attn's rules by torch release ("torch-2.10", "torch-2.11"):
// the nearest row at or below the release (its local part, "+cu130", ignored); none given ->
// the newest; older than 2.10 -> 2.10's; a release past the newest known one -> the newest,
// with a note. Never flash-attn's rows.
std::span<const FlashAttnRules> torch_varlen_rule_sets();
ResolvedFlashAttn resolve_torch_varlen(const std::optional<Version>& torch);

// A torch.varlen_attn call against its release's signature (vocab/signature.hpp): the
// arguments the batch records beyond max_k (varlen.window_size, seqused_k, num_splits, seqused_q,
// pack_gqa) are passed by keyword; the TypeError message Python raises for the first one the
// release does not take, else nullopt. The release is environment.torch, else the rule set's.
struct TorchSignatureError {
  std::string message;          // "varlen_attn() got an unexpected keyword argument 'seqused_k'"
  const Signature* signature;   // the release's
  std::string exception = "TypeError";  // or "ValueError": 2.12.0's head-count check (varlen.py)
};
std::optional<TorchSignatureError> torch_signature_error(const Batch& batch);

// The backend torch's varlen_attn selects for the call (docs/spec/torch-varlen-attn.md,
// "Backends"): 2.10 - 2.13 always PyTorch's FA2; 2.14 and 2.15 cuDNN where the release's selector
// admits the call (SM90 / SM100, max_q, dtype, head dim, window, heads, num_splits), assuming the
// cuDNN the PyPI wheel pins (2.14: 9.24.0.43, 2.15: 9.26.0.51) and the default SDPA backends.
struct TorchBackend {
  bool cudnn = false;
  bool known = true;  // false: the batch lacks a fact the selector reads (environment.gpu_arch)
  std::string why;    // the release and the selector's reasons
};
TorchBackend torch_backend(const Batch& batch);

// Head-dim alignment the release requires or pads to, for a dtype (FA3/FA4: 16 bytes -> 8
// elements for 16-bit types, 16 for fp8).
int64_t head_dim_alignment(const FlashAttnRules& rules, DType dtype);

}  // namespace ad
