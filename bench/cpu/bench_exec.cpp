// Benchmark of the CPU execution path. Measures, does not test:
//   dynamic: the checked stages on packed batches of several shapes, every row computed
//            (--full), with 1 and N threads: rows/s and GFLOP/s of the attention emulation
//            and of the fp64 reference;
//   static:  load + convert + static checks of a 1M-token padded batch whose mask and
//            cu_seqlens are read from .npy files (written here with ad::make_npy);
//   budget:  the dynamic stages on the same 1M-token batch at the default --budget
//            (sampled rows) to show the cost stays in seconds.
//   kernels: the attention emulation and the reference alone on one thread, timed in thread
//            CPU time (robust when other processes share the cores).
// Usage: bench_exec [--quick] [--threads N] [--out FILE.json]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "batch/npy.hpp"
#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"
#include "exec/reference/reference.hpp"

using namespace ad;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double stage_ms(const ExecResult& r, Stage name) {
  for (const auto& s : r.stages)
    if (s.name == name) return s.ms;
  return 0;
}
const StageFacts* stage_facts(const ExecResult& r, Stage name) {
  for (const auto& s : r.stages)
    if (s.name == name) return &s.facts;
  return nullptr;
}

struct Shape {
  std::string name;
  int64_t H, Hk, D;
  std::vector<int64_t> lengths;
  bool causal;
  std::string dtype;
  bool rotary;
};

nlohmann::json dynamic_case(const Shape& s, int threads, int repeats) {
  std::vector<int64_t> cu{0};
  int64_t mx = 0;
  for (int64_t l : s.lengths) {
    cu.push_back(cu.back() + l);
    mx = std::max(mx, l);
  }
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", s.H}, {"num_kv_heads", s.Hk}, {"head_dim", s.D}, {"causal", s.causal}, {"dtype", s.dtype}}},
                      {"varlen", {{"cu_seqlens_q", cu}, {"max_seqlen_q", mx}}}};
  if (s.rotary) j["rotary"] = {{"implementation", "flash_attn"}, {"dim", s.D}};
  Batch b = parse_batch_text(j.dump(), "bench.json");
  Conversion cv = convert(b);
  ExecOptions o;
  o.full = true;
  o.threads = threads;
  ExecPlan plan = make_exec_plan(b, cv, o);
  auto backend = make_cpu_backend();
  double best_att = 1e30, best_ref = 1e30, best_total = 1e30, att_macs = 0, ref_macs = 0, cpu = 0;
  for (int i = 0; i < repeats; ++i) {
    const double c0 = cpu_seconds();
    auto t0 = Clock::now();
    ExecResult r = backend->run(plan, o);
    const double total = seconds_since(t0);
    if (!r.violations.empty()) std::fprintf(stderr, "unexpected violation in %s: %s\n", s.name.c_str(), r.violations.front().message.c_str());
    best_total = std::min(best_total, total);
    best_att = std::min(best_att, stage_ms(r, Stage::attention) / 1e3);
    best_ref = std::min(best_ref, stage_ms(r, Stage::result) / 1e3);
    const StageFacts* attention = stage_facts(r, Stage::attention);
    const StageFacts* result = stage_facts(r, Stage::result);
    att_macs = attention ? attention->engine.macs.value_or(0) : 0;
    ref_macs = result ? result->reference_macs.value_or(0) : 0;
    cpu = cpu_seconds() - c0;
  }
  const double rows = double(cu.back());
  nlohmann::json out = {{"shape", s.name},
                        {"tokens", cu.back()},
                        {"heads", s.H},
                        {"kv_heads", s.Hk},
                        {"head_dim", s.D},
                        {"causal", s.causal},
                        {"dtype", s.dtype},
                        {"rotary", s.rotary},
                        {"threads", threads},
                        {"attention_s", best_att},
                        {"attention_rows_per_s", rows / best_att},
                        {"attention_gflops", 2.0 * att_macs / best_att / 1e9},
                        {"reference_s", best_ref},
                        {"reference_gflops", 2.0 * ref_macs / best_ref / 1e9},
                        {"total_s", best_total},
                        {"cpu_s_last_run", cpu}};
  std::printf("  %-34s threads %d  attention %7.3f s  %9.0f rows/s  %6.2f GFLOP/s   reference %7.3f s  %6.2f GFLOP/s  total %7.3f s\n",
              s.name.c_str(), threads, best_att, rows / best_att, 2.0 * att_macs / best_att / 1e9, best_ref,
              2.0 * ref_macs / best_ref / 1e9, best_total);
  std::fflush(stdout);
  return out;
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The kernels alone, one thread, thread CPU time: 2 x 1024 causal tokens.
nlohmann::json kernel_case(int64_t H, int64_t Hk, int64_t D) {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", H}, {"num_kv_heads", Hk}, {"head_dim", D}}},
                      {"varlen", {{"cu_seqlens_q", {0, 1024, 2048}}, {"max_seqlen_q", 1024}}}};
  Batch b = parse_batch_text(j.dump(), "bench.json");
  ExecOptions o;
  o.full = true;
  o.threads = 1;
  ExecPlan p = make_exec_plan(b, convert(b), o);
  const int64_t nq = 2048 * H * D, nk = 2048 * Hk * D;
  std::vector<float> q(static_cast<size_t>(nq)), k(static_cast<size_t>(nk)), v(static_cast<size_t>(nk)),
      out(static_cast<size_t>(nq)), lse(static_cast<size_t>(H * 2048));
  for (int64_t i = 0; i < nq; ++i) q[static_cast<size_t>(i)] = num::input_value(1, num::InputTensor::q, static_cast<uint64_t>(i), ElemType::bf16);
  for (int64_t i = 0; i < nk; ++i) {
    k[static_cast<size_t>(i)] = num::input_value(1, num::InputTensor::k, static_cast<uint64_t>(i), ElemType::bf16);
    v[static_cast<size_t>(i)] = num::input_value(1, num::InputTensor::v, static_cast<uint64_t>(i), ElemType::bf16);
  }
  std::vector<uint8_t> checkable(2048, 1);
  double best_a = 1e30, best_r = 1e30, macs_a = 0, macs_r = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = thread_cpu_seconds();
    const cpu::AttentionResult a = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 1);
    const double t1 = thread_cpu_seconds();
    ref::ReferenceResult r = ref::reference_compare(p, q.data(), k.data(), v.data(), out.data(), checkable, 1);
    const double t2 = thread_cpu_seconds();
    best_a = std::min(best_a, t1 - t0);
    best_r = std::min(best_r, t2 - t1);
    macs_a = a.macs;
    macs_r = r.macs;
  }
  std::printf("  2x1024 causal H%lld/%lld D%lld bf16: attention %.3f s, %.1f GFLOP/s per core; reference (fp64) %.3f s, %.1f GFLOP/s per core\n",
              static_cast<long long>(H), static_cast<long long>(Hk), static_cast<long long>(D), best_a, 2 * macs_a / best_a / 1e9, best_r,
              2 * macs_r / best_r / 1e9);
  return {{"shape", "2x1024 causal"}, {"heads", H}, {"kv_heads", Hk}, {"head_dim", D},
          {"attention_cpu_s", best_a}, {"attention_gflops_per_core", 2 * macs_a / best_a / 1e9},
          {"attention_rows_per_s_per_core", 2048.0 / best_a},
          {"reference_cpu_s", best_r}, {"reference_gflops_per_core", 2 * macs_r / best_r / 1e9}};
}

// 1M tokens: B rows of S padded tokens, lengths between S/2 and S, right padding.
nlohmann::json static_case(const std::filesystem::path& dir, int64_t B, int64_t S, int threads, bool with_dynamic = true) {
  std::filesystem::create_directories(dir);
  IntTensor mask;
  mask.shape = {B, S};
  mask.dtype = DType::int8;
  mask.values.assign(static_cast<size_t>(B * S), 0);
  IntTensor cu;
  cu.shape = {B + 1};
  cu.dtype = DType::int32;
  cu.values.push_back(0);
  uint64_t x = 12345;
  int64_t mx = 0;
  for (int64_t r = 0; r < B; ++r) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t len = S / 2 + static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(S / 2 + 1));
    for (int64_t c = 0; c < len; ++c) mask.values[static_cast<size_t>(r * S + c)] = 1;
    cu.values.push_back(cu.values.back() + len);
    mx = std::max(mx, len);
  }
  {
    std::ofstream(dir / "mask.npy", std::ios::binary) << make_npy(mask);
    std::ofstream(dir / "cu_seqlens.npy", std::ios::binary) << make_npy(cu);
  }
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"name", "padded-1m"},
                      {"model", {{"num_heads", 2}, {"num_kv_heads", 1}, {"head_dim", 64}}},
                      {"batch", {{"attention_mask", {{"file", "mask.npy"}}}}},
                      {"varlen", {{"cu_seqlens_file", "cu_seqlens.npy"}, {"max_seqlen_q", mx}}}};
  std::ofstream(dir / "batch.json") << j.dump();

  // static: load (.npy parse, intent), convert, static checks, report
  double best_load = 1e30, best_static = 1e30;
  Batch b;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    b = load_batch_file(dir / "batch.json");
    best_load = std::min(best_load, seconds_since(t0));
    t0 = Clock::now();
    CheckOptions o;
    o.backend = BackendChoice::none;
    Report rep = diagnose(b, o, "batch.json").report;
    best_static = std::min(best_static, seconds_since(t0));
  }
  const double tokens = double(cu.values.back());
  std::printf("  static: %lld rows x %lld = %lld padded tokens (%lld real): load %.3f s, convert + static checks %.3f s, %.1f M tokens/s\n",
              static_cast<long long>(B), static_cast<long long>(S), static_cast<long long>(B * S),
              static_cast<long long>(cu.values.back()), best_load, best_static, double(B * S) / (best_load + best_static) / 1e6);

  if (!with_dynamic)
    return {{"padded_tokens", B * S}, {"rows", B}, {"width", S}, {"load_s", best_load}, {"convert_static_s", best_static},
            {"tokens_per_s", double(B * S) / (best_load + best_static)}};
  // dynamic at the default budget on the same batch (sampled)
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  o.exec.threads = threads;
  auto t0 = Clock::now();
  Report rep = diagnose(b, o, "batch.json").report;
  const double dyn = seconds_since(t0);
  double checked = 0, total = 0;
  for (const auto& s : rep.stages)
    if (s.name == Stage::result) {
      checked = static_cast<double>(s.facts.rows_checked.value_or(0));
      total = static_cast<double>(s.facts.rows_total.value_or(0));
    }
  std::printf("  budget: dynamic stages at the default --budget on the same batch: %.3f s, %g of %g rows checked, status %s\n", dyn,
              checked, total, rep.status().c_str());
  return {{"padded_tokens", B * S},
          {"real_tokens", tokens},
          {"rows", B},
          {"width", S},
          {"load_s", best_load},
          {"convert_static_s", best_static},
          {"tokens_per_s", double(B * S) / (best_load + best_static)},
          {"dynamic_default_budget_s", dyn},
          {"dynamic_rows_checked", checked},
          {"dynamic_rows_total", total}};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, static_scaling = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string out_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out_file = argv[++i];
    else if (a == "--static-scaling") static_scaling = true;
  }
  if (static_scaling) {
      // load + convert + static checks against tokens: padded batches of 4096-wide rows from
      // 2^14 to 2^23 tokens (the linear-growth chart of bench/results/cpu-static-scaling-*.md)
      const auto dir = std::filesystem::temp_directory_path() / "attn-doctor-bench-scaling";
      nlohmann::json rows = nlohmann::json::array();
      std::printf("static path against tokens (best of 3; load = JSON + .npy, static = intent + replay + checks):\n");
      for (int64_t B = 4; B <= 2048; B *= 2) {
        nlohmann::json r = static_case(dir, B, 4096, threads, false);
        std::printf("  %9lld tokens  load %8.4f s  static %8.4f s  total %8.4f s  %6.1f M tokens/s\n",
                    static_cast<long long>(B * 4096), r["load_s"].get<double>(), r["convert_static_s"].get<double>(),
                    r["load_s"].get<double>() + r["convert_static_s"].get<double>(), r["tokens_per_s"].get<double>() / 1e6);
        rows.push_back(r);
      }
      nlohmann::json out = {{"static_scaling", rows}, {"loadavg", loadavg()}};
      if (!out_file.empty()) std::ofstream(out_file) << out.dump(2) << "\n";
      return 0;
    }
  std::vector<Shape> shapes = {
      {"4x1024 H16/4 D128 bf16 causal", 16, 4, 128, {1024, 1024, 1024, 1024}, true, "bf16", false},
      {"4x1024 H16/4 D128 bf16 causal rope", 16, 4, 128, {1024, 1024, 1024, 1024}, true, "bf16", true},
      {"2x2048 H8/8 D64 fp16 non-causal", 8, 8, 64, {2048, 2048}, false, "fp16", false},
      {"64x96 H32/8 D128 bf16 causal", 32, 8, 128, std::vector<int64_t>(64, 96), true, "bf16", false},
      {"1x4096 H8/2 D256 bf16 causal", 8, 2, 256, {4096}, true, "bf16", false},
  };
  if (quick) shapes.resize(1);
  nlohmann::json results = {{"dynamic", nlohmann::json::array()}, {"threads", threads}, {"loadavg_start", loadavg()}};
  std::printf("load average at start: %s (other processes share these cores)\n", loadavg().c_str());
  std::printf("kernels (one thread, thread CPU time, best of 3):\n");
  results["kernels"] = nlohmann::json::array();
  for (int64_t D : quick ? std::vector<int64_t>{128} : std::vector<int64_t>{64, 128, 256}) results["kernels"].push_back(kernel_case(16, 4, D));
  std::printf("dynamic path (every row computed, best of 2, wall clock):\n");
  for (const Shape& s : shapes) {
    results["dynamic"].push_back(dynamic_case(s, 1, quick ? 1 : 2));
    if (threads > 1) results["dynamic"].push_back(dynamic_case(s, threads, quick ? 1 : 2));
  }
  std::printf("static path (1M-token padded batch from .npy):\n");
  const auto dir = std::filesystem::temp_directory_path() / "attn-doctor-bench";
  results["static"] = quick ? static_case(dir, 64, 4096, threads) : static_case(dir, 256, 4096, threads);
  results["loadavg_end"] = loadavg();
  std::printf("load average at end: %s\n", loadavg().c_str());
  if (!out_file.empty()) std::ofstream(out_file) << results.dump(2) << "\n";
  return 0;
}
