// Conversion replay: what a library release turned the batch's mask / position ids into, as
// the arguments of `flash_attn_varlen_func` (or the dense kernel). See docs/spec/conversions.md.
//
// Each rule set is one pure function `Batch -> VarlenArgs` in its own file; the registry maps
// any release string to a rule set (nearest known release at or below it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "batch/batch.hpp"

namespace ad {

// Which route the call took (report-format.md `varlen.path`).
enum class VarlenPath { mask, position_ids, kwargs, explicit_varlen, dense };
std::string to_string(VarlenPath p);  // "mask" "position_ids" "kwargs" "explicit" "dense"

struct MaxSeqlen {
  int64_t value = 0;
  bool is_tensor = false;       // a 0-d tensor instead of a host int
  DType dtype = DType::int64;   // of the 0-d tensor when is_tensor
  bool is_none = false;         // the release passed None (explicit kwargs without max_length)
};

// The failure the release itself hits while converting (e.g. the key gather out of range).
struct ReplayFailure {
  std::string where;         // "_upad_input: index_first_axis(key_layer, indices_k)"
  std::string type;          // exception type the release raises on CPU ("RuntimeError", ...)
  std::string message;       // its message
  std::string cuda_symptom;  // what the same failure looks like on a GPU
};

// The other arguments that reach the kernel.
struct KernelCall {
  std::string function = "flash_attn_varlen_func";  // or "flash_attn_func" (dense path)
  bool causal = true;
  int64_t window_left = -1, window_right = -1;      // FA2 window_size; -1 = unlimited
  std::optional<double> softcap;
  double dropout = 0.0;
};

struct VarlenArgs {
  VarlenPath path = VarlenPath::dense;
  IntTensor cu_seqlens_q;                 // dtype, shape and values as the release built them
  IntTensor cu_seqlens_k;
  MaxSeqlen max_seqlen_q, max_seqlen_k;
  std::optional<std::vector<int64_t>> seqused_k;
  int64_t total_q = 0, total_k = 0;       // rows of the packed q and k/v the kernel receives
  std::optional<IntTensor> indices_q;     // mask path: unpad gather indices
  std::optional<IntTensor> indices_k;
  int64_t gather_rows_q = 0;              // rows of the (B*Lq) view indices_q gather from
  int64_t gather_rows_k = 0;              // rows of the (B*Lk) view indices_k gather from
  std::vector<int64_t> unpad_mask_shape;  // mask path: the mask the unpad helper received, after
                                          // any release quirk (empty: not the mask path)
  KernelCall call;
  std::optional<ReplayFailure> failure;   // the release fails here; fields above hold what it
                                          // computed before failing
  // provenance
  std::string library;                    // "transformers" | "flash_attn" | "fla" | "batch"
  std::string rule_set;                   // "hf-4.44.0", "explicit", ...
  std::string requested;                  // the release string that selected the rule set
  std::string note;                       // e.g. nearest-lower mapping, defaulted release
  std::vector<std::string> steps;         // short trace of the path taken
};

// Both views of one call: what the replayed release would pass, and what the batch file says
// was passed (its `varlen` block). `effective()` is what reached the kernel.
struct Conversion {
  std::optional<VarlenArgs> replayed;
  std::optional<VarlenArgs> explicit_args;

  const VarlenArgs* effective() const {
    if (explicit_args) return &*explicit_args;
    if (replayed) return &*replayed;
    return nullptr;
  }
};

struct ConvertOptions {
  std::optional<Version> transformers;  // overrides the batch's environment
  std::optional<Version> flash_attn;
};

// The window/causal/softcap/dropout flags a correct call passes for this model.
KernelCall kernel_call_for(const Model& model);

// The batch file's explicit `varlen` block as kernel arguments (path "explicit").
VarlenArgs explicit_varlen_args(const Batch& batch);

// Replays the conversion for the batch (its `batch` block) with the release the options or
// the environment name, and takes the explicit block as given.
Conversion convert(const Batch& batch, const ConvertOptions& options = {});

// ---------------------------------------------------------------------------------------
// registry

struct RuleSetInfo {
  std::string name;       // "hf-4.44.0"
  std::string library;    // "transformers"
  std::string first;      // first release covered ("4.44.0")
  std::string last;       // last release covered ("4.44.0"; "" = open-ended)
  std::string source;     // where the behaviour comes from (release file, PR, golden)
  std::string summary;    // one line
};

const std::vector<RuleSetInfo>& rule_sets();
// nullptr when no rule set has that name ("hf-4.44.0", "flash_attn-2.7", "fla-attn").
const RuleSetInfo* find_rule_set(std::string_view name);

struct ResolvedRules {
  const RuleSetInfo* rules = nullptr;  // nullptr: nothing to replay
  std::string requested;
  bool exact = false;                  // the release lies in the rule set's documented range
  std::string note;
};

ResolvedRules resolve_transformers(const std::optional<Version>& release);

// Replay with a named rule set (as `compare` does for every rule set).
VarlenArgs replay_with(const Batch& batch, const RuleSetInfo& rules);

}  // namespace ad
