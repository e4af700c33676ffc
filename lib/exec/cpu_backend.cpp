// The CPU backend: runs an ExecPlan stage by stage (unpad, rotary, attention, pad, result)
// with the checked CPU twins of the kernels, and turns what they observed into stage
// records and dynamic violations (ids 33-39). Inputs are seeded random values in the
// batch's dtype; every output is poisoned (NaN) before the stage that writes it.
#include <chrono>
#include <cmath>
#include <limits>

#include "check/check.hpp"
#include "exec/cpu_kernels.hpp"
#include "exec/plan.hpp"

namespace ad {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

std::string num_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
nlohmann::json num_json(double v) {
  if (std::isfinite(v)) return v;
  return num_text(v);
}

std::string raise_text(const HostRaise& r) { return r.where + " raises " + r.type + ": " + r.message; }
nlohmann::json raise_json(const HostRaise& r) { return {{"where", r.where}, {"type", r.type}, {"message", r.message}}; }

nlohmann::json access_json(const AccessRecord& a) {
  nlohmann::json j = {{"kind", to_string(a.kind)}, {"buffer", to_string(a.buffer)}, {"index", a.index},
                      {"bound", a.bound}, {"unit", a.unit_rows ? "rows" : "elements"}, {"count", a.count}};
  if (a.row >= 0) j["row"] = a.row;
  if (a.segment >= 0) j["segment"] = a.segment;
  if (a.head >= 0) j["head"] = a.head;
  if (a.block[0] >= 0 || a.block[1] >= 0 || a.block[2] >= 0) j["block"] = a.block;
  return j;
}

struct Stages {
  ExecResult& res;
  const ExecPlan& plan;
  StageRecord& add(const char* name) {
    res.stages.push_back(StageRecord{name, "ok", 0.0, "", nlohmann::json::object()});
    return res.stages.back();
  }
  void not_reached(size_t from, const std::string& why) {
    for (size_t i = from; i < std::size(kDynamicStages); ++i)
      res.stages.push_back(StageRecord{kDynamicStages[i], "skipped", 0.0, "not reached: " + why, nlohmann::json::object()});
  }
};

// Seeded inputs, in parallel, from the counter-based generator shared with the CUDA twin.
void fill_inputs(std::vector<float>& t, uint64_t seed, num::InputTensor which, num::Precision p, int threads) {
  const int64_t n = static_cast<int64_t>(t.size());
  const int64_t chunk = 1 << 16;
  cpu::parallel_for(threads, (n + chunk - 1) / chunk, 1, [&](int64_t c, int) {
    const int64_t e = std::min(n, (c + 1) * chunk);
    for (int64_t i = c * chunk; i < e; ++i) t[static_cast<size_t>(i)] = num::input_value(seed, which, static_cast<uint64_t>(i), p);
  });
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  ExecResult run(const ExecPlan& plan, const ExecOptions& options) override;
};

ExecResult CpuBackend::run(const ExecPlan& plan, const ExecOptions& options) {
  (void)options;
  ExecResult res;
  res.backend = "cpu";
  if (!plan.skip_reason.empty()) {
    res.stages = skipped_stages(plan.skip_reason);
    return res;
  }
  Stages st{res, plan};
  const int threads = std::max(1, plan.threads);
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
  const AttentionPlan& at = plan.attention;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);

  std::vector<float> q_src(static_cast<size_t>(plan.rows_q_src * H * D));
  std::vector<float> k_src(static_cast<size_t>(plan.rows_k_src * Hk * D)), v_src(k_src.size());
  fill_inputs(q_src, plan.seed, num::InputTensor::q, plan.precision, threads);
  fill_inputs(k_src, plan.seed, num::InputTensor::k, plan.precision, threads);
  fill_inputs(v_src, plan.seed, num::InputTensor::v, plan.precision, threads);

  // ---- unpad ------------------------------------------------------------------------
  std::vector<float> q_pk, k_pk, v_pk;
  const float* q = q_src.data();
  const float* k = k_src.data();
  const float* v = v_src.data();
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("unpad");
    if (!plan.unpad.q.enabled && !plan.unpad.k.enabled) {
      s.status = "skipped";
      s.detail = "nothing to gather on the " + plan.path + " path: the kernel receives the packed tensors as given";
    } else {
      // _upad_input's order: keys, values, then queries
      AccessRecord first;
      std::string first_tensor;
      int64_t oob_total = 0;
      auto gather = [&](const GatherPlan& g, const float* src, std::vector<float>& dst, int64_t heads, ExecBuffer b,
                        const char* tensor) {
        dst.assign(static_cast<size_t>(g.dst_rows * heads * D), kPoison);
        cpu::GatherResult r = cpu::gather_rows(g, src, dst.data(), heads * D, b, threads);
        oob_total += r.oob.count;
        if (r.oob.has_first && !first.has_first) {
          first = r.oob;
          first_tensor = tensor;
        }
        s.data[std::string("rows_") + tensor] = g.dst_rows;
        return r;
      };
      if (plan.unpad.k.enabled) {
        gather(plan.unpad.k, k_src.data(), k_pk, Hk, ExecBuffer::k_src, "k");
        gather(plan.unpad.k, v_src.data(), v_pk, Hk, ExecBuffer::v_src, "v");
        k = k_pk.data();
        v = v_pk.data();
      }
      if (plan.unpad.q.enabled) {
        gather(plan.unpad.q, q_src.data(), q_pk, H, ExecBuffer::q_src, "q");
        q = q_pk.data();
      }
      s.data["out_of_bounds"] = oob_total;
      if (first.has_first) {
        s.status = "violation";
        const bool key = first_tensor != "q";
        const std::string which = key ? "key" : "query";
        const std::string idx_name = key ? "indices_k" : "indices_q";
        const int64_t per_gather = first.count;
        s.detail = std::to_string(oob_total) + " gather indices out of range";
        res.violations.push_back(make_violation(
            "unpad.gather", Severity::error,
            "index " + std::to_string(first.index) + " >= " + std::to_string(first.bound) + " in the " + which + " gather (" +
                idx_name + "[" + std::to_string(first.row) + "] reads row " + std::to_string(first.index) + " of the " +
                std::to_string(first.bound) + "-row " + (key ? "(B*Lk)" : "(B*Lq)") + " view); " +
                std::to_string(per_gather) + (per_gather == 1 ? " index" : " indices") + " out of range, not gathered",
            {{"tensor", first_tensor}, {"indices", idx_name}, {"position", first.row}, {"index", first.index},
             {"bound", first.bound}, {"count", per_gather}, {"count_all_gathers", oob_total}}));
      }
    }
    s.ms = ms_since(t0);
  }
  if (plan.conversion_failure) {
    st.not_reached(1, raise_text(*plan.conversion_failure));
    if (res.violations.empty()) res.violations.push_back(raised_violation(*plan.conversion_failure, total_q));
    return res;
  }

  // ---- rotary -----------------------------------------------------------------------
  std::vector<float> q_rot, k_rot;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("rotary");
    const RotaryPlan& r = plan.rotary;
    if (!r.enabled) {
      s.status = "skipped";
      s.detail = "no rotary embedding in this batch";
    } else if (r.raises) {
      s.status = "violation";
      s.detail = raise_text(*r.raises) + " (host check, before any launch)";
      s.data["raises"] = raise_json(*r.raises);
      s.ms = ms_since(t0);
      st.not_reached(2, "the rotary call raises");
      res.violations.push_back(raised_violation(*r.raises, total_q));
      return res;
    } else {
      const int64_t half = r.half;
      std::vector<float> cos_t, sin_t;
      if (r.contract != RotaryContract::hf) {
        cos_t.resize(static_cast<size_t>(r.table_rows * half));
        sin_t.resize(cos_t.size());
        cpu::parallel_for(threads, r.table_rows, 256, [&](int64_t pos, int) {
          for (int64_t i = 0; i < half; ++i) {
            cos_t[static_cast<size_t>(pos * half + i)] = num::rotary_cos(pos, i, r.dim, r.base, plan.precision);
            sin_t[static_cast<size_t>(pos * half + i)] = num::rotary_sin(pos, i, r.dim, r.base, plan.precision);
          }
        });
      }
      // output: in place (flash_attn layer), or a new tensor whose rotary columns are
      // uninitialised and whose other columns are copied (fla)
      auto prepare = [&](const float* x, int64_t rows, int64_t heads, std::vector<float>& y) {
        y.assign(x, x + rows * heads * D);
        if (r.contract == RotaryContract::fla) {
          const int64_t cols = std::min<int64_t>(2 * half, D);
          for (int64_t i = 0; i < rows * heads; ++i) std::fill_n(y.data() + i * D, cols, kPoison);
        }
      };
      prepare(q, total_q, H, q_rot);
      prepare(k, total_k, Hk, k_rot);
      cpu::RotaryResult rq = cpu::rotary_apply(plan, true, q, q_rot.data(), total_q, H, cos_t.data(), sin_t.data(), threads);
      cpu::RotaryResult rk = cpu::rotary_apply(plan, false, k, k_rot.data(), total_k, Hk, cos_t.data(), sin_t.data(), threads);
      q = q_rot.data();
      k = k_rot.data();
      s.data = {{"contract", to_string(r.contract)},
                {"dim", r.dim},
                {"varlen", r.varlen},
                {"table_rows", r.table_rows},
                {"rotated", rq.rows_rotated + rk.rows_rotated},
                {"past_table", rq.rows_past_table + rk.rows_past_table},
                {"rows_not_visited", rq.rows_not_visited + rk.rows_not_visited}};
      if (!r.note.empty()) s.detail = r.note;
      const int64_t unrot = rq.rows_past_table + rk.rows_past_table;
      const int64_t unvisited = rq.rows_not_visited + rk.rows_not_visited;
      if (unrot > 0 || unvisited > 0) {
        std::string d;
        if (unrot > 0) d += std::to_string(unrot) + " (row, head) pairs at positions past the " + std::to_string(r.table_rows) +
                            "-row table left " + (r.contract == RotaryContract::fla ? "unwritten" : "unrotated");
        if (unvisited > 0) d += std::string(d.empty() ? "" : "; ") + std::to_string(unvisited) + " rows past max_seqlen's programs never rotated";
        s.detail = s.detail.empty() ? d : s.detail + "; " + d;
      }
      // one violation per call that went wrong (q first: it is launched first)
      bool any = false;
      for (int call = 0; call < 2; ++call) {
        const cpu::RotaryResult& rr = call == 0 ? rq : rk;
        const char* tensor = call == 0 ? "q" : "k";
        const AccessRecord* first = rr.outside_tensor.has_first ? &rr.outside_tensor
                                    : rr.table.has_first        ? &rr.table
                                    : rr.outside_head.has_first ? &rr.outside_head
                                                                : nullptr;
        if (!first || any) continue;
        any = true;
        std::string msg = to_string(r.contract) + " rotary (dim " + std::to_string(r.dim) + ", head_dim " + std::to_string(D) + ") ";
        if (first == &rr.outside_tensor)
          msg += std::string(to_string(first->kind)) + "s past the end of " + tensor + ": element " + std::to_string(first->index) +
                 " >= " + std::to_string(first->bound) + " (row " + std::to_string(first->row) + ", head " +
                 std::to_string(first->head) + "); " + std::to_string(rr.outside_tensor.count) +
                 " accesses outside the tensor (not performed)";
        else if (first == &rr.table)
          msg += "reads the cos/sin table at a negative position (element " + std::to_string(first->index) + ", row " +
                 std::to_string(first->row) + ")";
        else
          msg += std::string(to_string(first->kind)) + "s outside its head: head " + std::to_string(first->head) + " of " +
                 tensor + " row " + std::to_string(first->row) + " touches element " + std::to_string(first->index) +
                 " of the next heads";
        if (rr.outside_head.count > 0 && first != &rr.outside_head)
          msg += "; " + std::to_string(rr.outside_head.count) + " accesses inside the tensor but outside their head";
        else if (rr.outside_head.count > 0)
          msg += "; " + std::to_string(rr.outside_head.count) + " such accesses (silent corruption of the neighbouring heads)";
        nlohmann::json ev = access_json(*first);
        ev["tensor"] = tensor;
        ev["outside_tensor"] = rr.outside_tensor.count;
        ev["outside_head"] = rr.outside_head.count;
        ev["table"] = rr.table.count;
        res.violations.push_back(make_violation("rotary.access", Severity::error, msg, ev));
      }
      if (any) s.status = "violation";
    }
    s.ms = ms_since(t0);
  }

  // ---- attention --------------------------------------------------------------------
  std::vector<float> out, lse;
  cpu::AttentionResult ar;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("attention");
    s.data["function"] = plan.function;
    s.data["grid"] = {at.grid_m, at.grid_b, at.grid_h};
    s.data["block_m"] = at.flags.block_m;
    s.data["block_n"] = at.flags.block_n;
    s.data["causal"] = at.flags.causal;
    s.data["local"] = at.flags.local;
    if (at.flags.local) s.data["window_size"] = {at.flags.window_left, at.flags.window_right};
    if (at.softcap > 0) s.data["softcap"] = at.softcap;
    if (at.swapped) s.data["seqlenq_ngroups_swapped"] = true;
    if (at.raises) {
      s.status = "violation";
      s.detail = raise_text(*at.raises) + " (host check, before any launch)";
      s.data["raises"] = raise_json(*at.raises);
      s.ms = ms_since(t0);
      st.not_reached(3, "the attention call raises");
      res.violations.push_back(raised_violation(*at.raises, total_q));
      return res;
    }
    out.assign(static_cast<size_t>(total_q * H * D), kPoison);
    lse.assign(static_cast<size_t>(std::max<int64_t>(at.lse_elements, 0)), kPoison);
    if (at.zero_fill) {
      std::fill(out.begin(), out.end(), 0.f);
      std::fill(lse.begin(), lse.end(), std::numeric_limits<float>::infinity());
      ar.written.assign(static_cast<size_t>(total_q), 1);
      ar.computed.assign(static_cast<size_t>(total_q), 1);
      s.detail = "max_seqlen_k <= 0: the host zero-fills the output and sets the LSE to +inf (no launch)";
    } else {
      ar = cpu::fa2_varlen_forward(plan, q, k, v, out.data(), lse.data(), threads);
      s.data["tiles"] = ar.tiles;
      s.data["rows_written"] = ar.rows_written;
      s.data["rows_computed"] = ar.rows_computed;
      s.data["macs"] = ar.macs;
      s.data["empty_tiles"] = ar.empty_tiles;
      s.data["row_heads_without_keys"] = ar.rows_no_keys;
      if (!at.sample.empty()) {
        s.data["sampled"] = true;
        s.detail = "computed a sample of " + std::to_string(ar.rows_computed) + " of " + std::to_string(ar.rows_written) +
                   " written rows (budget)";
      }
      if (ar.access.has_first) {
        const AccessRecord& a = ar.access;
        std::string what = a.buffer == ExecBuffer::lse ? "softmax_lse element" : to_string(a.buffer) + " row";
        std::string msg = "segment " + std::to_string(a.segment) + ", CTA (m=" + std::to_string(a.block[0]) + ", b=" +
                          std::to_string(a.block[1]) + ", h=" + std::to_string(a.block[2]) + ") " +
                          (a.kind == AccessKind::read ? "reads " : "writes ") + what + " " + std::to_string(a.index) +
                          (a.index < 0 ? " < 0" : " >= " + std::to_string(a.bound)) + "; " + std::to_string(a.count) +
                          " out-of-bounds row accesses in all (not performed)";
        res.violations.push_back(make_violation("attention.access", Severity::error, msg, access_json(a)));
      }
      if (ar.rows_never > 0 || ar.rows_twice > 0 || ar.rows_foreign > 0) {
        std::vector<std::string> parts;
        nlohmann::json ev = nlohmann::json::object();
        if (ar.rows_never > 0) {
          parts.push_back(std::to_string(ar.rows_never) + " of " + std::to_string(total_q) +
                          " output rows never written (first: row " + std::to_string(ar.first_never) + ")");
          ev["never_written"] = ar.rows_never;
          ev["first_never_written"] = ar.first_never;
        }
        if (ar.rows_twice > 0) {
          parts.push_back(std::to_string(ar.rows_twice) + " rows written by more than one segment (first: row " +
                          std::to_string(ar.first_twice) + ", " + std::to_string(ar.first_twice_count) + " writers)");
          ev["written_twice"] = ar.rows_twice;
          ev["first_written_twice"] = ar.first_twice;
        }
        if (ar.rows_foreign > 0) {
          parts.push_back(std::to_string(ar.rows_foreign) + " rows written for a segment that does not contain them (first: row " +
                          std::to_string(ar.first_foreign) + ", written as sequence " + std::to_string(ar.first_foreign_segment) +
                          " by the max_seqlen_q == 1 swapped path)");
          ev["outside_segment"] = ar.rows_foreign;
          ev["first_outside_segment"] = ar.first_foreign;
          ev["writer_segment"] = ar.first_foreign_segment;
        }
        ev["rows"] = total_q;
        std::string msg;
        for (size_t i = 0; i < parts.size(); ++i) msg += (i ? "; " : "") + parts[i];
        res.violations.push_back(make_violation("attention.coverage", Severity::error, msg, ev));
      }
      if (ar.access.has_first || ar.rows_never > 0 || ar.rows_twice > 0 || ar.rows_foreign > 0) s.status = "violation";
    }
    s.ms = ms_since(t0);
  }

  // ---- pad --------------------------------------------------------------------------
  std::vector<float> out_final_buf;
  const float* out_final = out.data();
  std::vector<int64_t> source_of;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("pad");
    if (!plan.pad.enabled) {
      s.status = "skipped";
      s.detail = "no scatter on the " + plan.path + " path: the caller receives the packed output";
    } else {
      out_final_buf.resize(static_cast<size_t>(plan.rows_final * H * D));
      cpu::ScatterResult sr = cpu::scatter_rows(plan.pad, out.data(), total_q, out_final_buf.data(), H * D);
      out_final = out_final_buf.data();
      source_of = std::move(sr.source_of);
      s.data["rows_written"] = sr.rows_written;
      if (sr.oob.has_first) {
        s.status = "violation";
        res.violations.push_back(make_violation(
            "pad.scatter", Severity::error,
            "index " + std::to_string(sr.oob.index) + (sr.oob.index < 0 ? " < 0" : " >= " + std::to_string(sr.oob.bound)) +
                " in pad_input's scatter (indices_q[" + std::to_string(sr.oob.row) + "]); " + std::to_string(sr.oob.count) +
                " rows not scattered",
            {{"position", sr.oob.row}, {"index", sr.oob.index}, {"bound", sr.oob.bound}, {"count", sr.oob.count}}));
      }
    }
    s.ms = ms_since(t0);
  }

  // ---- result -----------------------------------------------------------------------
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("result");
    const int64_t rows_final = plan.rows_final;
    // a final row can be checked when its value is known: computed, zero (not scattered),
    // or never written at all (poison: exactly what the user would get)
    auto packed_checkable = [&](int64_t p) {
      if (p < 0 || p >= total_q) return true;
      return ar.computed[static_cast<size_t>(p)] != 0 || ar.written[static_cast<size_t>(p)] == 0;
    };
    std::vector<uint8_t> checkable(static_cast<size_t>(std::max<int64_t>(rows_final, 0)), 1);
    for (int64_t r = 0; r < rows_final; ++r)
      checkable[static_cast<size_t>(r)] = plan.pad.enabled ? packed_checkable(source_of[static_cast<size_t>(r)]) : packed_checkable(r);
    // result.finite: outputs, then the LSE of the rows computed
    int64_t nonfinite = 0, first_row = -1, first_head = -1, first_dim = -1;
    float first_val = 0;
    for (int64_t r = 0; r < rows_final; ++r) {
      if (!checkable[static_cast<size_t>(r)]) continue;
      const float* row = out_final + r * H * D;
      for (int64_t i = 0; i < H * D; ++i)
        if (!std::isfinite(row[i])) {
          if (nonfinite++ == 0) {
            first_row = r;
            first_head = i / D;
            first_dim = i % D;
            first_val = row[i];
          }
        }
    }
    int64_t lse_bad = 0, lse_first = -1;
    if (!at.zero_fill && at.unpadded_lse) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < total_q; ++r) {
          if (!ar.computed[static_cast<size_t>(r)]) continue;
          const float x = lse[static_cast<size_t>(h * total_q + r)];
          if (std::isnan(x) || x == -std::numeric_limits<float>::infinity())
            if (lse_bad++ == 0) lse_first = h * total_q + r;
        }
    }
    if (nonfinite > 0 || lse_bad > 0) {
      std::string msg;
      nlohmann::json ev;
      if (nonfinite > 0) {
        const int64_t src = plan.pad.enabled ? source_of[static_cast<size_t>(first_row)] : first_row;
        const bool never = src >= 0 && src < total_q && !ar.written[static_cast<size_t>(src)];
        msg = "output row " + std::to_string(first_row) + " head " + std::to_string(first_head) + " column " +
              std::to_string(first_dim) + " is " + num_text(first_val) +
              (never ? " (the attention kernel never wrote this row)" : "") + "; " + std::to_string(nonfinite) +
              " non-finite output elements";
        ev = {{"row", first_row}, {"head", first_head}, {"dim", first_dim}, {"value", num_text(first_val)},
              {"count", nonfinite}, {"never_written", never}};
      } else {
        msg = "softmax_lse element " + std::to_string(lse_first) + " is " + num_text(lse[static_cast<size_t>(lse_first)]);
        ev = {{"lse_index", lse_first}};
      }
      if (lse_bad > 0) ev["lse_non_finite"] = lse_bad;
      res.violations.push_back(make_violation("result.finite", Severity::error, msg, ev));
      s.status = "violation";
    }
    // result.reference
    const ReferencePlan& ref = plan.reference;
    if (!ref.enabled) {
      s.detail = "reference skipped: " + ref.skip_reason;
      s.data["reference"] = false;
    } else {
      cpu::ReferenceResult rr = cpu::reference_compare(plan, q_src.data(), k_src.data(), v_src.data(), out_final, checkable, threads);
      s.data["rows_total"] = ref.rows_total;
      s.data["rows_checked"] = rr.rows_checked;
      s.data["rows_failed"] = rr.rows_failed;
      s.data["tolerance"] = ref.tolerance;
      s.data["worst_error"] = num_json(rr.worst_error);
      s.data["macs"] = rr.macs;
      if (!ref.sample.empty()) s.data["sampled"] = true;
      s.detail = "checked " + std::to_string(rr.rows_checked) + " of " + std::to_string(ref.rows_total) +
                 " intended query rows against fp64 attention over the intended sequences (worst relative error " +
                 num_text(rr.worst_error) + ", tolerance " + num_text(ref.tolerance) + ")";
      if (rr.rows_failed > 0 && rr.worst_sequence >= 0) {
        const RefSequence& sq = ref.sequences[static_cast<size_t>(rr.worst_sequence)];
        std::string where = "output row " + std::to_string(rr.worst_row);
        if (plan.path != "explicit" && plan.query_length > 0)
          where += " (batch row " + std::to_string(rr.worst_row / plan.query_length) + ", position " +
                   std::to_string(rr.worst_row % plan.query_length) + ")";
        nlohmann::json ev = {{"row", rr.worst_row},
                             {"head", rr.worst_head},
                             {"dim", rr.worst_dim},
                             {"got", num_json(rr.worst_value)},
                             {"expected", rr.worst_expected},
                             {"error", num_json(rr.worst_error)},
                             {"tolerance", ref.tolerance},
                             {"sequence", {{"index", sq.index}, {"row", sq.row}, {"start", sq.start}, {"length", sq.length}}},
                             {"rows_checked", rr.rows_checked},
                             {"rows_failed", rr.rows_failed}};
        const std::string msg = where + " head " + std::to_string(rr.worst_head) +
                                " differs from attention over intended sequence " + std::to_string(sq.index) + " (row " +
                                std::to_string(sq.row) + ", start " + std::to_string(sq.start) + ", length " +
                                std::to_string(sq.length) + "): relative error " + num_text(rr.worst_error) + " > " +
                                num_text(ref.tolerance) + " (got " + num_text(rr.worst_value) + ", expected " +
                                num_text(rr.worst_expected) + " at column " + std::to_string(rr.worst_dim) + "); " +
                                std::to_string(rr.rows_failed) + " of " + std::to_string(rr.rows_checked) +
                                " checked rows fail";
        res.violations.push_back(make_violation("result.reference", Severity::error, msg, ev));
        s.status = "violation";
      }
    }
    s.ms = ms_since(t0);
  }
  return res;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ad
