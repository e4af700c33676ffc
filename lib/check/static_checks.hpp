// Internal: the static check functions (one per invariant, grouped in one file per pipeline
// step: checks_input.cpp, checks_mask.cpp, ...) and the facts several of them share. The
// catalogue (catalogue.cpp) pairs each id with its function; run_static_checks() calls them in
// catalogue order. No check allocates anything proportional to B*S*H*D: tensors the batch file
// describes by size only (a 2^31-element q) are reasoned about with checked arithmetic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/text.hpp"
#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"

namespace ad::checks {

struct Ctx {
  const Batch& batch;
  const Conversion& conversion;
  const VarlenArgs* args;      // what reached the kernel: the explicit block, else the replay
                               // (nullptr: nothing did, or the replay failed before the kernel)
  const VarlenArgs* replayed;  // the replayed release conversion (nullptr: none ran)
  const CheckContext& options;
  ResolvedFlashAttn fa;        // the flash-attn rule set that applies
  std::vector<Violation>& out;
  const Invariant* current = nullptr;  // the invariant being checked (set by the runner)
  SymptomContext symptoms;             // releases and pass the symptom table reads

  const FlashAttnRules& rules() const { return *fa.rules; }
  // A violation of the current invariant. `upstream` is the message the user most likely saw
  // for this very case (evidence "upstream_message"); empty: none or the catalogue's generic one.
  Violation& report(Severity severity, std::string message, nlohmann::json evidence = nlohmann::json::object(),
                    std::string_view upstream = {});
  // Sets the violation's symptom from the symptom table's case `variant` of the current
  // invariant; `message` and `rows` replace the row's (the check knows the amounts).
  void symptom(Violation& v, std::string_view variant, std::string message = {}, std::vector<RowRange> rows = {});
};

// ---- the checks, in catalogue order -------------------------------------------------------
// checks_input.cpp
void input_dtype(Ctx&);
void input_head_dim(Ctx&);
void input_gqa(Ctx&);
void input_feature(Ctx&);
void input_int32_range(Ctx&);
// checks_mask.cpp
void mask_rank(Ctx&);
void mask_binary(Ctx&);
void mask_cast_to_bool(Ctx&);
void mask_static_cache_slots(Ctx&);
void mask_kv_length(Ctx&);
void mask_padding_side(Ctx&);
// checks_position_ids.cpp
void position_ids_width(Ctx&);
void position_ids_rank(Ctx&);
void position_ids_origin(Ctx&);
void position_ids_consecutive(Ctx&);
// checks_route.cpp
void route_packed_to_dense(Ctx&);
void route_partial_kwargs(Ctx&);
// checks_layers.cpp
void layers_same_boundaries(Ctx&);
// checks_cu_seqlens.cpp
void cu_seqlens_dtype(Ctx&);
void cu_seqlens_device(Ctx&);
void cu_seqlens_shape(Ctx&);
void cu_seqlens_start(Ctx&);
void cu_seqlens_monotonic(Ctx&);
void cu_seqlens_total(Ctx&);
void max_seqlen_type(Ctx&);
void max_seqlen_covers(Ctx&);
// checks_segments.cpp
void max_seqlen_single_query(Ctx&);
void cu_seqlens_segments(Ctx&);
void cu_seqlens_grid(Ctx&);
void indices_range(Ctx&);
void indices_count(Ctx&);
// checks_rotary.cpp
void rotary_dim(Ctx&);
void rotary_even(Ctx&);
void rotary_layout(Ctx&);
void rotary_table(Ctx&);
void rotary_positions(Ctx&);
// checks_launch.cpp
void launch_autotune_keys(Ctx&);
// checks_fla_ops.cpp
void launch_fla_grid(Ctx&);
// checks_kernel_values.cpp
void seqused_k_range(Ctx&);
void seqused_q_range(Ctx&);
void input_softcap(Ctx&);
void window_fa4_resolution(Ctx&);
void page_table_index(Ctx&);
void page_table_coverage(Ctx&);
// checks_te_thd.cpp
void te_thd_arguments(Ctx&);
void te_padded_offsets(Ctx&);
void te_pad_between_seqs(Ctx&);
void te_cp_padding_multiple(Ctx&);
void te_cp_shard(Ctx&);
void te_cp_chunks(Ctx&);
void te_sequences(Ctx&);
// checks_route.cpp (appended)
void route_cu_seqlens_ignored(Ctx&);

// ---- facts shared by several checks (facts.cpp) ------------------------------------------

// The route the conversion took: the replay's path. Without a replay, what every transformers
// release since 4.34 does with the batch as described: a mask -> the unpad path; else all four
// varlen kwargs -> kwargs; else position ids -> packing detection; else dense. nullopt: the
// batch file has no `batch` block and nothing was replayed.
std::optional<VarlenPath> conversion_path(const Ctx& ctx);
// The route of what reached the kernel: the explicit block's, else conversion_path().
std::optional<VarlenPath> kernel_path(const Ctx& ctx);
// What the user most likely saw when the replayed release itself failed ("" when it did not):
// the CUDA symptom where the replay knows it, else the release's own exception message.
std::string replay_failure_message(const Ctx& ctx);
// The unpad path's key gather with an index past its view trips an asynchronous device assert,
// reported at the next synchronisation. True when nothing synchronises between that gather and
// flash-attn's host checks: max_seqlen reaches the kernel as host ints (taken with .item()
// before the gather) and the query is gathered with the key indices (Lq == Lk) or built with
// arange (Lq == 1), not unpadded on its own (unpad_input's .item() synchronises). Then a
// failing host check raises first (Dao-AILab/flash-attention#1857).
bool gather_assert_deferred(const Ctx& ctx);
// The mask that reaches the unpad path (nullptr: the route does not unpad with a mask).
const Mask* unpad_mask(const Ctx& ctx);
// The position ids that reach packing detection (nullptr: the route ignores position ids).
const PositionIds* packing_position_ids(const Ctx& ctx);

// Position ids seen as (rows, width) rows of the padded batch: rank 1 is one row, rank 3
// (mRoPE) is read on its first (temporal) axis.
struct PositionRows {
  const int64_t* data = nullptr;
  int64_t rows = 0, width = 0;
  int64_t at(int64_t r, int64_t c) const { return data[r * width + c]; }
};
PositionRows position_rows(const PositionIds& p);

// A half-open token range in the flat (row * width + column) space of the padded batch.
struct Span {
  int64_t start = 0, length = 0;
  int64_t end() const { return start + length; }
};
// Segments per call from which padding that opens its own segments is an error, not a note
// (invariants.md#severity): FLA's GatedDeltaNet kernels launch N x HV programs on grid axis y,
// and with Qwen3.5's HV = 32, N >= 2048 passes CUDA's 65535 ("Triton Error [CUDA]: invalid
// argument", hiyouga/LlamaFactory#10452); hybrid models run them on the attention layers'
// boundaries.
inline constexpr int64_t kSegmentsPastFlaGrid = 65536 / 32;

// Width of one row of the padded batch, the space `intent` is written in: the 2-D mask's
// width, else the position ids' width, else kv_length; with only a varlen block, total_q.
int64_t intent_row_width(const Batch& batch);
// The intended sequences as flat spans, sorted by start (overflow-safe: the loader bounds rows
// and widths).
std::vector<Span> intent_spans(const Batch& batch);
// Index of the first span in `spans` (sorted, disjoint) whose end is past `token`.
size_t first_span_ending_after(const std::vector<Span>& spans, int64_t token);

// A 1-D int tensor's segment lengths are cu[i+1] - cu[i]; nullopt when a difference overflows.
std::optional<int64_t> segment_length(const IntTensor& cu, size_t i);
bool is_vector(const IntTensor& t);  // rank 1 with at least 2 entries

// Packed rows [first, last] of the kernel's output (or dq) as the user receives them: through
// pad_input on the mask route (rows b x Lq + i of the padded output, via indices_q), else as
// they are. Inclusive ranges, in order.
std::vector<RowRange> packed_rows_as_user_sees(const VarlenArgs& args, int64_t first, int64_t last);

// Whether packed rows [first, end) of an explicit varlen call (no `batch` block) hold tokens the
// user meant. The intent can say so when it was given or read from a mask or position ids;
// derived from the cu_seqlens_q under test, or absent, it cannot (unknown). With a `batch`
// block the packed rows are the user's tokens (intended).
enum class RowsIntent { intended, padding, unknown };
RowsIntent packed_rows_intent(const Batch& batch, int64_t first, int64_t end);
std::string to_string(RowsIntent r);

// JSON for a long list: the first entries and the count (evidence stays small).

}  // namespace ad::checks
