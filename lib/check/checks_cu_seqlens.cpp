// Static: cu_seqlens and max_seqlen as they reach the kernel (ids 15-22). flash_attn's
// mha_varlen_fwd (csrc/flash_attn/flash_api.cpp, 2.x) checks only the dtype (int32), the device
// (CHECK_DEVICE), batch_size = cu_seqlens_q.numel() - 1 > 0 and CHECK_SHAPE(cu_seqlens_q/k,
// batch_size + 1); each family's messages are its host-check table's (vocab/host_checks.cpp).
// The values are never checked:
// each value invariant says what the kernel does with them instead (execution.md, the FA2
// indexing contract).
#include <algorithm>
#include <cmath>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"
#include "contract/fa2_forward.hpp"

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
               ctx.rules().host_checks().message(q ? HostCheck::cu_seqlens_q_dtype : HostCheck::cu_seqlens_k_dtype));
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
    Violation& v = ctx.report(Severity::error,
               std::string(cu_name(q)) + " is on " + d + " but q is on " + q_device +
                   (cpu ? ": the host check rejects it" : ": the kernel reads it across devices"),
               {{"tensor", cu_name(q)}, {"device", d}, {"q_device", q_device}},
               cpu ? ctx.rules().host_checks().message(q ? HostCheck::cu_seqlens_q_device : HostCheck::cu_seqlens_k_device)
                   : "an illegal memory access was encountered");
    if (!cpu) ctx.symptom(v, "other_gpu");
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
      ctx.symptom(ctx.report(Severity::error,
                 "the release builds cu_seqlens_q of shape " + shape_text(r->cu_seqlens_q.shape) + " (" +
                     std::to_string(r->cu_seqlens_q.numel()) + " entries) and fails on it before calling the kernel",
                 {{"tensor", "cu_seqlens_q"}, {"shape", r->cu_seqlens_q.shape}, {"entries", r->cu_seqlens_q.numel()}},
                 r->failure->type + ": " + r->failure->message),
                  "replay", r->failure->type + ": " + r->failure->message);
    return;
  }
  const HostCheckTable& host = ctx.rules().host_checks();
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (is_vector(cu)) continue;
    // batch_size = cu_seqlens_q.numel() - 1: FA1 and FA2 check it is > 0 first; then the shape
    // check (batch_size + 1) fails for a cu_seqlens_q not 1-D (FA3 and FA4 take a 1-D one with
    // fewer than 2 entries) and for a cu_seqlens_k of another length.
    std::string_view upstream;
    if (q && cu.numel() < 2 && host.find(HostCheck::batch_size_positive))
      upstream = host.message(HostCheck::batch_size_positive);
    else if (!q || cu.rank() != 1)
      upstream = host.message(q ? HostCheck::cu_seqlens_q_shape : HostCheck::cu_seqlens_k_shape);
    ctx.report(Severity::error,
               std::string(cu_name(q)) + " has shape " + shape_text(cu.shape) + " (" + std::to_string(cu.numel()) +
                   " entries); it must be 1-D with batch_size + 1 >= 2 entries",
               {{"tensor", cu_name(q)}, {"shape", cu.shape}, {"entries", cu.numel()}}, upstream);
    if (same_cu(*a)) break;
  }
  // a paged call's cu_seqlens_k is the page table's layout (one block per row), not an argument:
  // input.feature reports FA3's "batch_size must be equal to batch_size_k" for it
  const bool paged = ctx.batch.varlen && ctx.batch.varlen->page_table && a->path == VarlenPath::explicit_varlen;
  if (!paged && is_vector(a->cu_seqlens_q) && is_vector(a->cu_seqlens_k) && a->cu_seqlens_q.numel() != a->cu_seqlens_k.numel())
    ctx.report(Severity::error,
               "cu_seqlens_q has " + std::to_string(a->cu_seqlens_q.numel()) + " entries but cu_seqlens_k has " +
                   std::to_string(a->cu_seqlens_k.numel()) + "; both must be batch_size + 1",
               {{"entries_q", a->cu_seqlens_q.numel()}, {"entries_k", a->cu_seqlens_k.numel()}},
               host.message(HostCheck::cu_seqlens_k_shape));
  if (a->seqused_k && is_vector(a->cu_seqlens_q) &&
      static_cast<int64_t>(a->seqused_k->size()) != a->cu_seqlens_q.numel() - 1)
    ctx.report(Severity::error,
               "seqused_k has " + std::to_string(a->seqused_k->size()) + " entries for " +
                   std::to_string(a->cu_seqlens_q.numel() - 1) + " sequences",
               {{"tensor", "seqused_k"}, {"entries", a->seqused_k->size()}, {"batch_size", a->cu_seqlens_q.numel() - 1}},
               host.message(HostCheck::seqused_k_shape));
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
    Violation& v = ctx.report(Severity::error,
               std::string(cu_name(q)) + "[0] is " + std::to_string(first) + ", not 0" +
                   (first < 0 ? ": a negative start becomes a huge unsigned row offset"
                              : ": rows 0-" + std::to_string(first - 1) + " are never written"),
               {{"tensor", cu_name(q)}, {"first", first}},
               first < 0 ? "an illegal memory access was encountered" : "");
    v.location = Location::packed(q ? Side::q : Side::k, std::min<int64_t>(first, 0), std::max<int64_t>(first, 0));
    if (first > 0 && q) {
      ctx.symptom(v, "positive", "", packed_rows_as_user_sees(*a, 0, std::min(first, a->total_q) - 1));
      if (v.symptom && !v.symptom->rows.empty())
        v.symptom->message = "no error; output rows " + rows_text(v.symptom->rows, 4) +
                             " are never written (torch.empty: stale values)";
    } else if (first > 0) {
      ctx.symptom(v, "positive", "no error; every segment reads the keys cu_seqlens_k places it at, shifted by " +
                                     std::to_string(first) + " rows");
    }
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
                  {"decreases", decreases}})
          .location = Location::segment_of(q ? Side::q : Side::k, static_cast<int64_t>(first));
    if (same_cu(*a)) break;
  }
}

namespace {

// How far FA2's varlen forward reaches into q/out and k/v: per segment, the rows of its
// ceil(max_seqlen_q / kBlockM) row tiles (loads and stores are predicated by the segment's own
// length), and for each the key blocks compute_attn_1rowblock visits (contract/fa2_forward.hpp).
struct Reach {
  int64_t q_end = 0;  // one past the furthest q/out row accessed
  int64_t k_end = 0;  // one past the furthest k/v row read
};

Reach fa2_reach(const Ctx& ctx, const VarlenArgs& a) {
  Reach r;
  const Model& m = ctx.batch.model;
  const bool dropout = a.call.dropout > 0;
  const fa2::Tile tile = fa2::tile_for(static_cast<int>(std::min<int64_t>(m.head_dim, 256)), dropout, fa2::GpuArch::sm90);
  const int64_t grid_rows = checked::ceil_div(std::max<int64_t>(a.max_seqlen_q.value, 0), tile.block_m) * tile.block_m;
  // mha_varlen_fwd / set_params_fprop's adjustments of causal and the window (the contract's)
  const fa2::Normalized n = fa2::normalize({.max_seqlen_q = a.max_seqlen_q.value,
                                            .max_seqlen_k = std::max<int64_t>(a.max_seqlen_k.value, 0),
                                            .num_heads = m.num_heads,
                                            .num_heads_k = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads,
                                            .head_dim = m.head_dim,
                                            .causal = a.call.causal,
                                            .window_left = a.call.window_left,
                                            .window_right = a.call.window_right,
                                            .dropout = dropout});
  const fa2::Flags flags{n.causal, n.local, static_cast<int32_t>(std::min<int64_t>(n.window_left, INT32_MAX)),
                         static_cast<int32_t>(std::min<int64_t>(n.window_right, INT32_MAX)), tile.block_m, tile.block_n};
  const auto& cq = a.cu_seqlens_q.values;
  const auto& ck = a.cu_seqlens_k.values;
  auto clamp32 = [](int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)); };
  for (size_t b = 0; b + 1 < cq.size() && b + 1 < ck.size(); ++b) {
    const int64_t len_q = cq[b + 1] - cq[b], len_k = ck[b + 1] - ck[b];
    if (len_q <= 0 || cq[b] < 0 || ck[b] < 0) continue;
    const int64_t rows = std::min(len_q, grid_rows);
    if (rows <= 0) continue;
    r.q_end = std::max(r.q_end, cq[b] + rows);
    if (len_k <= 0) continue;
    const fa2::TileRange t = fa2::tile_range((rows - 1) / tile.block_m, clamp32(len_q), clamp32(len_k), flags);
    if (!t.exits && !t.empty) r.k_end = std::max(r.k_end, ck[b] + t.key_end);
  }
  return r;
}

// The symptom of an overrun: where the furthest access lands against the caching allocator's
// segment of each tensor (predict.hpp caching_allocator_placement).
void overrun_symptom(Ctx& ctx, Violation& v, const VarlenArgs& a) {
  const Model& m = ctx.batch.model;
  const Reach reach = fa2_reach(ctx, a);
  const int64_t elem = dtype_bytes(m.dtype);
  struct Side {
    const char* tensors;
    int64_t end, rows, heads;
  };
  bool past_segment = false, reached = false;
  std::string detail;
  nlohmann::json sides = nlohmann::json::array();
  for (const Side& s : {Side{"q/out", reach.q_end, a.total_q, m.num_heads}, Side{"k/v", reach.k_end, a.total_k, m.num_kv_heads}}) {
    if (s.end <= s.rows) continue;
    reached = true;
    const auto row_bytes = checked::product({s.heads, m.head_dim, elem});
    const auto tensor_bytes = row_bytes ? checked::mul(std::max<int64_t>(s.rows, 0), *row_bytes) : std::nullopt;
    const auto past_bytes = row_bytes ? checked::mul(s.end - s.rows, *row_bytes) : std::nullopt;
    const AllocatorPlacement place = caching_allocator_placement(tensor_bytes.value_or(0));
    const bool inside = tensor_bytes && past_bytes && *past_bytes <= place.segment_bytes - *tensor_bytes;
    past_segment = past_segment || !inside;
    sides.push_back({{"tensors", s.tensors}, {"rows", s.rows}, {"furthest_row", s.end - 1},
                     {"bytes_past", checked::to_text(past_bytes)}, {"segment_bytes", place.segment_bytes},
                     {"inside_segment", inside}});
    detail += std::string(detail.empty() ? "" : " and ") + std::to_string(s.end - s.rows) + " rows past " + s.tensors;
  }
  v.evidence["reach"] = sides;
  if (!past_segment) v.evidence.erase("upstream_message");  // nothing is raised
  if (!reached) {
    ctx.symptom(v, "over_unreached");
    return;
  }
  if (past_segment) {
    ctx.symptom(v, "over_past_segment");
    return;
  }
  // torch.varlen_attn (its bundled FA2) measured: the segment that runs past the key rows reads
  // their keys and values in its last tile, and its rows inside the tensor come out wrong (NaN
  // where that memory held NaN) beside the invalid writes (golden
  // oracle-torch-varlen-cu-end-past-rows): the wrong rows are what the user sees first.
  if (a.call.api == Api::torch_varlen_attn && reach.k_end > a.total_k) {
    std::vector<RowRange> rows;
    const auto& cq = a.cu_seqlens_q.values;
    const auto& ck = a.cu_seqlens_k.values;
    for (size_t b = 0; b + 1 < cq.size() && b + 1 < ck.size(); ++b) {
      if (ck[b + 1] <= a.total_k || ck[b] >= a.total_k) continue;
      const int64_t first = std::max<int64_t>(cq[b], 0), last = std::min(cq[b + 1], a.total_q) - 1;
      if (first <= last) rows.push_back({first, last});
    }
    if (!rows.empty()) {
      ctx.symptom(v, "over_in_segment_keys",
                  "no error; rows " + rows_text(rows, 4) + " of the output are wrong: their segment runs past the " +
                      std::to_string(a.total_k) + " key rows and its last tile reads the keys and values beyond them "
                      "(NaN where that memory holds NaN); the kernel also reads and writes " + detail +
                      " (compute-sanitizer reports the invalid writes)",
                  rows);
      return;
    }
  }
  ctx.symptom(v, "over_in_segment",
                "no error; the intended rows come out right, but the kernel reads and writes " + detail +
                    ", inside the caching allocator's segments (memory corruption possible; compute-sanitizer reports it)");
}

// The symptom of a cu_seqlens_q that stops short of the rows: the rows past it are never
// written by the forward (torch.empty: stale values), and the backward leaves their dq unwritten
// and their dk/dv at whatever the memory held (Dao-AILab/flash-attention#1661; measured with
// stale NaN memory, golden oracle-cu-short-of-rows-padding-training). Which of those the user
// sees depends on whether the rows are tokens they meant (wrong outputs) or padding (only the
// padding rows' gradients are wrong, and they reach the weights through the projections). When
// the batch does not say, a training step is read as padding (the reported case), an inference
// call as tokens, and the message gives the other reading.
void under_symptom(Ctx& ctx, Violation& v, const VarlenArgs& a, int64_t first, int64_t rows) {
  const RowsIntent tail = packed_rows_intent(ctx.batch, first, rows);
  v.evidence["tail_rows"] = to_string(tail);
  const std::vector<RowRange> seen = packed_rows_as_user_sees(a, first, rows - 1);
  const std::string where = "rows " + rows_text(seen, 4);
  const bool training = ctx.symptoms.pass == CallPass::training;
  const bool as_padding = tail == RowsIntent::padding || (tail == RowsIntent::unknown && training);
  if (as_padding) {
    std::string message = "no error; the intended rows and their gradients are right, but dq of the padding " +
                          where + " past cu_seqlens_q[-1] is never written and their dk/dv keep stale values where " +
                          "they should be 0 (NaN when the memory held NaN); they reach the weights through the " +
                          "projections";
    if (tail == RowsIntent::unknown)
      message += ". The batch does not say whether " + where + " are padding; if they are tokens you meant, their " +
                 "output rows are never written too (wrong_output): give `intent` to decide";
    ctx.symptom(v, "under_padding", std::move(message), seen);
    return;
  }
  std::string message = "no error; output " + where + " are never written (torch.empty: stale values)";
  if (tail == RowsIntent::unknown)
    message += "; the batch does not say whether they are tokens you meant: if they are padding, no output you use "
               "is wrong, but a training step's dq/dk/dv of those rows come back stale (give `intent` to decide)";
  ctx.symptom(v, "under", std::move(message), seen);
}

// FA2's split-KV decode path (mha_varlen_fwd with seqlenq_ngroups_swapped, set_params_splitkv
// and num_splits_heuristic in flash_api.cpp, 2.5 - 2.8): the keys its splits cover, sized from
// max_seqlen_k; 0 when the heuristic picks one split (the standard kernel runs, its key blocks
// from the actual lengths). The GPU is an H100 / H200 (132 SMs).
int64_t fa2_splitkv_keys_covered(int64_t segments, int64_t kv_heads, int64_t ngroups, int64_t head_dim, int64_t max_k) {
  constexpr int64_t kSMs = 132;
  const int64_t d8 = (head_dim + 7) / 8 * 8;
  const int64_t block_n = d8 <= 64 ? 256 : d8 <= 128 ? 128 : 64;
  const int64_t n_blocks = checked::ceil_div(std::max<int64_t>(max_k, 0), block_n);
  const int64_t work = segments * kv_heads * checked::ceil_div(ngroups, 64);
  const int64_t sms = 2 * kSMs;  // 128 threads per block
  if (work >= 0.8 * sms || n_blocks <= 1) return 0;
  const int64_t max_splits = std::min<int64_t>({128, sms, n_blocks});
  auto eligible = [&](int64_t s) { return s == 1 || checked::ceil_div(n_blocks, s) != checked::ceil_div(n_blocks, s - 1); };
  auto efficiency = [&](int64_t s) {
    const double waves = double(work * s) / double(sms);
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int64_t s = 1; s <= max_splits; ++s)
    if (eligible(s)) best = std::max(best, efficiency(s));
  int64_t splits = 1;
  for (int64_t s = 1; s <= max_splits; ++s)
    if (eligible(s) && efficiency(s) >= 0.85 * best) {
      splits = s;
      break;
    }
  if (splits <= 1) return 0;
  return splits * checked::ceil_div(n_blocks, splits) * block_n;
}

}  // namespace

// 20 cu_seqlens.total: cu[-1] must be the packed tensor's row count. Over: the kernel reads and
// writes past q/k/v/out (flash-attention#855, LongQLoRA#6, the mRoPE cu = [0, S, 2S, 3S]). What
// the user sees depends on how far: accesses that stay inside the caching allocator's segment
// the tensor sits in raise nothing and leave the intended rows right (compute-sanitizer sees
// them); a phantom segment far past it faults. Under: tail rows never written, NaN gradients
// (flash-attention#1661, PR#2324).
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
    nlohmann::json ev = {{"tensor", cu_name(q)}, {"last", last}, {"rows", rows}};
    Violation& v =
        ctx.report(Severity::error,
                   std::string(cu_name(q)) + "[-1] is " + std::to_string(last) + " but " + (q ? "q" : "k/v") + " has " +
                       std::to_string(rows) + " rows" +
                       (over ? ": the kernel reads and writes " + checked::to_text(checked::sub(last, rows)) +
                                   " rows past the tensor"
                             : ": the last " + checked::to_text(checked::sub(rows, last)) +
                                   " rows are never written (uninitialised output, NaN gradients)"),
                   ev, over ? "an illegal memory access was encountered" : "");
    v.location = Location::packed(q ? Side::q : Side::k, rows, last);
    if (over) overrun_symptom(ctx, v, *a);
    else if (q) under_symptom(ctx, v, *a, std::max<int64_t>(last, 0), rows);
    else ctx.symptom(v, "under");
    if (k_is_q(*a)) break;
  }
}

// 21 max_seqlen.type: a host int > 0, judged per argument. transformers 4.44 - 4.53 passed
// position_ids.max() + 1 as a 0-d tensor on the packed path (both arguments); 5.4 - 5.13 keep
// _get_unpad_data's max a 0-d tensor, so the decode / partial-query path passes max_seqlen_q as a
// host int beside a 0-d max_seqlen_k. FA2 and FA3 turn a tensor into an int (a device->host sync,
// a graph break under torch.compile); FA4 (flash_attn.cute) uses it in tile arithmetic typed
// Optional[int] and fails. One violation per argument, or one naming both when both are the same.
void max_seqlen_type(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a) return;
  // axolotl's ring attention (0.9.0 - 0.19.0, context parallel size > 1) replaces transformers'
  // _flash_attention_forward, where the replayed max_seqlen is built: its batch adapters pass
  // none, varlen_llama3 ring-flash-attn's host ints (llama3_flash_attn_prepare_cu_seqlens, .item())
  if (const auto& d = ctx.batch.dispatch; d && d->library == "axolotl" && d->ring_degree > 1 &&
                                          !(ctx.batch.environment.axolotl &&
                                            *ctx.batch.environment.axolotl >= version_literal("0.20.0")))
    return;
  const FlashAttnRules& r = ctx.rules();
  const MaxSeqlen& mq = a->max_seqlen_q;
  const MaxSeqlen& mk = a->max_seqlen_k;
  const bool same = mq.value == mk.value && mq.is_tensor == mk.is_tensor && mq.is_none == mk.is_none &&
                    (!mq.is_tensor || mq.dtype == mk.dtype);
  auto host_int = [](const MaxSeqlen& m) { return !m.is_none && !m.is_tensor; };
  for (bool q : {true, false}) {
    if (!q && same) break;
    const MaxSeqlen& m = q ? mq : mk;
    const MaxSeqlen& other = q ? mk : mq;
    const std::string name = q ? "max_seqlen_q" : "max_seqlen_k";
    const std::string other_name = q ? "max_seqlen_k" : "max_seqlen_q";
    const std::string subject = same ? "max_seqlen_q and max_seqlen_k are" : name + " is";
    nlohmann::json ev = {{"argument", name},
                         {"arguments", same ? nlohmann::json{"max_seqlen_q", "max_seqlen_k"} : nlohmann::json{name}},
                         {"max_seqlen_q_is_tensor", mq.is_tensor},
                         {"max_seqlen_k_is_tensor", mk.is_tensor}};
    // what the other argument is, when only this one is wrong
    const std::string beside = !same && host_int(other) && other.value > 0 ? " (" + other_name + " is a host int)" : "";
    if (m.is_none) {
      ev["is_none"] = true;
      ctx.report(Severity::error,
                 subject + " None (varlen kwargs without max_length)" + beside +
                     ": the kernel needs an int to size its grid",
                 ev, "incompatible function arguments");
    } else if (m.value <= 0) {
      ev["value"] = m.value;
      ctx.report(Severity::error,
                 subject + " " + std::to_string(m.value) + beside + "; it must be > 0 (the grid is sized from it)", ev);
    } else if (m.is_tensor) {
      ev["value"] = m.value;
      ev["is_tensor"] = true;
      ev["flash_attn"] = ctx.fa.label();
      ctx.report(r.max_seqlen_tensor_ok ? Severity::warning : Severity::error,
                 subject + (same ? " 0-d " + to_string(m.dtype) + " tensors, not host ints"
                                 : " a 0-d " + to_string(m.dtype) + " tensor, not a host int") +
                     beside + ": " +
                     (r.max_seqlen_tensor_ok ? "FA" + std::to_string(r.family) +
                                                   " converts " + (same ? "them" : "it") +
                                                   " at the cost of a device->host sync (a graph break under "
                                                   "torch.compile)"
                                             : "flash_attn " + ctx.fa.label() + " needs an int for its tile arithmetic"),
                 ev);
    }
  }
}

// 22 max_seqlen.covers, by the tiles the kernels really run (FA2, flash_fwd_launch_template.h
// and flash_bwd_launch_template.h, 2.6.x - 2.8.x):
//  - forward: ceil(max_seqlen_q / kBlockM) row tiles of kBlockM rows per segment, so a longer
//    segment is still computed entirely while it fits them (a latent violation: a warning that
//    says when it bites); rows past the tiles are never written (torch.empty: stale values)
//    (flash-attention#1773). Key blocks come from the actual lengths (compute_attn_1rowblock),
//    except in the split-KV decode path (n_blocks_per_split from max_seqlen_k, taken when
//    max_seqlen_q == 1 swaps heads into rows) and the window clamp (window_size_left >=
//    max_seqlen_k drops the window, mha_varlen_fwd).
//  - backward: dot_do_o and convert_dQ run ceil(max_seqlen_q / kBlockM) row tiles, the dq/dk/dv
//    kernel ceil(max_seqlen_k / kBlockN) key-block columns.
void max_seqlen_covers(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a || !shapes_ok(*a)) return;
  const Model& m = ctx.batch.model;
  const bool training = ctx.batch.pass == CallPass::training;
  const int hd = static_cast<int>(std::clamp<int64_t>(m.head_dim, 1, 256));
  const fa2::Tile fwd = fa2::tile_for(hd, a->call.dropout > 0, fa2::GpuArch::sm90);
  // the backward's tiles on an H100 (run_mha_bwd_hdim*): 128 query rows up to head dim 64, else
  // 64; 128 keys up to head dim 128, else 64
  const int64_t bwd_m = hd <= 64 ? 128 : 64, bwd_n = hd <= 128 ? 128 : 64;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    const int64_t max = (q ? a->max_seqlen_q : a->max_seqlen_k).value;
    int64_t longest = 0;
    size_t where = 0;
    for (size_t i = 0; i + 1 < cu.values.size(); ++i)
      if (auto l = segment_length(cu, i); l && *l > longest) {
        longest = *l;
        where = i;
      }
    const bool same = k_is_q(*a) && a->max_seqlen_k.value == a->max_seqlen_q.value;
    if (max <= 0 || longest <= max) {
      if (same) break;
      continue;
    }
    const std::string name = q ? "max_seqlen_q" : "max_seqlen_k";
    const std::string head = name + " is " + std::to_string(max) + " but segment " + std::to_string(where) + " has " +
                             std::to_string(longest) + (q ? " queries" : " keys");
    nlohmann::json ev = {{"argument", name}, {"value", max}, {"segment", where}, {"length", longest}};
    const Location at = Location::segment_of(q ? Side::q : Side::k, static_cast<int64_t>(where));
    if (q) {
      const int64_t fwd_rows = checked::ceil_div(max, fwd.block_m) * fwd.block_m;
      const int64_t bwd_rows = checked::ceil_div(max, bwd_m) * bwd_m;
      ev["forward_tile_rows"] = fwd.block_m;
      ev["forward_rows_covered"] = fwd_rows;
      ev["backward_rows_covered"] = bwd_rows;
      // packed rows past `covered` in every segment longer than it
      auto rows_past = [&](int64_t covered) {
        std::vector<RowRange> rows;
        for (size_t i = 0; i + 1 < cu.values.size(); ++i) {
          auto l = segment_length(cu, i);
          if (!l || *l <= covered || cu.values[i] < 0) continue;
          auto part = packed_rows_as_user_sees(*a, cu.values[i] + covered, std::min(cu.values[i] + *l, a->total_q) - 1);
          rows.insert(rows.end(), part.begin(), part.end());
        }
        return rows;
      };
      if (longest > fwd_rows) {
        Violation& v = ctx.report(Severity::error,
                                  head + ": the forward runs ceil(" + std::to_string(max) + " / " +
                                      std::to_string(fwd.block_m) + ") row tiles, so rows past " +
                                      std::to_string(fwd_rows) + " of a segment are never computed",
                                  ev);
        v.location = at;
        auto rows = rows_past(fwd_rows);
        ctx.symptom(v, "q_rows",
                    "no error; output rows " + rows_text(rows, 4) +
                        " are never computed (torch.empty: stale finite values, not NaN)",
                    rows);
      } else if (training && longest > bwd_rows) {
        Violation& v = ctx.report(Severity::error,
                                  head + ": the forward's " + std::to_string(fwd_rows) +
                                      " tile rows cover it, but the backward's row tiles cover only " +
                                      std::to_string(bwd_rows) + " rows: dq past them is never written",
                                  ev);
        v.location = at;
        auto rows = rows_past(bwd_rows);
        ctx.symptom(v, "q_backward", "no error in the forward; dq rows " + rows_text(rows, 4) + " are never written", rows);
      } else {
        Violation& v = ctx.report(
            Severity::warning,
            head + ": latent, FA2 runs ceil(" + std::to_string(max) + " / " + std::to_string(fwd.block_m) + ") tiles of " +
                std::to_string(fwd.block_m) + " rows, which cover it" + (training ? " in the forward and the backward" : "") +
                "; it bites for a segment longer than " + std::to_string(fwd_rows) +
                " rows, on kernels with smaller row tiles (FA2 at head dim 256 on Hopper: 64), and in a training step's "
                "backward past " + std::to_string(bwd_rows) + " rows",
            ev);
        v.location = at;
        ctx.symptom(v, "q_latent");
      }
    } else {
      const bool swapped_path = a->max_seqlen_q.value == 1 && m.num_heads > m.num_kv_heads && a->call.dropout == 0 &&
                                ctx.rules().varlen_single_query_swap;
      const int64_t split_keys =
          swapped_path ? fa2_splitkv_keys_covered(static_cast<int64_t>(cu.values.size()) - 1, m.num_kv_heads,
                                                  m.num_heads / std::max<int64_t>(m.num_kv_heads, 1), m.head_dim, max)
                       : 0;
      const bool swapped = split_keys > 0 && longest > split_keys;
      if (split_keys > 0) ev["split_kv_keys_covered"] = split_keys;
      const bool window_dropped = a->call.window_left >= max && a->call.window_left < longest;
      const int64_t bwd_keys = checked::ceil_div(max, bwd_n) * bwd_n;
      ev["backward_keys_covered"] = bwd_keys;
      if (window_dropped) {
        Violation& v = ctx.report(Severity::error,
                                  head + ": mha_varlen_fwd drops a left window of " + std::to_string(a->call.window_left) +
                                      " >= max_seqlen_k, so the segment attends to all its keys",
                                  ev);
        v.location = at;
        ctx.symptom(v, "k_window");
      } else if (swapped) {
        Violation& v = ctx.report(Severity::error,
                                  head + ": the single-query decode path splits the keys by max_seqlen_k, and its splits "
                                         "cover only " + std::to_string(split_keys) + " keys",
                                  ev);
        v.location = at;
        ctx.symptom(v, "k_split");
      } else if (training && longest > bwd_keys) {
        Violation& v = ctx.report(Severity::error,
                                  head + ": the forward reads every key, but the backward's key-block grid covers only " +
                                      std::to_string(bwd_keys) + " keys: dk and dv past them are never written",
                                  ev);
        v.location = at;
        ctx.symptom(v, "k_backward");
      } else {
        Violation& v = ctx.report(Severity::warning,
                                  head + ": latent, FA2's forward takes its key blocks from cu_seqlens_k; it bites in a "
                                         "training step's backward past " +
                                      std::to_string(bwd_keys) +
                                      " keys, in the split-KV decode path, and with a window >= max_seqlen_k",
                                  ev);
        v.location = at;
        ctx.symptom(v, "k_latent");
      }
    }
    if (same) break;
  }
}

}  // namespace ad::checks
