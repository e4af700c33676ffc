// The CPU engine: the checked CPU twins of the kernels (cpu_kernels.hpp) behind the engine
// interface, run by the stage driver. Tensors are fp32 arrays holding values of the batch's
// dtype; every output is poisoned (NaN) before the stage that writes it.
#include <limits>

#include "exec/cpu/cpu_kernels.hpp"
#include "exec/run/driver.hpp"
#include "exec/engine.hpp"

namespace ad {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

class CpuEngine final : public Engine {
 public:
  explicit CpuEngine(int threads) : threads_(std::max(1, threads)) {}
  const char* name() const override { return "cpu"; }
  std::string output_name() const override { return "output"; }

  void load(const ExecPlan&, const Inputs& in) override {
    q_ = in.q_src.data();
    k_ = in.k_src.data();
    v_ = in.v_src.data();
    in_ = &in;
  }

  GatherObservation gather(const ExecPlan& plan, Operand which) override {
    const bool is_q = which == Operand::q;
    const GatherPlan& g = is_q ? plan.unpad.q : plan.unpad.k;
    const int64_t heads = is_q ? plan.num_heads : plan.num_kv_heads, D = plan.head_dim;
    std::vector<float>& dst = which == Operand::q ? q_pk_ : which == Operand::k ? k_pk_ : v_pk_;
    const float* src = which == Operand::q ? in_->q_src.data() : which == Operand::k ? in_->k_src.data() : in_->v_src.data();
    const Buffer src_buffer = which == Operand::q ? Buffer::q_src : which == Operand::k ? Buffer::k_src : Buffer::v_src;
    dst.assign(static_cast<size_t>(g.dst_rows * heads * D), kPoison);
    GatherObservation ob = cpu::gather_rows(g, src, dst.data(), heads * D, src_buffer, threads_);
    (which == Operand::q ? q_ : which == Operand::k ? k_ : v_) = dst.data();
    return ob;
  }

  RotaryObservation rotary(const ExecPlan& plan, const RotaryTable& table) override {
    RotaryObservation ob = cpu::rotary_stage(plan, q_, k_, table, q_rot_, k_rot_, threads_);
    q_ = q_rot_.data();
    k_ = k_rot_.data();
    return ob;
  }

  AttentionObservation attention(const ExecPlan& plan) override {
    const AttentionPlan& at = plan.attention;
    const int64_t total_q = std::max<int64_t>(at.total_q, 0);
    out_.assign(static_cast<size_t>(total_q * plan.num_heads * plan.head_dim), kPoison);
    lse_.assign(static_cast<size_t>(std::max<int64_t>(at.lse_elements, 0)), kPoison);
    if (at.zero_fill) {
      std::fill(out_.begin(), out_.end(), 0.f);
      std::fill(lse_.begin(), lse_.end(), std::numeric_limits<float>::infinity());
      AttentionObservation ob;
      ob.writes.assign(static_cast<size_t>(total_q), 1);
      ob.computed.assign(static_cast<size_t>(total_q), 1);
      return ob;
    }
    cpu::AttentionResult r = cpu::fa2_varlen_forward(plan, q_, k_, v_, out_.data(), lse_.data(), threads_,
                                                     in_->qv_src.empty() ? nullptr : in_->qv_src.data());
    const int64_t rows_computed = r.rows_computed;
    AttentionObservation ob = cpu::attention_observation(std::move(r));
    if (!at.sample.empty()) {
      int64_t written = 0;
      for (uint32_t w : ob.writes) written += w > 0;
      ob.facts.sampled = true;
      ob.detail = "computed a sample of " + std::to_string(rows_computed) + " of " + std::to_string(written) +
                  " written rows (budget)";
    }
    return ob;
  }

  ScatterObservation scatter(const ExecPlan& plan) override {
    const int64_t H = plan.num_heads, D = plan.head_dim;
    out_final_.resize(static_cast<size_t>(plan.rows_final * H * D));
    return cpu::scatter_rows(plan.pad, out_.data(), std::max<int64_t>(plan.attention.total_q, 0), out_final_.data(), H * D);
  }

  Output output(const ExecPlan& plan) override { return {plan.pad.enabled ? out_final_.data() : out_.data(), &lse_}; }

  AttentionBackwardObservation attention_backward(const ExecPlan& plan, const std::vector<float>& dout) override {
    return cpu::fa2_varlen_backward(plan, q_, k_, v_, out_.data(), lse_.data(), dout.data(), threads_);
  }

 private:
  int threads_;
  const Inputs* in_ = nullptr;
  const float* q_ = nullptr;  // the tensors the next stage reads
  const float* k_ = nullptr;
  const float* v_ = nullptr;
  std::vector<float> q_pk_, k_pk_, v_pk_, q_rot_, k_rot_, out_, lse_, out_final_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  ExecResult run(const ExecPlan& plan, const ExecOptions&) override {
    CpuEngine engine(plan.threads);
    return drive(plan, engine);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace ad
