// Static: cu_seqlens and max_seqlen as they reach the kernel (ids 15-22). flash_attn's
// mha_varlen_fwd (csrc/flash_attn/flash_api.cpp, 2.x) checks only the dtype (int32), the device
// (CHECK_DEVICE: "must be on CUDA"), batch_size = cu_seqlens_q.numel() - 1 > 0 ("batch size must
// be positive") and CHECK_SHAPE(cu_seqlens_q/k, batch_size + 1). The values are never checked:
// each value invariant says what the kernel does with them instead (execution.md, the FA2
// indexing contract).
#include <algorithm>

#include "check/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

const char* cu_name(bool q) { return q ? "cu_seqlens_q" : "cu_seqlens_k"; }

// The varlen arguments the value checks look at (nullptr: no varlen call reached a kernel).
const VarlenArgs* varlen_call(const Ctx& ctx) {
  return ctx.args && ctx.args->path != VarlenPath::dense ? ctx.args : nullptr;
}

// cu_seqlens_k needs its own checks only where it differs from cu_seqlens_q: as a tensor
// (dtype, shape, start, order) ...
bool same_cu(const VarlenArgs& a) {
  return a.cu_seqlens_k.values == a.cu_seqlens_q.values && a.cu_seqlens_k.shape == a.cu_seqlens_q.shape &&
         a.cu_seqlens_k.dtype == a.cu_seqlens_q.dtype;
}
// ... and against its own tensor's rows.
bool k_is_q(const VarlenArgs& a) { return same_cu(a) && a.total_k == a.total_q; }

// Both tensors 1-D with >= 2 entries and the same length: what the value checks need.
bool shapes_ok(const VarlenArgs& a) {
  return is_vector(a.cu_seqlens_q) && is_vector(a.cu_seqlens_k) && a.cu_seqlens_q.numel() == a.cu_seqlens_k.numel();
}

std::string for_tensor(std::string_view message, bool q) {
  std::string m(message);
  if (!q)
    if (auto at = m.find("cu_seqlens_q must"); at != std::string::npos) m.replace(at, 12, "cu_seqlens_k");
  return m;
}

}  // namespace

// 15 cu_seqlens.dtype: an int64 cu_seqlens (Qwen2-VL's vision tower built them with
// torch.cumsum's default dtype) -> "cu_seqlens_q must have dtype int32".
void cu_seqlens_dtype(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (cu.dtype == DType::int32) continue;
    ctx.report(Severity::error, std::string(cu_name(q)) + " has dtype " + to_string(cu.dtype) + "; the kernel requires int32",
               {{"tensor", cu_name(q)}, {"dtype", to_string(cu.dtype)}, {"expected", "int32"}},
               for_tensor(ctx.rules().cu_dtype_message, q));
    if (same_cu(*a)) break;
  }
}

// 16 cu_seqlens.device: CHECK_DEVICE rejects a CPU tensor ("cu_seqlens_q must be on CUDA",
// vllm#44180); a tensor on another GPU passes the check and is read across devices.
void cu_seqlens_device(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  std::string q_device = ctx.batch.environment.device;
  if (auto* o = ctx.batch.override_for("q"); o && o->device) q_device = *o->device;
  for (bool q : {true, false}) {
    auto* o = ctx.batch.override_for(cu_name(q));
    if (!o || !o->device || *o->device == q_device) continue;
    const std::string& d = *o->device;
    const bool cpu = d == "cpu";
    ctx.report(Severity::error,
               std::string(cu_name(q)) + " is on " + d + " but q is on " + q_device +
                   (cpu ? ": the host check rejects it" : ": the kernel reads it across devices"),
               {{"tensor", cu_name(q)}, {"device", d}, {"q_device", q_device}},
               cpu ? std::string(cu_name(q)) + " must be on CUDA" : "an illegal memory access was encountered");
  }
}

// 17 cu_seqlens.shape: 1-D with N + 1 >= 2 entries, the same N for q and k (flash-attention#742,
// transformers 4.35: a rank-3 cu_seqlens from a 4-D mask; transformers#39814: a single entry).
void cu_seqlens_shape(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) {
    // A replay that failed on the position-ids path built cu_seqlens before failing: when that
    // tensor is what makes the release fail (transformers 4.54.1 with no position 0 builds a
    // single entry, then `cu.diff().max()` raises: transformers#39814), the shape is the cause.
    const VarlenArgs* r = ctx.replayed;
    if (r && r->failure && r->path == VarlenPath::position_ids && r->cu_seqlens_q.numel() > 0 &&
        !is_vector(r->cu_seqlens_q))
      ctx.report(Severity::error,
                 "the release builds cu_seqlens_q of shape " + shape_text(r->cu_seqlens_q.shape) + " (" +
                     std::to_string(r->cu_seqlens_q.numel()) + " entries) and fails on it before calling the kernel",
                 {{"tensor", "cu_seqlens_q"}, {"shape", r->cu_seqlens_q.shape}, {"entries", r->cu_seqlens_q.numel()}},
                 r->failure->type + ": " + r->failure->message);
    return;
  }
  const bool fa2 = ctx.rules().family == 2;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (is_vector(cu)) continue;
    // FA2: batch_size = cu_seqlens_q.numel() - 1 must be > 0, then CHECK_SHAPE(cu, batch_size + 1)
    std::string upstream;
    if (fa2) upstream = q && cu.numel() < 2 ? "batch size must be positive"
                                            : std::string(cu_name(q)) + " must have shape (batch_size + 1)";
    ctx.report(Severity::error,
               std::string(cu_name(q)) + " has shape " + shape_text(cu.shape) + " (" + std::to_string(cu.numel()) +
                   " entries); it must be 1-D with batch_size + 1 >= 2 entries",
               {{"tensor", cu_name(q)}, {"shape", cu.shape}, {"entries", cu.numel()}}, upstream);
    if (same_cu(*a)) break;
  }
  if (is_vector(a->cu_seqlens_q) && is_vector(a->cu_seqlens_k) && a->cu_seqlens_q.numel() != a->cu_seqlens_k.numel())
    ctx.report(Severity::error,
               "cu_seqlens_q has " + std::to_string(a->cu_seqlens_q.numel()) + " entries but cu_seqlens_k has " +
                   std::to_string(a->cu_seqlens_k.numel()) + "; both must be batch_size + 1",
               {{"entries_q", a->cu_seqlens_q.numel()}, {"entries_k", a->cu_seqlens_k.numel()}},
               fa2 ? "cu_seqlens_k must have shape (batch_size + 1)" : "");
  if (a->seqused_k && is_vector(a->cu_seqlens_q) &&
      static_cast<int64_t>(a->seqused_k->size()) != a->cu_seqlens_q.numel() - 1)
    ctx.report(Severity::error,
               "seqused_k has " + std::to_string(a->seqused_k->size()) + " entries for " +
                   std::to_string(a->cu_seqlens_q.numel() - 1) + " sequences",
               {{"tensor", "seqused_k"}, {"entries", a->seqused_k->size()}, {"batch_size", a->cu_seqlens_q.numel() - 1}},
               fa2 ? "seqused_k must have shape (batch_size)" : "");
}

// 18 cu_seqlens.start: the kernel takes row offsets from cu[b] as unsigned 32-bit: a negative
// start is a huge offset (illegal memory access); a positive one leaves the rows before it
// unwritten (prime-rl PR#2392: positions starting at 1024 became cu_seqlens = [1024, 3072]).
void cu_seqlens_start(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (cu.rank() != 1 || cu.values.empty() || cu.values.front() == 0) continue;
    const int64_t first = cu.values.front();
    ctx.report(Severity::error,
               std::string(cu_name(q)) + "[0] is " + std::to_string(first) + ", not 0" +
                   (first < 0 ? ": a negative start becomes a huge unsigned row offset"
                              : ": rows 0-" + std::to_string(first - 1) + " are never written"),
               {{"tensor", cu_name(q)}, {"first", first}},
               first < 0 ? "an illegal memory access was encountered" : "");
    if (same_cu(*a)) break;
  }
}

// 19 cu_seqlens.monotonic: a decrease is a negative length; the tile loop computes nothing
// for it and the rows it should cover keep whatever memory held. Equal entries (empty
// sequences) are allowed.
void cu_seqlens_monotonic(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (cu.rank() != 1) continue;
    const auto& v = cu.values;
    int64_t decreases = 0;
    size_t first = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] < v[i - 1] && decreases++ == 0) first = i - 1;
    if (decreases > 0)
      ctx.report(Severity::error,
                 std::string(cu_name(q)) + " decreases at segment " + std::to_string(first) + ": " +
                     std::to_string(v[first]) + " -> " + std::to_string(v[first + 1]) +
                     " (a negative length: its rows are never written, and later segments overlap earlier ones)",
                 {{"tensor", cu_name(q)}, {"segment", first}, {"from", v[first]}, {"to", v[first + 1]},
                  {"decreases", decreases}});
    if (same_cu(*a)) break;
  }
}

// 20 cu_seqlens.total: cu[-1] must be the packed tensor's row count. Over: reads and writes
// past q/k/v/out (flash-attention#855, LongQLoRA#6, the mRoPE cu = [0, S, 2S, 3S]); under: tail
// rows never written, NaN gradients (flash-attention#1661, PR#2324).
void cu_seqlens_total(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (cu.rank() != 1 || cu.values.empty()) continue;
    const int64_t last = cu.values.back(), rows = q ? a->total_q : a->total_k;
    if (last == rows) {
      if (k_is_q(*a)) break;
      continue;
    }
    const bool over = last > rows;
    ctx.report(Severity::error,
               std::string(cu_name(q)) + "[-1] is " + std::to_string(last) + " but " + (q ? "q" : "k/v") + " has " +
                   std::to_string(rows) + " rows" +
                   (over ? ": the kernel reads and writes " + checked::to_text(checked::sub(last, rows)) +
                               " rows past the tensor"
                         : ": the last " + checked::to_text(checked::sub(rows, last)) +
                               " rows are never written (uninitialised output, NaN gradients)"),
               {{"tensor", cu_name(q)}, {"last", last}, {"rows", rows}},
               over ? "an illegal memory access was encountered" : "");
    if (k_is_q(*a)) break;
  }
}

// 21 max_seqlen.type: a host int > 0. transformers 4.44 - 4.53 passed position_ids.max() + 1 as a
// 0-d tensor on the packed path: FA2 and FA3 turn it into an int (a device->host sync, a graph
// break under torch.compile); FA4 (flash_attn.cute) uses it in tile arithmetic typed
// Optional[int] and fails.
void max_seqlen_type(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  const FlashAttnRules& r = ctx.rules();
  for (bool q : {true, false}) {
    const MaxSeqlen& m = q ? a->max_seqlen_q : a->max_seqlen_k;
    const std::string name = q ? "max_seqlen_q" : "max_seqlen_k";
    if (m.is_none) {
      ctx.report(Severity::error,
                 name + " is None (varlen kwargs without max_length): the kernel needs an int to size its grid",
                 {{"argument", name}, {"is_none", true}}, "incompatible function arguments");
    } else if (m.value <= 0) {
      ctx.report(Severity::error, name + " is " + std::to_string(m.value) + "; it must be > 0 (the grid is sized from it)",
                 {{"argument", name}, {"value", m.value}});
    } else if (m.is_tensor) {
      ctx.report(r.max_seqlen_tensor_ok ? Severity::warning : Severity::error,
                 name + " is a 0-d " + to_string(m.dtype) + " tensor, not a host int: " +
                     (r.max_seqlen_tensor_ok ? "FA" + std::to_string(r.family) +
                                                   " converts it at the cost of a device->host sync (a graph break under "
                                                   "torch.compile)"
                                             : "flash_attn " + ctx.fa.label() + " needs an int for its tile arithmetic"),
                 {{"argument", name}, {"value", m.value}, {"is_tensor", true}, {"flash_attn", ctx.fa.label()}});
    }
    if (q && a->max_seqlen_k.value == a->max_seqlen_q.value && a->max_seqlen_k.is_tensor == a->max_seqlen_q.is_tensor &&
        a->max_seqlen_k.is_none == a->max_seqlen_q.is_none)
      break;
  }
}

// 22 max_seqlen.covers: the grid has ceil(max_seqlen_q / BLOCK_M) query tiles, so rows of a
// longer segment past them are never computed; a short max_seqlen_k drops keys in split-KV,
// paged and backward kernels (flash-attention#1773).
void max_seqlen_covers(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a || !shapes_ok(*a)) return;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    int64_t longest = 0;
    size_t where = 0;
    for (size_t i = 0; i + 1 < cu.values.size(); ++i)
      if (auto l = segment_length(cu, i); l && *l > longest) {
        longest = *l;
        where = i;
      }
    const int64_t m = (q ? a->max_seqlen_q : a->max_seqlen_k).value;
    if (m > 0 && longest > m)
      ctx.report(Severity::error,
                 std::string(q ? "max_seqlen_q" : "max_seqlen_k") + " is " + std::to_string(m) + " but segment " +
                     std::to_string(where) + " has " + std::to_string(longest) + (q ? " queries" : " keys") +
                     (q ? ": its rows past " + std::to_string(m) + " are never computed"
                        : ": keys past " + std::to_string(m) + " are dropped by split-KV, paged and backward kernels"),
                 {{"argument", q ? "max_seqlen_q" : "max_seqlen_k"}, {"value", m}, {"segment", where}, {"length", longest}});
    if (k_is_q(*a) && a->max_seqlen_k.value == a->max_seqlen_q.value) break;
  }
}

}  // namespace ad::checks
