// The stage driver (driver.hpp): one flow for every engine.
#include "exec/run/driver.hpp"

#include <chrono>
#include <cmath>

#include "exec/reference/misroute.hpp"
#include "exec/reference/reference.hpp"
#include "exec/run/observe.hpp"
#include "util/parallel.hpp"

namespace ad {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

void fill(std::vector<float>& t, uint64_t seed, num::InputTensor which, ElemType e, int threads) {
  const int64_t n = static_cast<int64_t>(t.size());
  const int64_t chunk = 1 << 16;
  parallel_for(threads, (n + chunk - 1) / chunk, 1, [&](int64_t c, int) {
    const int64_t end = std::min(n, (c + 1) * chunk);
    for (int64_t i = c * chunk; i < end; ++i) t[static_cast<size_t>(i)] = num::input_value(seed, which, static_cast<uint64_t>(i), e);
  });
}

// The cos/sin table flash_attn's and FLA's RotaryEmbedding pass (plan/numeric.hpp).
RotaryTable rotary_table(const ExecPlan& plan, int threads) {
  const RotaryPlan& r = plan.rotary;
  RotaryTable t;
  if (r.contract == RotaryContract::hf) return t;  // positions per row, computed in the dtype
  const int64_t half = r.half;
  t.cos.resize(static_cast<size_t>(r.table_rows * half));
  t.sin.resize(t.cos.size());
  parallel_for(threads, r.table_rows, 256, [&](int64_t pos, int) {
    for (int64_t i = 0; i < half; ++i) {
      t.cos[static_cast<size_t>(pos * half + i)] = num::rotary_cos(pos, i, r.dim, r.base, plan.elem);
      t.sin[static_cast<size_t>(pos * half + i)] = num::rotary_sin(pos, i, r.dim, r.base, plan.elem);
    }
  });
  return t;
}

// What only the engine knows, into the stage record (a later observation of the stage wins).
void merge_facts(StageRecord& s, const EngineFacts& facts, StageEngine engine) {
  s.facts.engine.merge(facts);
  if (engine != StageEngine::unspecified) s.engine = engine;
}

// The training step's dO as the attention kernel receives it (packed, total_q x H x D): the
// seeded gradient of the output the caller gets (final frame), gathered through pad_input's
// adjoint (index_first_axis of the gradient by indices_q) on the mask route.
std::vector<float> packed_dout(const ExecPlan& plan, int threads) {
  const int64_t H = plan.num_heads, D = plan.head_dim, row = H * D;
  const int64_t total_q = std::max<int64_t>(plan.attention.total_q, 0);
  std::vector<float> dout(static_cast<size_t>(total_q * row));
  const auto value = [&](int64_t final_row, int64_t e) {
    return num::input_value(plan.seed, num::InputTensor::dout, static_cast<uint64_t>(final_row * row + e), plan.elem);
  };
  parallel_for(threads, total_q, 256, [&](int64_t i, int) {
    int64_t src = i;
    if (plan.pad.enabled) src = static_cast<size_t>(i) < plan.pad.indices.size() ? plan.pad.indices[static_cast<size_t>(i)] : -1;
    const bool inside = src >= 0 && src < std::max<int64_t>(plan.rows_final, 0);
    for (int64_t e = 0; e < row; ++e) dout[static_cast<size_t>(i * row + e)] = inside ? value(src, e) : 0.0f;
  });
  return dout;
}

// The backward of a batch too large to materialise: its dq_accum offsets are integers, so
// every tile is still checked (contract/fa2_backward.hpp); no value is computed.
void offsets_only(StageRecord& s, ExecResult& res, const ExecPlan& plan) {
  const auto t0 = Clock::now();
  observe::backward_launch(s, plan);
  const ref::MisrouteResult mr = ref::backward_misroutes(plan);
  const AccessRecord* none[3] = {nullptr, nullptr, nullptr};
  observe::backward(s, res, plan, none, {}, mr.misroute, mr.rows);
  s.facts.offsets_only = true;
  s.detail = plan.skip_reason + "; the dq_accum offsets of every backward tile were checked without values (" +
             (mr.misroute.rows > 0 ? std::to_string(mr.misroute.rows) + " dq rows misplaced" : std::string("none misplaced")) +
             ")";
  if (s.status != StageStatus::violation) s.status = StageStatus::skipped;
  s.ms = ms_since(t0);
}

// The rotary's adjoint on the kernel's packed dq and dk (rows, heads, D), in place: the same
// call as the forward's rotary, each pair rotated by the opposite angle, as the real stack's
// autograd does before the gradients reach the source tensors. Its accesses are the forward
// call's, already reported by the rotary stage.
void rotary_adjoint(const ExecPlan& plan, AttentionBackwardObservation& ob, int threads) {
  if (!plan.rotary.enabled) return;
  const RotaryTable table = rotary_table(plan, threads);
  host_rotary_adjoint(plan, table, true, ob.dq, std::max<int64_t>(plan.attention.total_q, 0), plan.num_heads, threads);
  host_rotary_adjoint(plan, table, false, ob.dk, std::max<int64_t>(plan.attention.total_k, 0), plan.num_kv_heads, threads);
}

// dq, dk, dv as the caller's autograd returns them to the source tensors (the rotary's
// adjoint, then unpad's: the packed gradient rows scattered into zeros by the gather indices;
// packed routes: the rows themselves), against the fp64 gradients over the intended sequences.
void backward_gradients(StageRecord& s, ExecResult& res, const ExecPlan& plan, const Inputs& in,
                        const AttentionBackwardObservation& ob, int threads) {
  const ReferencePlan& ref = plan.reference;
  if (!ref.enabled) {
    s.detail += std::string(s.detail.empty() ? "" : "; ") + "gradient reference skipped: " + ref.skip_reason;
    return;
  }
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
  const int64_t total_q = std::max<int64_t>(plan.attention.total_q, 0), total_k = std::max<int64_t>(plan.attention.total_k, 0);
  std::vector<float> dq(static_cast<size_t>(plan.rows_q_src * H * D), 0.f);
  std::vector<float> dk(static_cast<size_t>(plan.rows_k_src * Hk * D), 0.f), dv(dk.size(), 0.f);
  std::vector<uint8_t> dq_known(static_cast<size_t>(plan.rows_q_src), 1), dkv_known(static_cast<size_t>(plan.rows_k_src), 1);
  const bool values = plan.attention.sample.empty();
  auto scatter = [&](const GatherPlan& g, int64_t rows, int64_t src_rows, int64_t width, const std::vector<float>* a,
                     const std::vector<float>* b, std::vector<float>& da, std::vector<float>* db, std::vector<uint8_t>& known,
                     const std::vector<uint8_t>* sample) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t src = g.enabled ? (static_cast<size_t>(i) < g.indices.size() ? g.indices[static_cast<size_t>(i)] : -1) : i;
      if (src < 0 || src >= src_rows) continue;
      std::copy_n(a->data() + i * width, width, da.data() + src * width);
      if (db) std::copy_n(b->data() + i * width, width, db->data() + src * width);
      if (sample && !(*sample)[static_cast<size_t>(i)]) known[static_cast<size_t>(src)] = 0;
    }
  };
  if (!ob.dq.empty())
    scatter(plan.unpad.q, total_q, plan.rows_q_src, H * D, &ob.dq, nullptr, dq, nullptr, dq_known,
            values ? nullptr : &plan.attention.sample);
  if (!ob.dk.empty()) scatter(plan.unpad.k, total_k, plan.rows_k_src, Hk * D, &ob.dk, &ob.dv, dk, &dv, dkv_known, nullptr);
  if (!values) std::fill(dkv_known.begin(), dkv_known.end(), 0);
  const ref::GradientInputs gi{in.q_src.data(), in.k_src.data(), in.v_src.data(), dq.data(), dk.data(), dv.data(),
                               &dq_known, &dkv_known};
  ref::GradientResult out[3];
  ref::gradient_reference(plan, gi, out, threads);
  observe::backward_reference(s, res, plan, out);
}

// One run of the stages after the inputs are loaded: what every stage step reads, and what one
// stage hands the next.
struct Run {
  const ExecPlan& plan;
  Engine& engine;
  ExecResult& res;
  observe::Stages& st;
  const Inputs& in;
  int threads = 1;
  int64_t total_q = 0;
  std::vector<uint8_t> written, computed;  // attention -> result: packed rows written, computed
  std::vector<int64_t> source_of;          // pad -> result: the packed row of each final row
};

// unpad: the gathers in _upad_input's order (k, v, then q), or nothing to gather.
void unpad_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  Engine& engine = run.engine;
  ExecResult& res = run.res;
  const auto t0 = Clock::now();
  StageRecord& s = run.st.add(Stage::unpad);
  if (!plan.unpad.q.enabled && !plan.unpad.k.enabled) {
    s.status = StageStatus::skipped;
    s.detail = "nothing to gather on the " + to_string(plan.path) + " path: the kernel receives the packed tensors as given";
  } else {
    AccessRecord first;
    std::string first_tensor;
    int64_t out_of_range = 0;
    auto gather = [&](Operand o, const GatherPlan& g, const char* tensor) {
      const GatherObservation ob = engine.gather(plan, o);
      out_of_range += static_cast<int64_t>(ob.out_of_range.count);
      if (ob.out_of_range.has_first() && !first.has_first()) {
        first = ob.out_of_range;
        first_tensor = tensor;
      }
      (o == Operand::q ? s.facts.rows_q : o == Operand::k ? s.facts.rows_k : s.facts.rows_v) = g.dst_rows;
      merge_facts(s, ob.facts, ob.engine);
    };
    if (plan.unpad.k.enabled) {
      gather(Operand::k, plan.unpad.k, "k");
      gather(Operand::v, plan.unpad.k, "v");
    }
    if (plan.unpad.q.enabled) gather(Operand::q, plan.unpad.q, "q");
    observe::unpad_gather(s, res, first, first_tensor, out_of_range);
  }
  s.ms = ms_since(t0);
}

// rotary: the rotary call on the packed q, then k; false when the host raises (the run ends).
bool rotary_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  observe::Stages& st = run.st;
  const int64_t total_q = run.total_q;
  const auto t0 = Clock::now();
  StageRecord& s = st.add(Stage::rotary);
  const RotaryPlan& r = plan.rotary;
  if (!r.enabled) {
    s.status = StageStatus::skipped;
    s.detail = "no rotary embedding in this batch";
  } else if (r.raises) {
    s.ms = ms_since(t0);
    observe::host_raise(st, s, *r.raises, "rotary", total_q);
    return false;
  } else {
    const RotaryObservation ob = run.engine.rotary(plan, rotary_table(plan, run.threads));
    s.facts.contract = to_string(r.contract);
    s.facts.dim = r.dim;
    s.facts.varlen = r.varlen;
    s.facts.table_rows = r.table_rows;
    merge_facts(s, ob.facts, ob.engine);
    const int64_t unrotated = ob.q.past_table + ob.k.past_table, unvisited = ob.q.not_visited + ob.k.not_visited;
    s.facts.rotated = ob.q.rotated + ob.k.rotated;
    s.facts.past_table = unrotated;
    s.facts.rows_not_visited = unvisited;
    if (!r.note.empty()) s.detail = r.note;
    if (unrotated > 0 || unvisited > 0) {
      std::string d;
      if (unrotated > 0)
        d += std::to_string(unrotated) + " (row, head) pairs at positions past the " + std::to_string(r.table_rows) +
             "-row table left " + (r.contract == RotaryContract::fla ? "unwritten" : "unrotated");
      if (unvisited > 0)
        d += std::string(d.empty() ? "" : "; ") + std::to_string(unvisited) + " rows past max_seqlen's programs never rotated";
      s.detail = s.detail.empty() ? d : s.detail + "; " + d;
    }
    observe::rotary_access(s, run.res, r, plan.head_dim, {ob.q.outside_tensor, ob.q.table, ob.q.outside_head},
                           {ob.k.outside_tensor, ob.k.table, ob.k.outside_head});
  }
  s.ms = ms_since(t0);
  return true;
}

// attention: the varlen forward, or the host's zero fill; false when the host raises.
bool attention_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  const AttentionPlan& at = plan.attention;
  observe::Stages& st = run.st;
  const int64_t total_q = run.total_q;
  std::vector<uint8_t>& written = run.written;
  std::vector<uint8_t>& computed = run.computed;
  const auto t0 = Clock::now();
  StageRecord& s = st.add(Stage::attention);
  observe::attention_launch(s, plan);
  if (at.raises) {
    s.ms = ms_since(t0);
    observe::host_raise(st, s, *at.raises, "attention", total_q);
    return false;
  }
  AttentionObservation ob = run.engine.attention(plan);
  merge_facts(s, ob.facts, ob.engine);
  computed = std::move(ob.computed);
  written.resize(ob.writes.size());
  for (size_t i = 0; i < written.size(); ++i) written[i] = ob.writes[i] > 0;
  if (at.zero_fill) {
    s.detail = "max_seqlen_k <= 0: the host zero-fills the output and sets the LSE to +inf (no launch)";
  } else {
    // the CTAs wholly past q/out: counted on the host, for every engine (plan/clip.cpp)
    ob.access.merge(at.past_rows.access);
    const observe::Coverage coverage = observe::coverage_of(ob.writes, at);
    int64_t rows_computed = 0;
    for (uint8_t c : computed) rows_computed += c;
    s.facts.rows_written = coverage.rows_written;
    s.facts.rows_computed = rows_computed;
    if (at.past_rows.tiles > 0) s.facts.ctas_past_rows = at.past_rows.tiles;
    s.detail = ob.detail;
    if (coverage.rows_past_seqused_q > 0)
      s.detail += std::string(s.detail.empty() ? "" : "; ") + std::to_string(coverage.rows_past_seqused_q) +
                  " rows past seqused_q are not computed (FA3 / FA4 leave them as torch.empty allocated them)";
    observe::attention(s, run.res, ob.access, coverage, total_q);
  }
  s.ms = ms_since(t0);
  return true;
}

// pad: pad_input's scatter into the caller's frame, or nothing on a packed path.
void pad_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  const auto t0 = Clock::now();
  StageRecord& s = run.st.add(Stage::pad);
  if (!plan.pad.enabled) {
    s.status = StageStatus::skipped;
    s.detail = "no scatter on the " + to_string(plan.path) + " path: the caller receives the packed output";
  } else {
    ScatterObservation ob = run.engine.scatter(plan);
    run.source_of = std::move(ob.source_of);
    merge_facts(s, ob.facts, ob.engine);
    s.facts.rows_written = ob.rows_written;
    observe::pad_scatter(s, run.res, ob.out_of_range);
  }
  s.ms = ms_since(t0);
}

// result (on the host, against fp64 attention over the intended sequences).
void result_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  const Inputs& in = run.in;
  const auto t0 = Clock::now();
  StageRecord& s = run.st.add(Stage::result);
  const Output out = run.engine.output(plan);
  observe::ResultInputs ri;
  ri.out_final = out.out_final;
  ri.source_of = &run.source_of;
  ri.written = &run.written;
  ri.computed = &run.computed;
  ri.lse = out.lse;
  ri.q_src = in.q_src.data();
  ri.k_src = in.k_src.data();
  ri.qv_src = in.qv_src.empty() ? nullptr : in.qv_src.data();
  ri.v_src = in.v_src.data();
  ri.total_q = run.total_q;
  ri.threads = run.threads;
  ri.output_name = run.engine.output_name();
  observe::result(s, run.res, plan, ri);
  s.ms = ms_since(t0);
}

// attention_backward (training): the seeded dO through pad's adjoint, the backward, the
// dq_accum offsets, the rotary's adjoint and the gradient reference.
void backward_stage(Run& run) {
  const ExecPlan& plan = run.plan;
  ExecResult& res = run.res;
  const int threads = run.threads;
  const auto t0 = Clock::now();
  StageRecord& s = run.st.add(Stage::attention_backward);
  const BackwardPlan& bw = plan.backward;
  if (!bw.skip_reason.empty()) {
    s.status = StageStatus::skipped;
    s.detail = bw.skip_reason;
  } else {
    observe::backward_launch(s, plan);
    const std::vector<float> dout = packed_dout(plan, threads);
    const auto tb = Clock::now();
    AttentionBackwardObservation ob = run.engine.attention_backward(plan, dout);
    s.facts.ms_kernels = ms_since(tb);
    merge_facts(s, ob.facts, ob.engine);
    if (!ob.ran) {
      s.status = StageStatus::skipped;
      s.detail = "not run: " + ob.not_run;
    } else {
      if (ob.dq_misrouted.empty()) {  // an engine that leaves the offsets to the host
        ref::MisrouteResult mr = ref::backward_misroutes(plan);
        ob.dq_misrouted = std::move(mr.rows);
        ob.misroute = mr.misroute;
      }
      s.detail = ob.detail;
      const AccessRecord* launches[3] = {&ob.dot_do_o, &ob.dq_dk_dv, &ob.convert_dq};
      observe::backward(s, res, plan, launches, observe::backward_coverage(ob.dq_writes, ob.dkv_writes), ob.misroute,
                        ob.dq_misrouted);
      rotary_adjoint(plan, ob, threads);
      backward_gradients(s, res, plan, run.in, ob, threads);
    }
  }
  s.ms = ms_since(t0);
}

}  // namespace

Inputs seeded_inputs(const ExecPlan& plan, int threads) {
  Inputs in;
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
  in.q_src.resize(static_cast<size_t>(plan.rows_q_src * H * D));
  in.k_src.resize(static_cast<size_t>(plan.rows_k_src * Hk * D));
  in.v_src.resize(in.k_src.size());
  fill(in.q_src, plan.seed, num::InputTensor::q, plan.elem, threads);
  fill(in.k_src, plan.seed, num::InputTensor::k, plan.elem, threads);
  fill(in.v_src, plan.seed, num::InputTensor::v, plan.elem, threads);
  if (plan.attention.qv) {
    in.qv_src.resize(in.q_src.size());
    fill(in.qv_src, plan.seed, num::InputTensor::qv, plan.elem, threads);
  }
  return in;
}

ExecResult drive(const ExecPlan& plan, Engine& engine, const DriveOptions& options) {
  ExecResult res;
  res.backend = engine.name();
  if (!plan.skip_reason.empty()) {
    res.stages = skipped_stages(plan.skip_reason, plan.backward.enabled);
    if (plan.backward.enabled && plan.backward.skip_reason.empty() && !plan.attention.cu_seqlens_q.empty())
      offsets_only(res.stages.back(), res, plan);
    return res;
  }
  res.stages.reserve(std::size(kDynamicStages));  // the StageRecord references below stay valid
  observe::Stages st{res, stage_count(plan.backward.enabled)};
  const int threads = std::max(1, plan.threads);
  auto stop_after = [&](Stage s) { return options.stop_after && *options.stop_after == s; };

  const Inputs in = seeded_inputs(plan, threads);
  engine.load(plan, in);
  Run run{plan, engine, res, st, in, threads, std::max<int64_t>(plan.attention.total_q, 0)};

  unpad_stage(run);
  if (stop_after(Stage::unpad)) return res;
  if (plan.conversion_failure) {
    observe::conversion_raise(st, *plan.conversion_failure, run.total_q);
    return res;
  }
  if (!rotary_stage(run) || stop_after(Stage::rotary)) return res;
  if (!attention_stage(run) || stop_after(Stage::attention)) return res;
  pad_stage(run);
  if (stop_after(Stage::pad)) return res;
  result_stage(run);
  if (stop_after(Stage::result) || !plan.backward.enabled) return res;
  backward_stage(run);
  return res;
}

}  // namespace ad
