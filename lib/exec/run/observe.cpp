// Observations -> stage records and violations, one implementation for every engine.
#include "exec/run/observe.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "check/check.hpp"
#include "util/numbers.hpp"

namespace ad::observe {
namespace {

std::string raise_text(const HostRaise& r) { return r.where + " raises " + r.type + ": " + r.message; }
nlohmann::json raise_json(const HostRaise& r) { return {{"where", r.where}, {"type", r.type}, {"message", r.message}}; }

nlohmann::json access_json(const AccessRecord& r) {
  const Access& a = r.first;
  nlohmann::json j = {{"kind", to_string(a.kind)}, {"buffer", to_string(a.buffer)}, {"index", a.index},
                      {"bound", a.bound}, {"unit", to_string(a.unit)}, {"count", r.count}};
  if (a.row >= 0) j["row"] = a.row;
  if (a.segment >= 0) j["segment"] = a.segment;
  if (a.head >= 0) j["head"] = a.head;
  if (a.region == Region::head) j["region"] = "head";  // inside the buffer, in another head's part
  if (a.block[0] >= 0 || a.block[1] >= 0 || a.block[2] >= 0) j["block"] = {a.block[0], a.block[1], a.block[2]};
  return j;
}

// Where a refused access lies: its segment, else its row of a packed tensor of a known side
// (q/out or k/v); `side` for a buffer of neither.
Location access_location(const Access& a, std::optional<Side> side) {
  if (a.buffer == Buffer::q || a.buffer == Buffer::out) side = Side::q;
  if (a.buffer == Buffer::k || a.buffer == Buffer::v) side = Side::k;
  if (a.segment >= 0) return Location::segment_of(side.value_or(Side::q), a.segment);
  if (a.row >= 0 && side) return Location::packed(*side, a.row, a.row + 1);
  return {};
}

// A call that raises on the host before its kernel runs: no output row is ever written
// (attention.coverage), so a failing call is never an "ok" report.
Violation raised_violation(const HostRaise& r, int64_t rows) {
  return make_violation("attention.coverage", Severity::error,
                        "no output row is written: " + raise_text(r) + " before the attention kernel runs",
                        {{"never_written", rows}, {"raises", raise_json(r)}});
}

}  // namespace

StageRecord& Stages::add(Stage name) {
  res.stages.push_back(StageRecord{name, StageStatus::ok, 0.0, ""});
  return res.stages.back();
}

void Stages::not_reached_after(Stage last, const std::string& why) {
  size_t from = 0;
  while (from < count && kDynamicStages[from] != last) ++from;
  for (size_t i = from + 1; i < count; ++i)
    res.stages.push_back(StageRecord{kDynamicStages[i], StageStatus::skipped, 0.0, "not reached: " + why});
}

void host_raise(Stages& st, StageRecord& s, const HostRaise& r, const char* what, int64_t rows) {
  s.status = StageStatus::violation;
  s.detail = raise_text(r) + " (host check, before any launch)";
  s.facts.raises = RaisedFact{r.where, r.type, r.message};
  st.not_reached_after(s.name, std::string("the ") + what + " call raises");
  st.res.violations.push_back(raised_violation(r, rows));
}

void conversion_raise(Stages& st, const HostRaise& r, int64_t rows) {
  st.not_reached_after(Stage::unpad, raise_text(r));
  if (st.res.violations.empty()) st.res.violations.push_back(raised_violation(r, rows));
}

void unpad_gather(StageRecord& s, ExecResult& res, const AccessRecord& rec, const std::string& first_tensor,
                  int64_t out_of_bounds_total) {
  s.facts.out_of_bounds = out_of_bounds_total;
  if (!rec.has_first()) return;
  const Access& first = rec.first;
  s.status = StageStatus::violation;
  const bool key = first_tensor != "q";
  const std::string which = key ? "key" : "query";
  const std::string idx_name = key ? "indices_k" : "indices_q";
  const int64_t per_gather = int64_t(rec.count);
  s.detail = std::to_string(out_of_bounds_total) + " gather indices out of range";
  res.violations.push_back(make_violation(
      "unpad.gather", Severity::error,
      "index " + std::to_string(first.index) + " >= " + std::to_string(first.bound) + " in the " + which + " gather (" +
          idx_name + "[" + std::to_string(first.row) + "] reads row " + std::to_string(first.index) + " of the " +
          std::to_string(first.bound) + "-row " + (key ? "(B*Lk)" : "(B*Lq)") + " view); " + std::to_string(per_gather) +
          (per_gather == 1 ? " index" : " indices") + " out of range, not gathered",
      {{"tensor", first_tensor}, {"indices", idx_name}, {"position", first.row}, {"index", first.index},
       {"bound", first.bound}, {"count", per_gather}, {"count_all_gathers", out_of_bounds_total}}));
  res.violations.back().location = Location::indices(key ? Side::k : Side::q, first.row, first.row + 1);
}

void rotary_access(StageRecord& s, ExecResult& res, const RotaryPlan& r, int64_t head_dim, const RotaryCall& q,
                   const RotaryCall& k) {
  // one violation: the first call that went wrong (q is launched first)
  for (int call = 0; call < 2; ++call) {
    const RotaryCall& rr = call == 0 ? q : k;
    const char* tensor = call == 0 ? "q" : "k";
    const AccessRecord* rec = rr.outside_tensor.has_first() ? &rr.outside_tensor
                              : rr.table.has_first()        ? &rr.table
                              : rr.outside_head.has_first() ? &rr.outside_head
                                                            : nullptr;
    if (!rec) continue;
    const Access* first = &rec->first;
    std::string msg = std::string(to_string(r.contract)) + " rotary (dim " + std::to_string(r.dim) + ", head_dim " + std::to_string(head_dim) + ") ";
    if (rec == &rr.outside_tensor)
      msg += std::string(to_string(first->kind)) + "s past the end of " + tensor + ": element " + std::to_string(first->index) +
             " >= " + std::to_string(first->bound) + " (row " + std::to_string(first->row) + ", head " +
             std::to_string(first->head) + "); " + std::to_string(rr.outside_tensor.count) +
             " accesses outside the tensor (not performed)";
    else if (rec == &rr.table)
      msg += "reads the cos/sin table at a negative position (element " + std::to_string(first->index) + ", row " +
             std::to_string(first->row) + ")";
    else
      msg += std::string(to_string(first->kind)) + "s outside its head: head " + std::to_string(first->head) + " of " +
             tensor + " row " + std::to_string(first->row) + " touches element " + std::to_string(first->index) +
             " of the next heads";
    if (rr.outside_head.count > 0 && rec != &rr.outside_head)
      msg += "; " + std::to_string(rr.outside_head.count) + " accesses inside the tensor but outside their head";
    else if (rr.outside_head.count > 0)
      msg += "; " + std::to_string(rr.outside_head.count) + " such accesses (silent corruption of the neighbouring heads)";
    nlohmann::json ev = access_json(*rec);
    ev["tensor"] = tensor;
    ev["outside_tensor"] = rr.outside_tensor.count;
    ev["outside_head"] = rr.outside_head.count;
    ev["table"] = rr.table.count;
    res.violations.push_back(make_violation("rotary.access", Severity::error, msg, ev));
    res.violations.back().location = access_location(*first, call == 0 ? Side::q : Side::k);
    s.status = StageStatus::violation;
    return;
  }
}

void attention_launch(StageRecord& s, const ExecPlan& plan) {
  const AttentionPlan& at = plan.attention;
  s.facts.function = plan.function;
  s.facts.grid = std::array<int64_t, 3>{at.grid_m, at.grid_b, at.grid_h};
  s.facts.block_m = at.flags.block_m;
  s.facts.block_n = at.flags.block_n;
  s.facts.causal = at.flags.causal;
  s.facts.local = at.flags.local;
  if (at.flags.local) s.facts.window_size = std::array<int64_t, 2>{at.flags.window_left, at.flags.window_right};
  if (at.softcap > 0) s.facts.softcap = at.softcap;
  if (at.swapped) s.facts.seqlenq_ngroups_swapped = true;
}

Coverage coverage_of(const std::vector<uint32_t>& writes, const AttentionPlan& at) {
  Coverage c;
  const auto& cq = at.cu_seqlens_q;
  // FA3 / FA4 leave the rows past seqused_q unwritten by contract: not counted as never written
  const std::vector<uint8_t> past = at.rows_past_seqused_q();
  for (size_t i = 0; i < writes.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i);
    const uint32_t n = writes[i];
    if (n == 0 && i < past.size() && past[i]) {
      ++c.rows_past_seqused_q;
      continue;
    }
    if (n == 0) {
      if (c.rows_never++ == 0) c.first_never = r;
      continue;
    }
    ++c.rows_written;
    if (n > 1 && c.rows_twice++ == 0) {
      c.first_twice = r;
      c.first_twice_count = n;
    }
    if (at.swapped && i + 1 < cq.size()) {
      const int64_t s0 = cq[i], s1 = cq[i + 1];
      if (!(s0 <= r && r < s1) && c.rows_foreign++ == 0) {
        c.first_foreign = r;
        c.first_foreign_segment = r;
      }
    }
  }
  return c;
}

void attention(StageRecord& s, ExecResult& res, const AccessRecord& rec, const Coverage& c, int64_t total_q) {
  if (rec.has_first()) {
    const Access& a = rec.first;
    std::string what = a.buffer == Buffer::lse ? "softmax_lse element" : std::string(to_string(a.buffer)) + " row";
    std::string msg = "segment " + std::to_string(a.segment) + ", CTA (m=" + std::to_string(a.block[0]) + ", b=" +
                      std::to_string(a.block[1]) + ", h=" + std::to_string(a.block[2]) + ") " +
                      (a.kind == AccessKind::read ? "reads " : "writes ") + what + " " + std::to_string(a.index) +
                      (a.index < 0 ? " < 0" : " >= " + std::to_string(a.bound)) + "; " + std::to_string(rec.count) +
                      " out-of-bounds accesses in all (a row of q, k, v or out or a softmax_lse element, per CTA and head; "
                      "counted, not performed)";
    res.violations.push_back(make_violation("attention.access", Severity::error, msg, access_json(rec)));
    res.violations.back().location = access_location(a, std::nullopt);
  }
  if (c.rows_never > 0 || c.rows_twice > 0 || c.rows_foreign > 0) {
    std::vector<std::string> parts;
    nlohmann::json ev = nlohmann::json::object();
    if (c.rows_never > 0) {
      parts.push_back(std::to_string(c.rows_never) + " of " + std::to_string(total_q) +
                      " output rows never written (first: row " + std::to_string(c.first_never) + ")");
      ev["never_written"] = c.rows_never;
      ev["first_never_written"] = c.first_never;
    }
    if (c.rows_twice > 0) {
      parts.push_back(std::to_string(c.rows_twice) + " rows written by more than one segment (first: row " +
                      std::to_string(c.first_twice) + ", " + std::to_string(c.first_twice_count) + " writers)");
      ev["written_twice"] = c.rows_twice;
      ev["first_written_twice"] = c.first_twice;
    }
    if (c.rows_foreign > 0) {
      parts.push_back(std::to_string(c.rows_foreign) + " rows written for a segment that does not contain them (first: row " +
                      std::to_string(c.first_foreign) + ", written as sequence " + std::to_string(c.first_foreign_segment) +
                      " by the max_seqlen_q == 1 swapped path)");
      ev["outside_segment"] = c.rows_foreign;
      ev["first_outside_segment"] = c.first_foreign;
      ev["writer_segment"] = c.first_foreign_segment;
    }
    ev["rows"] = total_q;
    std::string msg;
    for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
    res.violations.push_back(make_violation("attention.coverage", Severity::error, msg, ev));
    const int64_t first_row = c.rows_never > 0 ? c.first_never : c.rows_twice > 0 ? c.first_twice : c.first_foreign;
    res.violations.back().location = Location::packed(Side::q, first_row, first_row + 1);
  }
  if (rec.has_first() || c.rows_never > 0 || c.rows_twice > 0 || c.rows_foreign > 0) s.status = StageStatus::violation;
}

void pad_scatter(StageRecord& s, ExecResult& res, const AccessRecord& rec) {
  if (!rec.has_first()) return;
  const Access& oob = rec.first;
  s.status = StageStatus::violation;
  res.violations.push_back(make_violation(
      "pad.scatter", Severity::error,
      "index " + std::to_string(oob.index) + (oob.index < 0 ? " < 0" : " >= " + std::to_string(oob.bound)) +
          " in pad_input's scatter (indices_q[" + std::to_string(oob.row) + "]); " + std::to_string(rec.count) +
          " rows not scattered",
      {{"position", oob.row}, {"index", oob.index}, {"bound", oob.bound}, {"count", rec.count}}));
  res.violations.back().location = Location::indices(Side::q, oob.row, oob.row + 1);
}

void result(StageRecord& s, ExecResult& res, const ExecPlan& plan, const ResultInputs& in) {
  const AttentionPlan& at = plan.attention;
  const int64_t H = plan.num_heads, D = plan.head_dim, total_q = in.total_q;
  const int64_t rows_final = plan.rows_final;
  const std::vector<uint8_t>& written = *in.written;
  const std::vector<uint8_t>& computed = *in.computed;
  const std::vector<int64_t>& source_of = *in.source_of;
  // a final row can be checked when its value is known: computed, zero (not scattered), or
  // never written at all (poison: exactly what the user would get)
  auto packed_checkable = [&](int64_t p) {
    if (p < 0 || p >= total_q) return true;
    return computed[static_cast<size_t>(p)] != 0 || written[static_cast<size_t>(p)] == 0;
  };
  std::vector<uint8_t> checkable(static_cast<size_t>(std::max<int64_t>(rows_final, 0)), 1);
  for (int64_t r = 0; r < rows_final; ++r)
    checkable[static_cast<size_t>(r)] =
        plan.pad.enabled ? packed_checkable(source_of[static_cast<size_t>(r)]) : packed_checkable(r);

  // result.finite: outputs, then the LSE of the rows computed. The rows past seqused_q hold
  // torch.empty's contents by contract (FA3 / FA4): result.reference still compares them where an
  // intended sequence includes them.
  const std::vector<uint8_t> past_used = at.rows_past_seqused_q();
  int64_t nonfinite = 0, first_row = -1, first_head = -1, first_dim = -1;
  float first_val = 0;
  for (int64_t r = 0; r < rows_final; ++r) {
    if (!checkable[static_cast<size_t>(r)]) continue;
    if (!plan.pad.enabled && r < static_cast<int64_t>(past_used.size()) && past_used[static_cast<size_t>(r)]) continue;
    const float* row = in.out_final + r * H * D;
    for (int64_t i = 0; i < H * D; ++i)
      if (!std::isfinite(row[i]) && nonfinite++ == 0) {
        first_row = r;
        first_head = i / D;
        first_dim = i % D;
        first_val = row[i];
      }
  }
  int64_t lse_bad = 0, lse_first = -1;
  const std::vector<float>& lse = *in.lse;
  if (!at.zero_fill && at.unpadded_lse) {
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < total_q; ++r) {
        if (!computed[static_cast<size_t>(r)]) continue;
        const size_t i = static_cast<size_t>(h * total_q + r);
        if (i >= lse.size()) continue;
        const float x = lse[i];
        if ((std::isnan(x) || x == -std::numeric_limits<float>::infinity()) && lse_bad++ == 0)
          lse_first = static_cast<int64_t>(i);
      }
  }
  if (nonfinite > 0 || lse_bad > 0) {
    std::string msg;
    nlohmann::json ev;
    if (nonfinite > 0) {
      const int64_t src = plan.pad.enabled ? source_of[static_cast<size_t>(first_row)] : first_row;
      const bool never = src >= 0 && src < total_q && !written[static_cast<size_t>(src)];
      msg = "output row " + std::to_string(first_row) + " head " + std::to_string(first_head) + " column " +
            std::to_string(first_dim) + " is " + number_text(first_val) +
            (never ? " (the attention kernel never wrote this row)" : "") + "; " + std::to_string(nonfinite) +
            " non-finite output elements";
      ev = {{"row", first_row}, {"head", first_head}, {"dim", first_dim}, {"value", number_text(first_val)},
            {"count", nonfinite}, {"never_written", never}};
    } else {
      msg = "softmax_lse element " + std::to_string(lse_first) + " is " + number_text(lse[static_cast<size_t>(lse_first)]);
      ev = {{"lse_index", lse_first}};
    }
    if (lse_bad > 0) ev["lse_non_finite"] = lse_bad;
    res.violations.push_back(make_violation("result.finite", Severity::error, msg, ev));
    s.status = StageStatus::violation;
  }

  // result.reference
  const ReferencePlan& ref = plan.reference;
  if (!ref.enabled) {
    s.detail = "reference skipped: " + ref.skip_reason;
    s.facts.reference_skipped = true;
    return;
  }
  ref::ReferenceResult rr = ref::reference_compare(plan, in.q_src, in.k_src, in.v_src, in.out_final, checkable, in.threads,
                                                   in.qv_src);
  s.facts.rows_total = ref.rows_total;
  s.facts.rows_checked = rr.rows_checked;
  s.facts.rows_failed = rr.rows_failed;
  s.facts.tolerance = ref.tolerance;
  s.facts.worst_error = rr.worst_error;
  s.facts.reference_macs = rr.macs;
  if (!ref.sample.empty()) s.facts.reference_sampled = true;
  s.detail = "checked " + std::to_string(rr.rows_checked) + " of " + std::to_string(ref.rows_total) + " intended query rows of the " +
             in.output_name + " against fp64 attention over the intended sequences (worst relative error " +
             number_text(rr.worst_error) + ", tolerance " + number_text(ref.tolerance) + ")";
  if (rr.rows_failed <= 0 || rr.worst_sequence < 0) return;
  const RefSequence& sq = ref.sequences[static_cast<size_t>(rr.worst_sequence)];
  std::string where = "output row " + std::to_string(rr.worst_row);
  if (plan.path != VarlenPath::explicit_varlen && plan.query_length > 0)
    where += " (batch row " + std::to_string(rr.worst_row / plan.query_length) + ", position " +
             std::to_string(rr.worst_row % plan.query_length) + ")";
  nlohmann::json ev = {{"row", rr.worst_row},
                       {"head", rr.worst_head},
                       {"dim", rr.worst_dim},
                       {"got", number_json(rr.worst_value)},
                       {"expected", rr.worst_expected},
                       {"error", number_json(rr.worst_error)},
                       {"tolerance", ref.tolerance},
                       {"sequence", {{"index", sq.index}, {"row", sq.row}, {"start", sq.start}, {"length", sq.length}}},
                       {"rows_checked", rr.rows_checked},
                       {"rows_failed", rr.rows_failed}};
  const std::string msg = where + " head " + std::to_string(rr.worst_head) + " differs from attention over intended sequence " +
                          std::to_string(sq.index) + " (row " + std::to_string(sq.row) + ", start " +
                          std::to_string(sq.start) + ", length " + std::to_string(sq.length) + "): relative error " +
                          number_text(rr.worst_error) + " > " + number_text(ref.tolerance) + " (got " + number_text(rr.worst_value) +
                          ", expected " + number_text(rr.worst_expected) + " at column " + std::to_string(rr.worst_dim) +
                          "); " + std::to_string(rr.rows_failed) + " of " + std::to_string(rr.rows_checked) +
                          " checked rows fail";
  res.violations.push_back(make_violation("result.reference", Severity::error, msg, ev));
  res.violations.back().location = Location::row_tokens(sq.row, sq.start, sq.start + sq.length);  // its worst output row's sequence
  s.status = StageStatus::violation;
}

// ---- attention_backward ---------------------------------------------------------------------

namespace {

std::string ranges_text(const std::vector<std::pair<int64_t, int64_t>>& r, size_t most = 4) {
  std::string t;
  for (size_t i = 0; i < r.size() && i < most; ++i) {
    if (i) t += ", ";
    t += std::to_string(r[i].first);
    if (r[i].second != r[i].first) t += "-" + std::to_string(r[i].second);
  }
  if (r.size() > most) t += ", ...";
  return t;
}
nlohmann::json ranges_json(const std::vector<std::pair<int64_t, int64_t>>& r) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& x : r) j.push_back({x.first, x.second});
  return j;
}
template <class F>
std::vector<std::pair<int64_t, int64_t>> ranges_where(int64_t n, F&& pred, int64_t* count) {
  std::vector<std::pair<int64_t, int64_t>> out;
  *count = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (!pred(r)) continue;
    ++*count;
    if (!out.empty() && out.back().second == r - 1) out.back().second = r;
    else out.push_back({r, r});
  }
  return out;
}
const char* const kLaunchNames[3] = {"dot_do_o", "dq_dk_dv", "convert_dQ"};

}  // namespace

void backward_launch(StageRecord& s, const ExecPlan& plan) {
  const BackwardPlan& bw = plan.backward;
  const fa2::bwd::Normalized& k = bw.kernel;
  s.facts.function = "mha_varlen_bwd";
  s.facts.grid_dot_do_o = std::array<int64_t, 3>{k.grid_m, plan.attention.num_segments, plan.num_heads};
  s.facts.grid_dq_dk_dv = std::array<int64_t, 3>{k.grid_x, plan.attention.num_segments, plan.num_heads};
  s.facts.block_m = k.tile.block_m;
  s.facts.block_n = k.tile.block_n;
  s.facts.head_dim_rounded = k.tile.head_dim_rounded;
  s.facts.causal = k.flags.causal;
  s.facts.local = k.flags.local;
  s.facts.deterministic = k.deterministic;
  const char* rule = bw.release.dq_offset == fa2::bwd::DqOffset::int32_sum     ? "int32 (start and tile terms)"
                     : bw.release.dq_offset == fa2::bwd::DqOffset::int32_start ? "int32 start term"
                                                                               : "int64";
  s.facts.dq_accum_offset = rule;
  s.facts.flash_attn = plan.flash_attn_release.text;
}

BackwardCoverage backward_coverage(const std::vector<uint32_t>& dq_writes, const std::vector<uint32_t>& dkv_writes) {
  BackwardCoverage c;
  c.dq_ranges = ranges_where(static_cast<int64_t>(dq_writes.size()), [&](int64_t r) { return dq_writes[static_cast<size_t>(r)] == 0; },
                             &c.dq_never);
  c.dkv_ranges = ranges_where(static_cast<int64_t>(dkv_writes.size()),
                              [&](int64_t r) { return dkv_writes[static_cast<size_t>(r)] == 0; }, &c.dkv_never);
  return c;
}

void backward(StageRecord& s, ExecResult& res, const ExecPlan& plan, const AccessRecord* const launches[3],
              const BackwardCoverage& cov, const DqMisroute& mis, const std::vector<uint8_t>& misrouted) {
  // backward.access: the first refused access of the first launch that refused one
  uint64_t refused = 0;
  for (int i = 0; i < 3; ++i) refused += launches[i] ? launches[i]->count : 0;
  s.facts.refused_accesses = refused;
  for (int i = 0; i < 3; ++i) {
    const AccessRecord* rec = launches[i];
    if (!rec || !rec->has_first()) continue;
    const Access& a = rec->first;
    nlohmann::json ev = access_json(*rec);
    ev["launch"] = kLaunchNames[i];
    ev["count_all_launches"] = refused;
    const std::string where = a.region == Region::head
                                  ? " in another head's part of its " + std::to_string(a.bound) + " " + to_string(a.unit) +
                                        " (a race with that head's CTAs)"
                                  : " outside its " + std::to_string(a.bound) + " " + to_string(a.unit);
    std::string msg = std::string(kLaunchNames[i]) + " " + to_string(a.kind) + "s " + to_string(a.buffer) + " " +
                      (a.unit == Unit::rows ? "row " : "element ") + std::to_string(a.index) + where + " (segment " +
                      std::to_string(a.segment) +
                      ", head " + std::to_string(a.head) + ", row " + std::to_string(a.row) + "): not performed; " +
                      std::to_string(refused) + " refused accesses in the backward";
    res.violations.push_back(make_violation("backward.access", Severity::error, msg, ev));
    res.violations.back().location = access_location(a, std::nullopt);
    s.status = StageStatus::violation;
    break;
  }
  // backward.dq_offset
  if (mis.rows > 0) {
    int64_t n = 0;
    const auto ranges = ranges_where(static_cast<int64_t>(misrouted.size()),
                                     [&](int64_t r) { return misrouted[static_cast<size_t>(r)] != 0; }, &n);
    const int64_t stride = plan.backward.dq_accum.row_stride();
    nlohmann::json ev = {{"rows", ranges_json(ranges)},        {"row_count", mis.rows},
                         {"segment", mis.segment},             {"head", mis.head},
                         {"m_block", mis.m_block},             {"intended_offset", mis.intended},
                         {"offset", mis.offset},               {"row_stride", stride},
                         {"threshold_row", fa2::bwd::first_wrapping_row(plan.backward.dq_accum)},
                         {"flash_attn", plan.flash_attn_release.text}};
    res.violations.push_back(make_violation(
        "backward.dq_offset", Severity::error,
        "dq rows " + ranges_text(ranges) + " (" + std::to_string(mis.rows) +
            " rows) accumulate at a wrapped 32-bit dq_accum offset in flash_attn " + plan.flash_attn_release.text +
            ": segment " + std::to_string(mis.segment) + ", head " + std::to_string(mis.head) + ", m block " +
            std::to_string(mis.m_block) + " goes to element " + std::to_string(mis.offset) + " instead of " +
            std::to_string(mis.intended) + " (" + std::to_string(stride) + " elements per row; offsets wrap from row " +
            std::to_string(fa2::bwd::first_wrapping_row(plan.backward.dq_accum)) + ")",
        ev));
    res.violations.back().location = Location::segment_of(Side::q, mis.segment);
    s.status = StageStatus::violation;
  }
  // backward.coverage
  s.facts.dq_rows_never_written = cov.dq_never;
  s.facts.dkv_rows_never_written = cov.dkv_never;
  if (cov.dq_never > 0 || cov.dkv_never > 0) {
    std::string msg;
    if (cov.dq_never > 0)
      msg = "dq rows " + ranges_text(cov.dq_ranges) + " (" + std::to_string(cov.dq_never) + " of " +
            std::to_string(plan.attention.total_q) + ")";
    if (cov.dkv_never > 0)
      msg += std::string(msg.empty() ? "" : " and ") + "dk/dv rows " + ranges_text(cov.dkv_ranges) + " (" +
             std::to_string(cov.dkv_never) + " of " + std::to_string(plan.attention.total_k) + ")";
    const int32_t cu_q_end = plan.attention.cu_seqlens_q.empty() ? 0 : plan.attention.cu_seqlens_q.back();
    msg += " are never written by the backward: they return torch.empty's contents (NaN or stale values)";
    if (cov.dq_never > 0 && cu_q_end < plan.attention.total_q)
      msg += "; cu_seqlens_q ends at " + std::to_string(cu_q_end) + " of " + std::to_string(plan.attention.total_q) + " rows";
    res.violations.push_back(make_violation("backward.coverage", Severity::error, msg,
                                            {{"dq_rows", ranges_json(cov.dq_ranges)},
                                             {"dq_count", cov.dq_never},
                                             {"dkv_rows", ranges_json(cov.dkv_ranges)},
                                             {"dkv_count", cov.dkv_never}}));
    s.status = StageStatus::violation;
  }
}

void backward_reference(StageRecord& s, ExecResult& res, const ExecPlan& plan, const ref::GradientResult checks[3]) {
  static const char* const kTensor[3] = {"dq", "dk", "dv"};
  const double tol = plan.backward.tolerance;
  std::array<GradientCheckFact, 3> per{};
  const ref::GradientResult* worst = nullptr;
  int worst_i = -1;
  int64_t checked = 0;
  for (int i = 0; i < 3; ++i) {
    const ref::GradientResult& c = checks[i];
    per[static_cast<size_t>(i)] = GradientCheckFact{c.rows_checked, c.rows_failed, c.worst_error};
    checked += c.rows_checked;
    if (c.rows_failed > 0 && (!worst || c.worst_error > worst->worst_error)) {
      worst = &c;
      worst_i = i;
    }
  }
  s.facts.gradients = per;
  s.facts.tolerance = tol;
  std::string summary = "gradients against fp64 gradients over the intended sequences (tolerance " + number_text(tol) + "):";
  for (int i = 0; i < 3; ++i)
    summary += std::string(i ? "," : "") + " " + kTensor[i] + " " + std::to_string(checks[i].rows_checked) +
               " (row, head) pairs, worst " + number_text(checks[i].worst_error);
  s.detail = s.detail.empty() ? summary : s.detail + "; " + summary;
  if (!worst) return;
  int64_t failed = 0;
  for (int i = 0; i < 3; ++i) failed += checks[i].rows_failed;
  const ReferencePlan& ref = plan.reference;
  nlohmann::json ev = {{"tensor", kTensor[worst_i]},      {"row", worst->worst_row},     {"head", worst->worst_head},
                       {"dim", worst->worst_dim},      {"got", number_json(worst->worst_value)},
                       {"expected", worst->worst_expected}, {"error", number_json(worst->worst_error)},
                       {"tolerance", tol},             {"rows_failed", failed},       {"rows_checked", checked}};
  std::string seq;
  if (worst->worst_sequence >= 0 && static_cast<size_t>(worst->worst_sequence) < ref.sequences.size()) {
    const RefSequence& sq = ref.sequences[static_cast<size_t>(worst->worst_sequence)];
    ev["sequence"] = {{"index", sq.index}, {"row", sq.row}, {"start", sq.start}, {"length", sq.length}};
    seq = " of intended sequence " + std::to_string(sq.index);
  }
  res.violations.push_back(make_violation(
      "backward.reference", Severity::error,
      std::string(kTensor[worst_i]) + " row " + std::to_string(worst->worst_row) + seq + " head " +
          std::to_string(worst->worst_head) + " differs from the fp64 gradient: relative error " +
          number_text(worst->worst_error) + " > " + number_text(tol) + " (got " + number_text(worst->worst_value) + ", expected " +
          number_text(worst->worst_expected) + " at column " + std::to_string(worst->worst_dim) + "); " +
          std::to_string(failed) + " of " + std::to_string(checked) + " checked gradient (row, head) pairs fail",
      ev));
  s.status = StageStatus::violation;
}

}  // namespace ad::observe
