// The CUDA engine: the checked kernels of kernels/ behind the engine interface (engine.hpp),
// run by the same stage driver as the CPU engine, so both report the same violations by
// construction (the sweep of tests/test_cuda_backend.cpp checks it on a device).
//
//   unpad      kernels/unpad_pad.cu gather (k, v, then q: _upad_input's order)
//   rotary     kernels/rotary.cu (flash_attn contract, varlen, rotation inside the head);
//              the other contracts (fla's new output tensor, hf, positions per row) and
//              cross-head rotations run on the CPU twin, said so in the stage record
//   attention  kernels/varlen_attention*.cu (tensor cores for bf16/fp16 d64/d128)
//   pad        kernels/unpad_pad.cu scatter (a repeated index: CPU twin, last one wins)
//   result     on the host, by the driver
//   attention_backward (training)  kernels/varlen_attention_bwd*.cu: FA2's three launches
//              (dot_do_o, dq_dk_dv, convert_dQ) and the GQA group sum, tensor cores for
//              bf16/fp16 d64/d128 on the forward's q, k, v, out and LSE; other shapes do not
//              run on this engine, said so in the stage record
//
// Every launch goes through cuda::checked_launch: synchronised, its launch and execution
// errors checked, its access record read, before anything else runs. The first refused
// access of a launch is the one with the smallest launch-order key (contract/launch_order.hpp,
// the CPU twin's order), found on the device (atomicMin); an idempotent kernel is then
// relaunched in detail mode to collect that access's details, and the in-place rotary
// kernel's is decoded from its key. What lies wholly past the tensors (a phantom segment) is
// skipped by the kernels and counted on the host (exec/plan/clip.cpp), as the CPU twin does.
//
// --raw: the parent re-executes this program (same arguments) with ATTN_DOCTOR_RAW_CHILD=
// <stage> through util/subprocess, in its own process group under a time limit; the child
// runs the stages before that one checked and that one unchecked, prints the CUDA error it
// meets, and exits. The parent survives whatever happens to the child (a crash, a hang) and
// reports its symptom beside the diagnosis.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <optional>
#include <limits>

#include "exec/cpu/rotary_walk.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/cuda/device.hpp"
#include "exec/run/driver.hpp"
#include "exec/engine.hpp"
#include "launch.hpp"
#include "util/subprocess.hpp"

namespace ad {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
constexpr const char* kRawEnv = "ATTN_DOCTOR_RAW_CHILD";
constexpr const char* kRawTag = "ATTN_DOCTOR_RAW_SYMPTOM: ";
constexpr double kRawTimeoutSeconds = 60.0;

// ---- device tensors ------------------------------------------------------------------------

// Values already rounded to the dtype (num::round_to), so the conversion is exact.
std::vector<unsigned char> encode(const float* x, size_t n, ElemType e) {
  std::vector<unsigned char> out(n * size_t(elem_bytes(e)));
  for (size_t i = 0; i < n; ++i) {
    if (e == ElemType::fp32) {
      std::memcpy(&out[i * 4], &x[i], 4);
    } else {
      const uint16_t b = e == ElemType::bf16 ? __nv_bfloat16_raw(__float2bfloat16_rn(x[i])).x
                                             : __half_raw(__float2half_rn(x[i])).x;
      std::memcpy(&out[i * 2], &b, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, ElemType e) {
  const size_t n = bytes.size() / size_t(elem_bytes(e));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (e == ElemType::fp32) {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    } else {
      uint16_t b;
      std::memcpy(&b, &bytes[i * 2], 2);
      if (e == ElemType::bf16) {
        __nv_bfloat16_raw r;
        r.x = b;
        out[i] = __bfloat162float(__nv_bfloat16(r));
      } else {
        __half_raw r;
        r.x = b;
        out[i] = __half2float(__half(r));
      }
    }
  }
  return out;
}

// A (rows, heads, D) tensor on the device in the batch's dtype.
struct DTensor {
  cuda::DeviceBuffer<unsigned char> buf;
  int64_t rows = 0, heads = 0, dim = 0;
  ElemType elem = ElemType::bf16;
  int64_t numel() const { return rows * heads * dim; }
  void allocate(int64_t r, int64_t h, int64_t d, ElemType e) {
    rows = r, heads = h, dim = d, elem = e;
    buf.allocate(size_t(std::max<int64_t>(numel(), 0)) * size_t(elem_bytes(e)));
  }
  void upload(const float* host) { buf.upload(encode(host, size_t(std::max<int64_t>(numel(), 0)), elem)); }
  std::vector<float> download() const { return decode(buf.download(), elem); }
  void poison() {
    if (numel() > 0) {
      kern::launch_fill_nan(buf.get(), numel(), elem);
      AD_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void* get() const { return buf.get(); }
};

// ---- the engine ----------------------------------------------------------------------------

class CudaEngine final : public Engine {
 public:
  CudaEngine(std::optional<Stage> unchecked, int threads) : unchecked_(unchecked), threads_(std::max(1, threads)) {}
  const char* name() const override { return "cuda"; }
  std::string output_name() const override { return "GPU output"; }

  void load(const ExecPlan& plan, const Inputs& in) override {
    elem_ = plan.elem;
    const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
    q_src_.allocate(plan.rows_q_src, H, D, elem_);
    k_src_.allocate(plan.rows_k_src, Hk, D, elem_);
    v_src_.allocate(plan.rows_k_src, Hk, D, elem_);
    q_src_.upload(in.q_src.data());
    k_src_.upload(in.k_src.data());
    v_src_.upload(in.v_src.data());
    q_ = &q_src_, k_ = &k_src_, v_ = &v_src_;
    qv_host_ = in.qv_src.empty() ? nullptr : in.qv_src.data();  // FA3's q_v: the CPU twin reads it
  }

  GatherObservation gather(const ExecPlan& plan, Operand which) override {
    const GatherPlan& g = which == Operand::q ? plan.unpad.q : plan.unpad.k;
    const DTensor& src = which == Operand::q ? q_src_ : which == Operand::k ? k_src_ : v_src_;
    DTensor& dst = which == Operand::q ? q_pk_ : which == Operand::k ? k_pk_ : v_pk_;
    const char* tensor = which == Operand::q ? "q" : which == Operand::k ? "k" : "v";
    dst.allocate(g.dst_rows, src.heads, plan.head_dim, elem_);
    dst.poison();
    cuda::DeviceBuffer<int64_t> idx(g.indices);
    kern::IndexCopyParams p{src.get(), src.rows, dst.get(), g.dst_rows, src.heads * plan.head_dim * elem_bytes(elem_),
                            idx.get(), int64_t(g.indices.size()), nullptr,
                            which == Operand::q ? Buffer::q_src : which == Operand::k ? Buffer::k_src : Buffer::v_src,
                            which == Operand::q ? Buffer::q : which == Operand::k ? Buffer::k : Buffer::v};
    const Checks checks = checks_for(Stage::unpad);
    GatherObservation ob;
    ob.out_of_range = launch_recorded(std::string("unpad_gather ") + tensor, checks, [&](AccessRecord* rec, bool) {
      p.record = rec;
      kern::launch_unpad_gather(p, checks);
    });
    (which == Operand::q ? q_ : which == Operand::k ? k_ : v_) = &dst;
    ob.engine = StageEngine::cuda;
    return ob;
  }

  RotaryObservation rotary(const ExecPlan& plan, const RotaryTable& table) override {
    const RotaryPlan& r = plan.rotary;
    bool offsets_ok = true;
    for (int64_t o : r.offsets_q) offsets_ok = offsets_ok && o >= 0;
    for (int64_t o : r.offsets_k) offsets_ok = offsets_ok && o >= 0;
    const bool on_gpu = r.contract == RotaryContract::flash_attn && r.varlen && r.inplace && 2 * r.half <= plan.head_dim &&
                        offsets_ok && r.block_rows > 0;
    RotaryObservation ob;
    ob.engine = on_gpu ? StageEngine::cuda : StageEngine::cpu_twin;
    if (!on_gpu) {
      ob.facts.why_cpu = "the CUDA rotary kernel covers the flash_attn contract in place on varlen input with the "
                            "rotation inside the head; this call needs the CPU twin's semantics";
      // the CPU twin on host copies of the packed tensors, then back to the device
      const std::vector<float> qh = q_->download(), kh = k_->download();
      std::vector<float> q_rot, k_rot;
      RotaryObservation twin = cpu::rotary_stage(plan, qh.data(), kh.data(), table, q_rot, k_rot, threads_);
      ob.q = std::move(twin.q);
      ob.k = std::move(twin.k);
      q_->upload(q_rot.data());
      k_->upload(k_rot.data());
      return ob;
    }
    cuda::DeviceBuffer<float> dcos(table.cos), dsin(table.sin);
    for (const bool is_q : {true, false}) {
      DTensor& x = is_q ? *q_ : *k_;
      RotaryCallObservation& call = is_q ? ob.q : ob.k;
      const RotaryWalk walk(plan, is_q, x.rows, x.heads);
      const int64_t nseg = walk.segments();
      if (nseg <= 0) continue;
      std::vector<int64_t> offset(size_t(nseg), 0);
      int64_t launch_rows = 1;  // at least one row: a call wholly outside x launches programs that return
      for (int64_t b = 0; b < nseg; ++b) {
        offset[size_t(b)] = walk.offset(b);
        launch_rows = std::max(launch_rows, walk.run(b).second);
      }
      cuda::DeviceBuffer<int32_t> dcu(is_q ? r.cu_q : r.cu_k);
      cuda::DeviceBuffer<int64_t> doff(offset);
      const int64_t BM = walk.block_rows();
      kern::RotaryParams p;
      p.elem = elem_;
      p.x = x.get();
      p.rows = x.rows, p.heads = int32_t(x.heads), p.head_dim = int32_t(plan.head_dim);
      p.cos = dcos.get(), p.sin = dsin.get(), p.table_rows = r.table_rows, p.rotary_dim = int32_t(2 * r.half);
      p.interleaved = r.interleaved;
      p.cu_seqlens = dcu.get();
      p.num_segments = int32_t(nseg);
      p.max_seqlen = int32_t(is_q ? r.max_seqlen_q : r.max_seqlen_k);
      p.seqlen_offsets = doff.get();
      p.contract = RotaryContract::flash_attn;
      p.block_rows = int32_t(BM);
      p.buffer = is_q ? Buffer::q_rot : Buffer::k_rot;
      const Checks checks = checks_for(Stage::rotary);
      // the rows wholly outside x are counted on the host (count_rotary_rows_outside), not run
      p.skip_rows_outside = checks == Checks::checked;
      p.launch_rows = launch_rows;
      const cuda::LaunchOutcome o =
          cuda::checked_launch(std::string("rotary ") + (is_q ? "q" : "k"), slot_, [&](AccessRecord* rec) {
            p.record = rec;
            kern::launch_rotary(p, kern::rotary_grid_rows(p, nullptr), checks);
          });
      // rows inside x and inside the head: the kernel refuses nothing there, so a record it
      // kept is reported as it is
      call.outside_tensor.merge(o.record);
      for (int64_t b = 0; b < nseg; ++b) {
        const auto [lo, hi] = walk.run(b);
        const int64_t in_table = std::clamp<int64_t>(r.table_rows - offset[size_t(b)], lo, hi) - lo;  // offsets >= 0
        call.not_visited += walk.not_visited(b);
        call.rotated += in_table * x.heads;
        call.past_table += (hi - lo - in_table) * x.heads;
      }
      count_rotary_rows_outside(plan, is_q, walk, x.rows, x.heads, call);
    }
    return ob;
  }

  AttentionObservation attention(const ExecPlan& plan) override {
    const AttentionPlan& at = plan.attention;
    const int64_t H = plan.num_heads, D = plan.head_dim;
    const int64_t total_q = std::max<int64_t>(at.total_q, 0);
    out_.allocate(total_q, H, D, elem_);
    out_.poison();
    dlse_.allocate(size_t(std::max<int64_t>(at.lse_elements, 0)));
    cuda::DeviceBuffer<float>& dlse = dlse_;
    if (dlse.size() > 0) kern::launch_fill_f32(dlse.get(), int64_t(dlse.size()), kPoison);
    AD_CUDA_CHECK(cudaDeviceSynchronize());
    AttentionObservation ob;
    ob.engine = StageEngine::cuda;
    if (at.zero_fill) {
      if (out_.numel() > 0) AD_CUDA_CHECK(cudaMemset(out_.get(), 0, out_.buf.bytes()));
      kern::launch_fill_f32(dlse.get(), int64_t(dlse.size()), std::numeric_limits<float>::infinity());
      AD_CUDA_CHECK(cudaDeviceSynchronize());
      ob.writes.assign(size_t(total_q), 1);
      ob.computed.assign(size_t(total_q), 1);
      lse_ = dlse.download();
      return ob;
    }
    if (at.seqused_q || at.flags.chunk > 0 || at.paged || at.qv) {
      // FA3 / FA4's seqused_q (the segment's query length is seqused_q[b]), FA3's
      // attention_chunk, paged KV and q_v: the CUDA kernels address FA2's segments, masks and
      // contiguous k / v with q . k scores, so the CPU twin runs on host copies, then back to
      // the device
      const std::vector<float> qh = q_->download(), kh = k_->download(), vh = v_->download();
      std::vector<float> oh = out_.download();
      lse_.assign(size_t(std::max<int64_t>(at.lse_elements, 0)), kPoison);
      ob = cpu::attention_observation(cpu::fa2_varlen_forward(plan, qh.data(), kh.data(), vh.data(), oh.data(),
                                                              lse_.data(), threads_, qv_host_));
      out_.upload(oh.data());
      if (!lse_.empty()) dlse.upload(lse_);
      ob.engine = StageEngine::cpu_twin;
      ob.facts.why_cpu = at.seqused_q ? "seqused_q (FA3 / FA4): the CUDA attention kernels take FA2's segments; this call "
                                        "needs the CPU twin's semantics"
                         : at.paged ? "page_table (FA3 paged KV): the CUDA attention kernels read contiguous k / v; this call "
                                      "needs the CPU twin's semantics (contract/fa3_paged.hpp)"
                         : at.qv    ? "q_v (FA3): the CUDA attention kernels score q . k only; this call needs the CPU "
                                      "twin's semantics"
                                    : "attention_chunk (FA3): the CUDA attention kernels take FA2's masks; this call "
                                      "needs the CPU twin's semantics";
      return ob;
    }
    cuda::DeviceBuffer<int32_t> dcu_q(at.cu_seqlens_q), dcu_k(at.cu_seqlens_k);
    cuda::DeviceBuffer<int32_t> dused;
    if (at.seqused_k) dused.upload(*at.seqused_k);
    cuda::DeviceBuffer<uint32_t> writes{size_t(std::max<int64_t>(total_q, 1))};
    writes.fill_bytes(0);
    const Checks checks = checks_for(Stage::attention);
    kern::VarlenFwdParams p;
    // the plan holds the flags after mha_varlen_fwd's adjustments (fa2::normalize)
    set_call(p, plan, dcu_q, dcu_k, int32_t(at.grid_h),
             {at.softmax_scale, at.softcap, at.flags.causal, at.flags.local ? at.flags.window_left : -1,
              at.flags.causal ? 0 : at.flags.local ? at.flags.window_right : -1});
    p.out = {out_.get(), total_q, int32_t(H), Buffer::out};
    p.lse = dlse.get();
    p.lse_size = int64_t(dlse.size());
    p.row_writes_size = total_q;
    p.seqused_k = at.seqused_k ? dused.get() : nullptr;
    p.seqlenq_ngroups_swapped = at.swapped;
    p.ngroups = int32_t(at.ngroups);
    p.normalized = true;
    p.block_m = at.flags.block_m;
    p.lse_layout = at.lse_shape().layout;
    p.lse_max_seqlen_q = at.max_seqlen_q;
    // the CTAs wholly past q/out are counted on the host (exec/plan/clip.cpp), not launched
    p.skip_tiles_past_rows = checks == Checks::checked;
    // (at least one m block: a call whose every CTA lies past q launches one row of CTAs that return)
    p.launch_m_blocks = int32_t(std::clamp<int64_t>(at.past_rows.live_grid_m, 1, std::numeric_limits<int32_t>::max()));
    const std::string kernel = kern::varlen_fwd_kernel_name(p, checks);
    ob.facts.kernel = kernel;
    double ms = 0.0;
    ob.access = launch_recorded(
        kernel, checks,
        [&](AccessRecord* rec, bool detail) {
          p.record = rec;
          p.row_writes = detail ? nullptr : writes.get();  // the detail launch counts no writes
          kern::launch_varlen_fwd(p, checks);
        },
        &ms);
    ob.facts.ms_kernel = ms;
    const std::vector<uint32_t> counts = writes.download();
    ob.writes.assign(counts.begin(), counts.begin() + total_q);
    ob.computed.resize(size_t(total_q));
    for (int64_t r = 0; r < total_q; ++r) ob.computed[size_t(r)] = counts[size_t(r)] > 0;
    lse_ = dlse.download();
    return ob;
  }

  ScatterObservation scatter(const ExecPlan& plan) override {
    const int64_t H = plan.num_heads, D = plan.head_dim, total_q = std::max<int64_t>(plan.attention.total_q, 0);
    const int64_t n = std::min<int64_t>(int64_t(plan.pad.indices.size()), total_q);
    bool repeated = false;
    std::vector<int64_t> source_of(size_t(std::max<int64_t>(plan.rows_final, 0)), -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = plan.pad.indices[size_t(i)];
      if (t < 0 || t >= plan.pad.dst_rows) continue;
      repeated = repeated || source_of[size_t(t)] >= 0;
      source_of[size_t(t)] = i;  // pad_input is sequential: a repeated index keeps the last
    }
    ScatterObservation ob;
    if (repeated) {
      const std::vector<float> packed = out_.download();
      out_final_host_.resize(size_t(plan.rows_final * H * D));
      ScatterObservation twin = cpu::scatter_rows(plan.pad, packed.data(), total_q, out_final_host_.data(), H * D);
      twin.facts.why_cpu = "repeated scatter indices: pad_input keeps the last write, a GPU scatter races";
      twin.engine = StageEngine::cpu_twin;
      scattered_on_host_ = true;
      return twin;
    }
    ob.engine = StageEngine::cuda;
    out_final_.allocate(plan.rows_final, H, D, elem_);
    if (out_final_.numel() > 0) AD_CUDA_CHECK(cudaMemset(out_final_.get(), 0, out_final_.buf.bytes()));  // torch.zeros
    cuda::DeviceBuffer<int64_t> idx(plan.pad.indices);
    kern::IndexCopyParams p{out_.get(), total_q, out_final_.get(), plan.pad.dst_rows, H * D * elem_bytes(elem_),
                            idx.get(), n, nullptr, Buffer::out, Buffer::out_final};
    const Checks checks = checks_for(Stage::pad);
    ob.out_of_range = launch_recorded("pad_scatter", checks, [&](AccessRecord* rec, bool) {
      p.record = rec;
      kern::launch_pad_scatter(p, checks);
    });
    ob.rows_written = n - int64_t(ob.out_of_range.count);
    ob.source_of = std::move(source_of);
    return ob;
  }

  AttentionBackwardObservation attention_backward(const ExecPlan& plan, const std::vector<float>& dout) override {
    const BackwardPlan& bw = plan.backward;
    const AttentionPlan& at = plan.attention;
    const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
    const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
    AttentionBackwardObservation ob;
    ob.engine = StageEngine::cuda;
    kern::VarlenBwdParams p;
    cuda::DeviceBuffer<int32_t> dcu_q(at.cu_seqlens_q), dcu_k(at.cu_seqlens_k);
    // the masks of the plan's backward normalisation (fa2::bwd::normalize)
    set_call(p, plan, dcu_q, dcu_k, int32_t(H),
             {at.softmax_scale, at.softcap, bw.kernel.flags.causal, bw.kernel.flags.window_left,
              bw.kernel.flags.window_right});
    p.release = bw.release;
    p.arch = at.arch;
    p.deterministic = bw.deterministic;
    // the plan's normalisation (fa2::bwd::normalize) and shapes, as the CPU twin runs them
    p.normalized = true;
    p.kernel = bw.kernel;
    p.dq_accum_shape = bw.dq_accum;
    p.softmax_d_shape = bw.softmax_d;
    p.lse_layout = at.lse_shape().layout;
    p.lse_max_seqlen_q = int32_t(at.lse_shape().max_seqlen_q);
    const std::string why = kern::varlen_bwd_unsupported(p);
    if (!why.empty()) {
      // the CPU twin on host copies of the forward's tensors (as the rotary stage does)
      const std::vector<float> qh = q_->download(), kh = k_->download(), vh = v_->download(), oh = out_.download();
      ob = cpu::fa2_varlen_backward(plan, qh.data(), kh.data(), vh.data(), oh.data(), lse_.data(), dout.data(), threads_);
      ob.engine = StageEngine::cpu_twin;
      ob.facts.why_cpu = "the CUDA backward kernels take bf16 / fp16 with head_dim 64, 96, 128, 192 or 256 and FA2's tiles for "
                            "them; " + why;
      return ob;
    }
    if (!bw.kernel.launches) {
      // mha_varlen_bwd with max_seqlen_q <= 0: nothing launches, dk / dv are zeros
      ob.ran = true;
      ob.dq.assign(size_t(total_q * H * D), kPoison);
      ob.dk.assign(size_t(total_k * Hk * D), 0.f);
      ob.dv.assign(size_t(total_k * Hk * D), 0.f);
      ob.dq_writes.assign(size_t(total_q), 0);
      ob.dkv_writes.assign(size_t(total_k), 1);  // the host's zero fill writes every row
      ob.detail = "max_seqlen_q <= 0: no launch; dk and dv are zero-filled";
      return ob;
    }
    const bool gqa = H != Hk;
    DTensor ddout, dq, dk, dv, dk_x, dv_x;
    ddout.allocate(total_q, H, D, elem_);
    ddout.upload(dout.data());
    dq.allocate(total_q, H, D, elem_);
    dk.allocate(total_k, Hk, D, elem_);
    dv.allocate(total_k, Hk, D, elem_);
    if (gqa) {
      dk_x.allocate(total_k, H, D, elem_);
      dv_x.allocate(total_k, H, D, elem_);
    }
    for (DTensor* t : {&dq, &dk, &dv, &dk_x, &dv_x}) t->poison();  // torch.empty
    cuda::DeviceBuffer<float> softmax_d(size_t(std::max<int64_t>(bw.softmax_d.elements(), 1)));
    cuda::DeviceBuffer<float> dq_accum(size_t(std::max<int64_t>(bw.dq_accum.elements(), 1)));
    kern::launch_fill_f32(softmax_d.get(), int64_t(softmax_d.size()), kPoison);
    // torch.empty, or torch.zeros when deterministic
    kern::launch_fill_f32(dq_accum.get(), int64_t(dq_accum.size()), bw.deterministic ? 0.f : kPoison);
    cuda::DeviceBuffer<uint32_t> dq_writes{size_t(std::max<int64_t>(total_q, 1))}, dkv_writes{size_t(std::max<int64_t>(total_k, 1))};
    dq_writes.fill_bytes(0);
    dkv_writes.fill_bytes(0);
    AD_CUDA_CHECK(cudaDeviceSynchronize());
    p.out = {out_.get(), total_q, int32_t(H), Buffer::out};
    p.dout = {ddout.get(), total_q, int32_t(H)};
    p.dq = {dq.get(), total_q, int32_t(H)};
    p.dk = {gqa ? dk_x.get() : dk.get(), total_k, int32_t(gqa ? H : Hk)};
    p.dv = {gqa ? dv_x.get() : dv.get(), total_k, int32_t(gqa ? H : Hk)};
    p.dk_out = gqa ? dk.get() : nullptr;
    p.dv_out = gqa ? dv.get() : nullptr;
    p.lse = dlse_.get();
    p.lse_size = int64_t(dlse_.size());
    p.softmax_d = softmax_d.get();
    p.softmax_d_size = bw.softmax_d.elements();
    p.dq_accum = dq_accum.get();
    p.dq_accum_size = bw.dq_accum.elements();
    p.dq_writes_size = total_q;
    p.dkv_writes_size = total_k;
    const Checks checks = checks_for(Stage::attention_backward);
    const std::string kernel = kern::varlen_bwd_kernel_name(p, checks);
    ob.facts.kernel = kernel;
    double ms_total = 0.0;
    for (const kern::BwdStep step : kern::varlen_bwd_steps(p)) {
      // an empty grid launches nothing (no segment, or no key block), as the CPU twin walks it
      const bool empty_grid = at.num_segments <= 0 || (step == kern::BwdStep::key_blocks ? bw.kernel.grid_x <= 0
                                                         : step != kern::BwdStep::group_sum && bw.kernel.grid_m <= 0);
      if (empty_grid) continue;
      double ms = 0.0;
      // dq_dk_dv adds into dq_accum: its detail relaunch (the first refused access's details)
      // adds into a scratch copy, never into the real one
      cuda::DeviceBuffer<float> scratch;
      const AccessRecord rec = launch_recorded(
          kernel + " " + kern::to_string(step), checks,
          [&](AccessRecord* r, bool detail) {
            kern::VarlenBwdParams q = p;
            q.record = r;
            q.dq_writes = detail ? nullptr : dq_writes.get();
            q.dkv_writes = detail ? nullptr : dkv_writes.get();
            if (detail && step == kern::BwdStep::key_blocks) {
              scratch.allocate(dq_accum.size());
              kern::launch_fill_f32(scratch.get(), int64_t(scratch.size()), kPoison);
              q.dq_accum = scratch.get();
            }
            kern::launch_varlen_bwd_step(q, step, checks);
          },
          &ms);
      ms_total += ms;
      switch (step) {
        case kern::BwdStep::preprocess: ob.dot_do_o = rec; break;
        case kern::BwdStep::key_blocks: ob.dq_dk_dv = rec; break;
        case kern::BwdStep::convert_dq: ob.convert_dq = rec; break;
        case kern::BwdStep::group_sum: break;  // rows of the expanded tensors only: nothing to refuse
      }
    }
    ob.facts.ms_kernel = ms_total;
    ob.ran = true;
    ob.dq = dq.download();
    ob.dk = dk.download();
    ob.dv = dv.download();
    const std::vector<uint32_t> qw = dq_writes.download(), kw = dkv_writes.download();
    ob.dq_writes.assign(qw.begin(), qw.begin() + total_q);
    ob.dkv_writes.assign(kw.begin(), kw.begin() + total_k);
    // dq_misrouted stays empty: the driver computes the misplaced dq_accum tiles on the host
    // from the contract (integer-only, ref::backward_misroutes), the same for both engines
    return ob;
  }

  Output output(const ExecPlan& plan) override {
    if (!plan.pad.enabled) out_final_host_ = out_.download();
    else if (!scattered_on_host_) out_final_host_ = out_final_.download();
    return {out_final_host_.data(), &lse_};
  }

 private:
  // The fields the forward and the backward share (kern::set_varlen_call, as bench/gpu's C
  // API fills them): the operands the next stage reads (q_rot / k_rot after rotary), the
  // device copies of cu_seqlens, the shape with `num_heads` query heads (the forward's grid
  // heads: Hk after the single-query swap) and the masks.
  void set_call(kern::VarlenParamsBase& p, const ExecPlan& plan, const cuda::DeviceBuffer<int32_t>& cu_q,
                const cuda::DeviceBuffer<int32_t>& cu_k, int32_t num_heads, const kern::VarlenMasks& masks) const {
    const AttentionPlan& at = plan.attention;
    const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
    const int32_t H = int32_t(plan.num_heads), Hk = int32_t(plan.num_kv_heads);
    const bool rotated = plan.rotary.enabled;
    kern::set_varlen_call(
        p, elem_, {q_->get(), total_q, H, rotated ? Buffer::q_rot : Buffer::q},
        {k_->get(), total_k, Hk, rotated ? Buffer::k_rot : Buffer::k}, {v_->get(), total_k, Hk, Buffer::v},
        {cu_q.get(), int64_t(at.cu_seqlens_q.size())}, {cu_k.get(), int64_t(at.cu_seqlens_k.size())},
        {int32_t(at.num_segments), num_heads, Hk, int32_t(plan.head_dim), at.max_seqlen_q, at.max_seqlen_k}, masks);
  }

  Checks checks_for(Stage s) const { return unchecked_ == s ? Checks::unchecked : Checks::checked; }

  // One checked launch, and, when it refused an access, a second one in detail mode that
  // collects the details of the first in launch order. `launch(record, detail)`.
  AccessRecord launch_recorded(const std::string& kernel, Checks checks,
                               const std::function<void(AccessRecord*, bool)>& launch, double* ms = nullptr) {
    const cuda::LaunchOutcome o = cuda::checked_launch(kernel, slot_, [&](AccessRecord* rec) { launch(rec, false); });
    if (ms) *ms = o.ms;
    if (checks == Checks::unchecked || o.record.count == 0) return o.record;
    const cuda::LaunchOutcome d = cuda::checked_launch(
        kernel + " (detail)", slot_, [&](AccessRecord* rec) { launch(rec, true); }, detail_record(o.record.order));
    AccessRecord r = o.record;
    r.first = d.record.first;
    r.thread = d.record.thread;
    return r;
  }

  std::optional<Stage> unchecked_;
  int threads_;
  ElemType elem_ = ElemType::bf16;
  cuda::RecordSlot slot_;
  DTensor q_src_, k_src_, v_src_, q_pk_, k_pk_, v_pk_, out_, out_final_;
  DTensor* q_ = nullptr;  // the tensors the next stage reads
  DTensor* k_ = nullptr;
  DTensor* v_ = nullptr;
  cuda::DeviceBuffer<float> dlse_;  // the forward's LSE on the device (the backward reads it)
  std::vector<float> lse_, out_final_host_;
  const float* qv_host_ = nullptr;  // FA3's q_v (host; the Inputs outlive the run)
  bool scattered_on_host_ = false;
};

// ---- --raw ----------------------------------------------------------------------------------

// This process's arguments (/proc/self/cmdline), to re-execute it.
std::vector<std::string> own_arguments() {
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t i = 0; i < all.size();) {
    const size_t e = all.find('\0', i);
    args.push_back(all.substr(i, e == std::string::npos ? std::string::npos : e - i));
    if (e == std::string::npos) break;
    i = e + 1;
  }
  return args;
}

// Runs this program again with the stage unchecked and returns the symptom line it printed.
struct RawOutcome {
  std::string symptom;
  int exit_code = -1;
  int signal = 0;
};
RawOutcome run_raw_child(Stage stage) {
  RawOutcome out;
  std::vector<std::string> args = own_arguments();
  const std::string exe = self_executable();
  if (args.empty() || exe.empty()) {
    out.symptom = "not run: this program's arguments are unreadable";
    return out;
  }
  args[0] = exe;
  ProcessOptions o;
  o.timeout_seconds = kRawTimeoutSeconds;
  o.env = {std::string(kRawEnv) + "=" + to_string(stage)};
  o.own_process_group = true;
  const ProcessResult p = run_process(args, o);
  out.exit_code = p.exited ? p.exit_code : -1;
  out.signal = p.signal;
  const size_t at = p.err.find(kRawTag);
  if (!p.spawn_error.empty()) {
    out.symptom = "not run: " + p.spawn_error;
  } else if (p.timed_out) {
    out.symptom = std::string("none within ") + std::to_string(int(kRawTimeoutSeconds)) + " s: the unchecked " +
                  to_string(stage) + " kernel did not finish (its process group was killed)";
  } else if (at != std::string::npos) {
    const size_t e = p.err.find('\n', at);
    out.symptom = p.err.substr(at + std::strlen(kRawTag), e == std::string::npos ? std::string::npos : e - at - std::strlen(kRawTag));
  } else {
    out.symptom = p.signal ? "the child died with signal " + std::to_string(p.signal)
                           : "the child exited with " + std::to_string(out.exit_code) + " without a symptom line";
  }
  return out;
}

[[noreturn]] void raw_child_exit(const std::string& symptom, int code) {
  std::fprintf(stderr, "%s%s\n", kRawTag, symptom.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

// ---- the backend ---------------------------------------------------------------------------

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(cuda::DeviceInfo info) : info_(std::move(info)) {}
  std::string name() const override { return "cuda"; }
  ExecResult run(const ExecPlan& plan, const ExecOptions& options) override;

 private:
  cuda::DeviceInfo info_;
};

ExecResult CudaBackend::run(const ExecPlan& plan, const ExecOptions& options) {
  if (const char* raw_env = std::getenv(kRawEnv)) {
    // The --raw child: the stage named runs unchecked; a CUDA error there is the symptom.
    const std::optional<Stage> stage = stage_named(raw_env);
    if (!stage || std::find(std::begin(kDynamicStages), std::end(kDynamicStages), *stage) == std::end(kDynamicStages))
      raw_child_exit(std::string("host error: no stage named ") + raw_env, 71);
    try {
      CudaEngine engine(stage, plan.threads);
      drive(plan, engine, DriveOptions{stage});
      raw_child_exit(std::string("none: the unchecked ") + raw_env +
                         " kernel completed without a CUDA error (its out-of-bounds accesses landed in mapped "
                         "memory: silent corruption)",
                     0);
    } catch (const cuda::CudaError& e) {
      raw_child_exit(e.symptom() + " (" + e.code_name() + ", " + e.expr() + ")", 70);
    } catch (const std::exception& e) {
      raw_child_exit(std::string("host error: ") + e.what(), 71);
    }
  }
  CudaEngine engine(std::nullopt, plan.threads);
  ExecResult res = drive(plan, engine);
  res.notes.push_back("cuda: " + info_.name + " (sm_" + std::to_string(info_.cc_major) + std::to_string(info_.cc_minor) +
                      "), every launch synchronised and its access record read before the next");
  if (!options.raw) return res;
  // --raw: the first kernel stage that violated an invariant on the device (not on the CPU
  // twin), run unchecked in a child.
  std::optional<Stage> stage;
  for (const Stage s : {Stage::unpad, Stage::rotary, Stage::attention, Stage::pad, Stage::attention_backward})
    for (const auto& rec : res.stages)
      if (!stage && rec.name == s && rec.status == StageStatus::violation && rec.engine != StageEngine::cpu_twin)
        stage = s;
  if (!stage) {
    res.notes.push_back("--raw: no CUDA kernel stage failed, nothing to run unchecked");
    return res;
  }
  const RawOutcome raw = run_raw_child(*stage);
  for (auto& rec : res.stages)
    if (rec.name == *stage) {
      rec.facts.raw = RawRunFact{raw.symptom, raw.exit_code, raw.signal};
      rec.detail += (rec.detail.empty() ? "" : "; ") + std::string("unchecked in a child process: ") + raw.symptom;
    }
  res.notes.push_back(std::string("--raw: the unchecked ") + to_string(*stage) + " kernel, run in a child process, gave: " +
                      raw.symptom);
  return res;
}

}  // namespace

bool cuda_backend_built() { return true; }

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  cuda::DeviceInfo info = cuda::query_device();
  if (!info.present) {
    if (why) *why = "no usable CUDA device (" + info.why_absent + ")";
    return nullptr;
  }
  return std::make_unique<CudaBackend>(std::move(info));
}

}  // namespace ad
