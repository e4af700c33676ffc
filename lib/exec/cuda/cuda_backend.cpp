// The CUDA backend: runs an ExecPlan stage by stage on the GPU with the checked kernels of
// kernels/, with the CPU backend's semantics (exec/cpu_backend.cpp is the oracle, and this
// driver mirrors it stage for stage so that both report the same violations).
//
//   unpad      kernels/unpad_pad.cu gather (k, v, then q: _upad_input's order)
//   rotary     kernels/rotary.cu (flash_attn contract, varlen, rotation inside the head);
//              the other contracts (fla's new output tensor, hf, positions per row) and
//              cross-head rotations run on the CPU twin, said so in the stage record
//   attention  kernels/varlen_attention*.cu (tensor cores for bf16/fp16 d64/d128)
//   pad        kernels/unpad_pad.cu scatter (a repeated index: CPU twin, last one wins)
//   result     on the host, the CPU backend's own reference comparison on the GPU output
//
// Every launch goes through cuda::checked_launch: synchronised, its launch and execution
// errors checked, its violation record read, before anything else runs. The first violation
// of a launch is the one with the smallest launch-order key (the CPU twin's order), found
// on the device (atomicMin) and, for idempotent kernels, its details collected by a second
// launch in detail mode; so both backends name the same first access.
//
// --raw: the parent re-executes this program (/proc/self/exe, same arguments) with
// ATTN_DOCTOR_RAW_CHILD=<stage>; in the child the stages before it run checked and that
// stage runs unchecked; the child prints the CUDA error it meets and exits. The parent
// survives whatever happens to the child and reports its symptom beside the diagnosis.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "check/check.hpp"
#include "exec/cpu_kernels.hpp"
#include "exec/cuda/device.hpp"
#include "exec/observe.hpp"
#include "exec/plan.hpp"
#include "launch.hpp"

extern char** environ;

namespace ad {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
constexpr const char* kRawEnv = "ATTN_DOCTOR_RAW_CHILD";
constexpr const char* kRawTag = "ATTN_DOCTOR_RAW_SYMPTOM: ";

using observe::access_json;
using observe::num_json;
using observe::num_text;
using observe::raise_json;
using observe::Stages;

// ---- device tensors ------------------------------------------------------------------------

kern::ElemType elem_of(num::Precision p) {
  return p == num::Precision::bf16 ? kern::ElemType::bf16
         : p == num::Precision::fp16 ? kern::ElemType::fp16
                                      : kern::ElemType::fp32;
}

// Values already rounded to the dtype (num::round_to), so the conversion is exact.
std::vector<unsigned char> encode(const float* x, size_t n, kern::ElemType e) {
  std::vector<unsigned char> out(n * size_t(kern::elem_bytes(e)));
  for (size_t i = 0; i < n; ++i) {
    if (e == kern::ElemType::fp32) {
      std::memcpy(&out[i * 4], &x[i], 4);
    } else {
      const uint16_t b = e == kern::ElemType::bf16 ? __nv_bfloat16_raw(__float2bfloat16_rn(x[i])).x
                                                   : __half_raw(__float2half_rn(x[i])).x;
      std::memcpy(&out[i * 2], &b, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<unsigned char>& bytes, kern::ElemType e) {
  const size_t n = bytes.size() / size_t(kern::elem_bytes(e));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (e == kern::ElemType::fp32) {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    } else {
      uint16_t b;
      std::memcpy(&b, &bytes[i * 2], 2);
      if (e == kern::ElemType::bf16) {
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
  kern::ElemType elem = kern::ElemType::bf16;
  int64_t numel() const { return rows * heads * dim; }
  void allocate(int64_t r, int64_t h, int64_t d, kern::ElemType e) {
    rows = r, heads = h, dim = d, elem = e;
    buf.allocate(size_t(std::max<int64_t>(numel(), 0)) * size_t(kern::elem_bytes(e)));
  }
  void upload(const std::vector<float>& host) { buf.upload(encode(host.data(), host.size(), elem)); }
  std::vector<float> download() const { return decode(buf.download(), elem); }
  void poison() {
    if (numel() > 0) {
      kern::launch_fill_nan(buf.get(), numel(), elem);
      AD_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void* get() const { return buf.get(); }
};

void fill_inputs(std::vector<float>& t, uint64_t seed, num::InputTensor which, num::Precision p, int threads) {
  const int64_t n = static_cast<int64_t>(t.size());
  const int64_t chunk = 1 << 16;
  cpu::parallel_for(threads, (n + chunk - 1) / chunk, 1, [&](int64_t c, int) {
    const int64_t e = std::min(n, (c + 1) * chunk);
    for (int64_t i = c * chunk; i < e; ++i) t[size_t(i)] = num::input_value(seed, which, uint64_t(i), p);
  });
}

// ---- the raw child ---------------------------------------------------------------------------

struct RawOutcome {
  bool ran = false;
  std::string symptom;  // "an illegal memory access was encountered", or "none: ..."
  int exit_code = -1;
  int signal = 0;
};

// Re-executes this program with the same arguments and ATTN_DOCTOR_RAW_CHILD=stage and
// returns the symptom line its unchecked stage printed. Never throws.
RawOutcome run_raw_child(const std::string& stage) {
  RawOutcome out;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t i = 0; i < all.size();) {
    const size_t e = all.find('\0', i);
    args.push_back(all.substr(i, e == std::string::npos ? std::string::npos : e - i));
    if (e == std::string::npos) break;
    i = e + 1;
  }
  if (args.empty()) {
    out.symptom = "not run: /proc/self/cmdline unreadable";
    return out;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kRawEnv, std::strlen(kRawEnv)) != 0) env_store.emplace_back(*e);
  env_store.push_back(std::string(kRawEnv) + "=" + stage);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    out.symptom = "not run: pipe() failed";
    return out;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    out.symptom = "not run: posix_spawn failed";
    return out;
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  out.ran = true;
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
  const size_t at = text.find(kRawTag);
  if (at != std::string::npos) {
    const size_t e = text.find('\n', at);
    out.symptom = text.substr(at + std::strlen(kRawTag), e == std::string::npos ? std::string::npos : e - at - std::strlen(kRawTag));
  } else {
    out.symptom = out.signal ? "the child died with signal " + std::to_string(out.signal)
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
  ExecResult run_stages(const ExecPlan& plan, const std::string& raw_stage);
  cuda::DeviceInfo info_;
};

ExecResult CudaBackend::run(const ExecPlan& plan, const ExecOptions& options) {
  const char* raw_env = std::getenv(kRawEnv);
  const std::string raw_stage = raw_env ? raw_env : "";
  if (!raw_stage.empty()) {
    // The --raw child: the stage named runs unchecked; a CUDA error there is the symptom.
    try {
      ExecResult r = run_stages(plan, raw_stage);
      (void)r;
      raw_child_exit("none: the unchecked " + raw_stage +
                         " kernel completed without a CUDA error (its out-of-bounds accesses landed in mapped "
                         "memory: silent corruption)",
                     0);
    } catch (const cuda::CudaError& e) {
      raw_child_exit(e.symptom() + " (" + e.code_name() + ", " + e.expr() + ")", 70);
    } catch (const std::exception& e) {
      raw_child_exit(std::string("host error: ") + e.what(), 71);
    }
  }
  ExecResult res = run_stages(plan, "");
  res.backend = "cuda";
  res.notes.push_back("cuda: " + info_.name + " (sm_" + std::to_string(info_.cc_major) + std::to_string(info_.cc_minor) +
                      "), every launch synchronised and its violation record read before the next");
  if (options.raw) {
    // The first kernel stage that violated an invariant.
    std::string stage;
    for (const char* s : {"unpad", "rotary", "attention", "pad"})
      for (const auto& rec : res.stages)
        if (stage.empty() && rec.name == s && rec.status == "violation" && rec.data.value("engine", "cuda") == "cuda")
          stage = s;
    if (stage.empty()) {
      res.notes.push_back("--raw: no CUDA kernel stage failed, nothing to run unchecked");
    } else {
      const RawOutcome raw = run_raw_child(stage);
      for (auto& rec : res.stages)
        if (rec.name == stage) {
          rec.data["raw"] = {{"symptom", raw.symptom}, {"exit_code", raw.exit_code}, {"signal", raw.signal}};
          rec.detail += (rec.detail.empty() ? "" : "; ") + std::string("unchecked in a child process: ") + raw.symptom;
        }
      res.notes.push_back("--raw: the unchecked " + stage + " kernel, run in a child process, gave: " + raw.symptom);
    }
  }
  return res;
}

ExecResult CudaBackend::run_stages(const ExecPlan& plan, const std::string& raw_stage) {
  ExecResult res;
  res.backend = "cuda";
  if (!plan.skip_reason.empty()) {
    res.stages = skipped_stages(plan.skip_reason);
    return res;
  }
  auto checks_for = [&](const char* stage) {
    return raw_stage == stage ? kern::Checks::unchecked : kern::Checks::checked;
  };
  Stages st{res};
  const int threads = std::max(1, plan.threads);
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
  const AttentionPlan& at = plan.attention;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
  const kern::ElemType elem = elem_of(plan.precision);
  cuda::RecordSlot slot;

  std::vector<float> q_src(size_t(plan.rows_q_src * H * D));
  std::vector<float> k_src(size_t(plan.rows_k_src * Hk * D)), v_src(k_src.size());
  fill_inputs(q_src, plan.seed, num::InputTensor::q, plan.precision, threads);
  fill_inputs(k_src, plan.seed, num::InputTensor::k, plan.precision, threads);
  fill_inputs(v_src, plan.seed, num::InputTensor::v, plan.precision, threads);
  DTensor dq_src, dk_src, dv_src;
  dq_src.allocate(plan.rows_q_src, H, D, elem);
  dk_src.allocate(plan.rows_k_src, Hk, D, elem);
  dv_src.allocate(plan.rows_k_src, Hk, D, elem);
  dq_src.upload(q_src);
  dk_src.upload(k_src);
  dv_src.upload(v_src);

  // ---- unpad ------------------------------------------------------------------------
  DTensor dq_pk, dk_pk, dv_pk;
  DTensor* q = &dq_src;
  DTensor* k = &dk_src;
  DTensor* v = &dv_src;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("unpad");
    s.data["engine"] = "cuda";
    if (!plan.unpad.q.enabled && !plan.unpad.k.enabled) {
      s.status = "skipped";
      s.detail = "nothing to gather on the " + plan.path + " path: the kernel receives the packed tensors as given";
      s.data.erase("engine");
    } else {
      AccessRecord first;
      std::string first_tensor;
      int64_t oob_total = 0;
      auto gather = [&](const GatherPlan& g, const DTensor& src, DTensor& dst, int64_t heads, ExecBuffer b,
                        const char* tensor) {
        dst.allocate(g.dst_rows, heads, D, elem);
        dst.poison();
        cuda::DeviceBuffer<int64_t> idx(g.indices);
        kern::IndexCopyParams p{src.get(), src.rows, dst.get(), g.dst_rows, heads * D * kern::elem_bytes(elem),
                                idx.get(), int64_t(g.indices.size()), nullptr};
        const auto o = cuda::checked_launch(std::string("unpad_gather ") + tensor, slot, [&](kern::ViolationRecord* rec) {
          p.record = rec;
          kern::launch_unpad_gather(p, checks_for("unpad"));
        });
        if (o.record.count > 0) {
          // First in launch order: the smallest position (the device's min_order).
          const int64_t pos = int64_t(o.record.min_order);
          AccessRecord a;
          a.note({uint64_t(pos), 0}, AccessKind::read, b, g.indices[size_t(pos)], g.src_rows, true, {pos, -1, -1}, pos,
                 -1, -1, int64_t(o.record.count));
          oob_total += a.count;
          if (!first.has_first) {
            first = a;
            first_tensor = tensor;
          }
        }
        s.data[std::string("rows_") + tensor] = g.dst_rows;
      };
      if (plan.unpad.k.enabled) {
        gather(plan.unpad.k, dk_src, dk_pk, Hk, ExecBuffer::k_src, "k");
        gather(plan.unpad.k, dv_src, dv_pk, Hk, ExecBuffer::v_src, "v");
        k = &dk_pk;
        v = &dv_pk;
      }
      if (plan.unpad.q.enabled) {
        gather(plan.unpad.q, dq_src, dq_pk, H, ExecBuffer::q_src, "q");
        q = &dq_pk;
      }
      observe::unpad_gather(s, res, first, first_tensor, oob_total);
    }
    s.ms = ms_since(t0);
  }
  if (raw_stage == "unpad") return res;
  if (plan.conversion_failure) {
    observe::conversion_raise(st, *plan.conversion_failure, total_q);
    return res;
  }

  // ---- rotary -----------------------------------------------------------------------
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
      bool offsets_ok = true;
      for (int64_t o : r.offsets_q) offsets_ok = offsets_ok && o >= 0;
      for (int64_t o : r.offsets_k) offsets_ok = offsets_ok && o >= 0;
      const bool on_gpu = r.contract == RotaryContract::flash_attn && r.varlen && r.inplace && 2 * half <= D &&
                          offsets_ok && r.block_rows > 0;
      std::vector<float> cos_t, sin_t;
      if (r.contract != RotaryContract::hf) {
        cos_t.resize(size_t(r.table_rows * half));
        sin_t.resize(cos_t.size());
        cpu::parallel_for(threads, r.table_rows, 256, [&](int64_t pos, int) {
          for (int64_t i = 0; i < half; ++i) {
            cos_t[size_t(pos * half + i)] = num::rotary_cos(pos, i, r.dim, r.base, plan.precision);
            sin_t[size_t(pos * half + i)] = num::rotary_sin(pos, i, r.dim, r.base, plan.precision);
          }
        });
      }
      s.data = {{"contract", to_string(r.contract)}, {"dim", r.dim}, {"varlen", r.varlen}, {"table_rows", r.table_rows},
                {"engine", on_gpu ? "cuda" : "cpu-twin"}};
      if (!on_gpu)
        s.data["why_cpu"] = "the CUDA rotary kernel covers the flash_attn contract in place on varlen input with the "
                            "rotation inside the head; this call needs the CPU twin's semantics";
      struct Observed {
        AccessRecord outside_tensor, outside_head, table;
        int64_t rotated = 0, past_table = 0, not_visited = 0;
      } obs[2];
      if (on_gpu) {
        cuda::DeviceBuffer<float> dcos(cos_t), dsin(sin_t);
        for (int call = 0; call < 2; ++call) {
          const bool is_q = call == 0;
          DTensor& x = is_q ? *q : *k;
          const auto& cu = is_q ? r.cu_q : r.cu_k;
          const auto& offs = is_q ? r.offsets_q : r.offsets_k;
          const int64_t nseg = int64_t(cu.size()) - 1;
          if (nseg <= 0) continue;
          std::vector<int64_t> off_full(size_t(nseg), 0);
          for (int64_t b = 0; b < nseg; ++b)
            off_full[size_t(b)] = offs.empty() ? 0 : !r.offsets_per_sequence ? offs.front()
                                                 : b < int64_t(offs.size()) ? offs[size_t(b)] : 0;
          cuda::DeviceBuffer<int32_t> dcu(cu);
          cuda::DeviceBuffer<int64_t> doff(off_full);
          const int64_t BM = r.block_rows;
          const int64_t max_seqlen = is_q ? r.max_seqlen_q : r.max_seqlen_k;
          const int64_t grid_m = std::max<int64_t>((max_seqlen + BM - 1) / BM, 0);
          kern::RotaryParams p;
          p.elem = elem;
          p.x = x.get();
          p.rows = x.rows, p.heads = int32_t(x.heads), p.head_dim = int32_t(D);
          p.cos = dcos.get(), p.sin = dsin.get(), p.table_rows = r.table_rows, p.rotary_dim = int32_t(2 * half);
          p.interleaved = r.interleaved;
          p.cu_seqlens = dcu.get();
          p.num_segments = int32_t(nseg);
          p.max_seqlen = int32_t(max_seqlen);
          p.seqlen_offsets = doff.get();
          p.contract = kern::RotaryContract::flash_attn;
          p.order_block_rows = int32_t(BM);
          const auto o = cuda::checked_launch(std::string("rotary ") + (is_q ? "q" : "k"), slot,
                                              [&](kern::ViolationRecord* rec) {
                                                p.record = rec;
                                                kern::launch_rotary(p, grid_m * BM, checks_for("rotary"));
                                              });
          Observed& ob = obs[call];
          if (o.record.count > 0) {
            // Decode the first access from its launch-order key: program ((h*N + b)*grid_m + m),
            // row in the program; the first access of a (row, head) is its column-0 read.
            const uint64_t key = o.record.min_order, blk = key >> 24, rin = key & 0xFFFFFF;
            const int64_t m = int64_t(blk % uint64_t(grid_m)), hb = int64_t(blk / uint64_t(grid_m));
            const int64_t b = hb % nseg, h = hb / nseg;
            const int64_t row = int64_t(cu[size_t(b)]) + m * BM + int64_t(rin);
            ob.outside_tensor.note({blk, rin << 20}, AccessKind::read, is_q ? ExecBuffer::q_rot : ExecBuffer::k_rot,
                                   row * x.heads * D + h * D, x.numel(), false, {m, b, h}, row, b, h,
                                   int64_t(o.record.count));
          }
          for (int64_t b = 0; b < nseg; ++b) {
            const int64_t len = sem::wrap_sub(cu[size_t(b) + 1], cu[size_t(b)]);
            const int64_t visited = std::min<int64_t>(std::max<int64_t>(len, 0), grid_m * BM);
            ob.not_visited += std::max<int64_t>(len, 0) - visited;
            for (int64_t rm = 0; rm < visited; ++rm) {
              if (rm + off_full[size_t(b)] < r.table_rows) ob.rotated += x.heads;
              else ob.past_table += x.heads;
            }
          }
        }
      } else {
        // CPU twin on host copies of the packed tensors, then back to the device.
        std::vector<float> qh = q->download(), kh = k->download(), q_rot, k_rot;
        auto prepare = [&](const std::vector<float>& x, std::vector<float>& y) {
          y = x;
          if (r.contract == RotaryContract::fla) {
            const int64_t cols = std::min<int64_t>(2 * half, D);
            for (size_t i = 0; i < y.size() / size_t(D); ++i) std::fill_n(y.data() + i * size_t(D), cols, kPoison);
          }
        };
        prepare(qh, q_rot);
        prepare(kh, k_rot);
        cpu::RotaryResult rq = cpu::rotary_apply(plan, true, qh.data(), q_rot.data(), total_q, H, cos_t.data(), sin_t.data(), threads);
        cpu::RotaryResult rk = cpu::rotary_apply(plan, false, kh.data(), k_rot.data(), total_k, Hk, cos_t.data(), sin_t.data(), threads);
        for (int call = 0; call < 2; ++call) {
          const cpu::RotaryResult& rr = call == 0 ? rq : rk;
          obs[call].outside_tensor = rr.outside_tensor;
          obs[call].outside_head = rr.outside_head;
          obs[call].table = rr.table;
          obs[call].rotated = rr.rows_rotated;
          obs[call].past_table = rr.rows_past_table;
          obs[call].not_visited = rr.rows_not_visited;
        }
        q->upload(q_rot);
        k->upload(k_rot);
      }
      s.data["rotated"] = obs[0].rotated + obs[1].rotated;
      s.data["past_table"] = obs[0].past_table + obs[1].past_table;
      s.data["rows_not_visited"] = obs[0].not_visited + obs[1].not_visited;
      if (!r.note.empty()) s.detail = r.note;
      const int64_t unrot = obs[0].past_table + obs[1].past_table;
      const int64_t unvisited = obs[0].not_visited + obs[1].not_visited;
      if (unrot > 0 || unvisited > 0) {
        std::string d;
        if (unrot > 0)
          d += std::to_string(unrot) + " (row, head) pairs at positions past the " + std::to_string(r.table_rows) +
               "-row table left " + (r.contract == RotaryContract::fla ? "unwritten" : "unrotated");
        if (unvisited > 0)
          d += std::string(d.empty() ? "" : "; ") + std::to_string(unvisited) + " rows past max_seqlen's programs never rotated";
        s.detail = s.detail.empty() ? d : s.detail + "; " + d;
      }
      observe::rotary_access(s, res, r, D, {obs[0].outside_tensor, obs[0].table, obs[0].outside_head},
                             {obs[1].outside_tensor, obs[1].table, obs[1].outside_head});
    }
    s.ms = ms_since(t0);
  }
  if (raw_stage == "rotary") return res;

  // ---- attention --------------------------------------------------------------------
  DTensor dout;
  std::vector<float> lse;
  std::vector<uint8_t> written(size_t(total_q), 0), computed(size_t(total_q), 0);
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("attention");
    s.data["engine"] = "cuda";
    observe::attention_launch(s, plan);
    if (at.raises) {
      s.ms = ms_since(t0);
      observe::host_raise(st, s, 3, *at.raises, "attention", total_q);
      return res;
    }
    dout.allocate(total_q, H, D, elem);
    dout.poison();
    cuda::DeviceBuffer<float> dlse(size_t(std::max<int64_t>(at.lse_elements, 0)));
    if (dlse.size() > 0) kern::launch_fill_f32(dlse.get(), int64_t(dlse.size()), kPoison);
    AD_CUDA_CHECK(cudaDeviceSynchronize());
    int64_t rows_never = 0, first_never = -1, rows_twice = 0, first_twice = -1, first_twice_count = 0;
    int64_t rows_foreign = 0, first_foreign = -1, first_foreign_segment = -1, rows_written = 0;
    AccessRecord access;
    if (at.zero_fill) {
      if (dout.numel() > 0) AD_CUDA_CHECK(cudaMemset(dout.get(), 0, dout.buf.bytes()));
      kern::launch_fill_f32(dlse.get(), int64_t(dlse.size()), std::numeric_limits<float>::infinity());
      AD_CUDA_CHECK(cudaDeviceSynchronize());
      std::fill(written.begin(), written.end(), 1);
      std::fill(computed.begin(), computed.end(), 1);
      rows_written = total_q;
      s.detail = "max_seqlen_k <= 0: the host zero-fills the output and sets the LSE to +inf (no launch)";
    } else {
      cuda::DeviceBuffer<int32_t> dcu_q(at.cu_seqlens_q), dcu_k(at.cu_seqlens_k);
      cuda::DeviceBuffer<int32_t> dused;
      if (at.seqused_k) dused.upload(*at.seqused_k);
      cuda::DeviceBuffer<uint32_t> writes{size_t(std::max<int64_t>(total_q, 1))};
      writes.fill_bytes(0);
      kern::VarlenFwdParams p;
      p.elem = elem;
      p.q = {q->get(), total_q, int32_t(H)};
      p.k = {k->get(), total_k, int32_t(Hk)};
      p.v = {v->get(), total_k, int32_t(Hk)};
      p.out = {dout.get(), total_q, int32_t(H)};
      p.lse = dlse.get();
      p.lse_size = int64_t(dlse.size());
      p.row_writes = writes.get();
      p.row_writes_size = total_q;
      p.cu_seqlens_q = {dcu_q.get(), int64_t(at.cu_seqlens_q.size())};
      p.cu_seqlens_k = {dcu_k.get(), int64_t(at.cu_seqlens_k.size())};
      p.seqused_k = at.seqused_k ? dused.get() : nullptr;
      p.batch = int32_t(at.num_segments);
      p.num_heads = int32_t(at.swapped ? Hk : H);
      p.num_heads_k = int32_t(Hk);
      p.head_dim = int32_t(D);
      p.max_seqlen_q = at.max_seqlen_q;
      p.max_seqlen_k = at.max_seqlen_k;
      p.softmax_scale = at.softmax_scale;
      p.softcap = at.softcap;
      const bool causal = !at.swapped && at.flags.causal, local = !at.swapped && at.flags.local;
      p.causal = causal;
      p.window_left = local ? at.flags.window_left : -1;
      p.window_right = causal ? 0 : local ? at.flags.window_right : -1;
      p.seqlenq_ngroups_swapped = at.swapped;
      p.ngroups = int32_t(at.ngroups);
      p.normalized = true;  // the plan holds the flags after mha_varlen_fwd's adjustments
      p.block_m = at.flags.block_m;
      p.lse_layout = at.unpadded_lse ? 0 : 1;
      p.lse_max_seqlen_q = at.max_seqlen_q;
      const kern::Checks checks = checks_for("attention");
      const std::string kernel = kern::varlen_fwd_kernel_name(p, checks);
      s.data["kernel"] = kernel;
      const auto o = cuda::checked_launch(kernel, slot, [&](kern::ViolationRecord* rec) {
        p.record = rec;
        kern::launch_varlen_fwd(p, checks);
      });
      const std::vector<uint32_t> counts = writes.download();
      lse = dlse.download();
      if (o.record.count > 0) {
        // The first access in launch order: a second launch collects its details.
        const kern::ViolationRecord want = kern::detail_record(o.record.min_order);
        AD_CUDA_CHECK(cudaMemcpy(slot.get(), &want, sizeof want, cudaMemcpyHostToDevice));
        p.record = slot.get();
        p.row_writes = nullptr;
        kern::launch_varlen_fwd(p, kern::Checks::checked);
        AD_CUDA_CHECK_LAUNCH("varlen_fwd (detail)");
        const kern::ViolationRecord d = slot.read();
        const auto buf = static_cast<kern::Buffer>(d.buffer);
        const ExecBuffer q_buf = plan.rotary.enabled ? ExecBuffer::q_rot : ExecBuffer::q;
        const ExecBuffer k_buf = plan.rotary.enabled ? ExecBuffer::k_rot : ExecBuffer::k;
        const ExecBuffer eb = buf == kern::Buffer::q ? q_buf
                              : (buf == kern::Buffer::k || buf == kern::Buffer::v) ? k_buf
                              : buf == kern::Buffer::lse ? ExecBuffer::lse
                                                         : ExecBuffer::out;
        const bool kv = buf == kern::Buffer::k || buf == kern::Buffer::v;
        access.note({o.record.min_order >> 26, o.record.min_order & ((uint64_t{1} << 26) - 1)},
                    d.access == int32_t(kern::Access::write) ? AccessKind::write : AccessKind::read, eb, d.index, d.bound,
                    buf != kern::Buffer::lse, {d.block[0], d.block[1], d.block[2]},
                    kv ? d.index : (buf == kern::Buffer::lse ? -1 : d.index), d.block[1],
                    kv ? (at.swapped ? -1 : d.block[2]) : d.head, int64_t(o.record.count));
        if (buf == kern::Buffer::lse) access.row = -1;
      }
      // coverage: writes per packed row observed on the device (head 0 of each segment)
      for (int64_t r = 0; r < total_q; ++r) {
        const uint32_t c = counts[size_t(r)];
        written[size_t(r)] = c > 0;
        computed[size_t(r)] = c > 0;
        if (c == 0) {
          if (rows_never++ == 0) first_never = r;
          continue;
        }
        ++rows_written;
        if (c > 1 && rows_twice++ == 0) {
          first_twice = r;
          first_twice_count = c;
        }
        if (at.swapped) {
          // the swapped path writes row b for segment b
          const int64_t b = r;
          if (b < int64_t(at.cu_seqlens_q.size()) - 1) {
            const int64_t s0 = at.cu_seqlens_q[size_t(b)], s1 = at.cu_seqlens_q[size_t(b) + 1];
            if (!(s0 <= r && r < s1) && rows_foreign++ == 0) {
              first_foreign = r;
              first_foreign_segment = b;
            }
          }
        }
      }
      s.data["rows_written"] = rows_written;
      s.data["rows_computed"] = rows_written;
      s.data["ms_kernel"] = o.ms;
      observe::attention(s, res, access,
                         {rows_never, first_never, rows_twice, first_twice, first_twice_count, rows_foreign,
                          first_foreign, first_foreign_segment},
                         total_q);
    }
    if (at.zero_fill) lse = dlse.download();
    s.ms = ms_since(t0);
  }
  if (raw_stage == "attention") return res;

  // ---- pad --------------------------------------------------------------------------
  std::vector<float> out_final;
  std::vector<int64_t> source_of;
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("pad");
    if (!plan.pad.enabled) {
      s.status = "skipped";
      s.detail = "no scatter on the " + plan.path + " path: the caller receives the packed output";
      out_final = dout.download();
    } else {
      const int64_t n = std::min<int64_t>(int64_t(plan.pad.indices.size()), total_q);
      source_of.assign(size_t(std::max<int64_t>(plan.rows_final, 0)), -1);
      bool repeated = false;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = plan.pad.indices[size_t(i)];
        if (t < 0 || t >= plan.pad.dst_rows) continue;
        repeated = repeated || source_of[size_t(t)] >= 0;
        source_of[size_t(t)] = i;  // pad_input is sequential: a repeated index keeps the last
      }
      AccessRecord oob;
      int64_t rows_written = 0;
      if (!repeated) {
        s.data["engine"] = "cuda";
        DTensor dfinal;
        dfinal.allocate(plan.rows_final, H, D, elem);
        if (dfinal.numel() > 0) AD_CUDA_CHECK(cudaMemset(dfinal.get(), 0, dfinal.buf.bytes()));  // torch.zeros
        cuda::DeviceBuffer<int64_t> idx(plan.pad.indices);
        kern::IndexCopyParams p{dout.get(), total_q, dfinal.get(), plan.pad.dst_rows, H * D * kern::elem_bytes(elem),
                                idx.get(), n, nullptr};
        const auto o = cuda::checked_launch("pad_scatter", slot, [&](kern::ViolationRecord* rec) {
          p.record = rec;
          kern::launch_pad_scatter(p, checks_for("pad"));
        });
        if (o.record.count > 0) {
          const int64_t pos = int64_t(o.record.min_order);
          oob.note({uint64_t(pos), 0}, AccessKind::write, ExecBuffer::out_final, plan.pad.indices[size_t(pos)],
                   plan.pad.dst_rows, true, {pos, -1, -1}, pos, -1, -1, int64_t(o.record.count));
        }
        rows_written = n - int64_t(o.record.count);
        out_final = dfinal.download();
      } else {
        s.data["engine"] = "cpu-twin";
        s.data["why_cpu"] = "repeated scatter indices: pad_input keeps the last write, a GPU scatter races";
        const std::vector<float> packed = dout.download();
        out_final.resize(size_t(plan.rows_final * H * D));
        cpu::ScatterResult sr = cpu::scatter_rows(plan.pad, packed.data(), total_q, out_final.data(), H * D);
        oob = sr.oob;
        rows_written = sr.rows_written;
      }
      s.data["rows_written"] = rows_written;
      observe::pad_scatter(s, res, oob);
    }
    s.ms = ms_since(t0);
  }
  if (raw_stage == "pad") return res;

  // ---- result (on the host, the CPU backend's comparison) ----------------------------
  {
    auto t0 = Clock::now();
    StageRecord& s = st.add("result");
    observe::ResultInputs in;
    in.out_final = out_final.data();
    in.source_of = &source_of;
    in.written = &written;
    in.computed = &computed;
    in.lse = &lse;
    in.q_src = q_src.data();
    in.k_src = k_src.data();
    in.v_src = v_src.data();
    in.total_q = total_q;
    in.threads = threads;
    in.output_name = "GPU output";
    observe::result(s, res, plan, in);
    s.ms = ms_since(t0);
  }
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
