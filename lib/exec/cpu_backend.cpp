// The CPU backend: runs an ExecPlan stage by stage (unpad, rotary, attention, pad, result)
// with the checked CPU twins of the kernels, and turns what they observed into stage
// records and dynamic violations (ids 33-39). Inputs are seeded random values in the
// batch's dtype; every output is poisoned (NaN) before the stage that writes it.
#include <chrono>
#include <cmath>
#include <limits>

#include "check/check.hpp"
#include "exec/cpu_kernels.hpp"
#include "exec/observe.hpp"
#include "exec/plan.hpp"

namespace ad {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

using observe::num_json;
using observe::num_text;
using observe::Stages;

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
  Stages st{res};
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
      observe::unpad_gather(s, res, first, first_tensor, oob_total);
    }
    s.ms = ms_since(t0);
  }
  if (plan.conversion_failure) {
    observe::conversion_raise(st, *plan.conversion_failure, total_q);
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
      s.ms = ms_since(t0);
      observe::host_raise(st, s, 2, *r.raises, "rotary", total_q);
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
      observe::rotary_access(s, res, r, D, {rq.outside_tensor, rq.table, rq.outside_head},
                             {rk.outside_tensor, rk.table, rk.outside_head});
    }
    s.ms = ms_since(t0);
  }

  // ---- attention --------------------------------------------------------------------
  std::vector<float> out, lse;
  cpu::AttentionResult ar;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("attention");
    observe::attention_launch(s, plan);
    if (at.raises) {
      s.ms = ms_since(t0);
      observe::host_raise(st, s, 3, *at.raises, "attention", total_q);
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
      observe::attention(s, res, ar.access,
                         {ar.rows_never, ar.first_never, ar.rows_twice, ar.first_twice, ar.first_twice_count,
                          ar.rows_foreign, ar.first_foreign, ar.first_foreign_segment},
                         total_q);
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
      observe::pad_scatter(s, res, sr.oob);
    }
    s.ms = ms_since(t0);
  }

  // ---- result -----------------------------------------------------------------------
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("result");
    observe::ResultInputs in;
    in.out_final = out_final;
    in.source_of = &source_of;
    in.written = &ar.written;
    in.computed = &ar.computed;
    in.lse = &lse;
    in.q_src = q_src.data();
    in.k_src = k_src.data();
    in.v_src = v_src.data();
    in.total_q = total_q;
    in.threads = threads;
    observe::result(s, res, plan, in);
    s.ms = ms_since(t0);
  }
  return res;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ad
