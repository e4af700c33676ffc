// GPU tests of the checked kernels against simple host references (fp64 attention, the
// rotary formula, plain row copies), and of what the checked forms record when an access
// would be out of bounds. Tagged [cuda]; without a device (or without CUDA in the build)
// each test prints "SKIPPED: <reason>" and ctest reports it skipped, never passed.
#include <catch2/catch.hpp>

#ifndef ATTN_DOCTOR_WITH_CUDA

TEST_CASE("cuda: kernels (not built)", "[cuda]") {
  WARN("SKIPPED: this attn-doctor was built without CUDA (ATTN_DOCTOR_CUDA=OFF or no nvcc)");
}

#else

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "contract/rotary.hpp"
#include "exec/cuda/device.hpp"
#include "cuda_test_util.hpp"
#include "launch.hpp"
#include "tma_maps.hpp"

using namespace ad;
using namespace cuda_test;
using ad::Checks;
using ad::ElemType;

namespace {

// K and V roles stay distinct through the wgmma kernel: its Q·Kᵀ product takes a
// SmemTile<KeyRole> and its P·V product a SmemTile<ValueRole> (kernels/sm90a/), filled by
// PipelineParams of the same role; neither converts into the other.
static_assert(!std::is_convertible_v<kern::SmemTile<kern::KeyRole, uint16_t>, kern::SmemTile<kern::ValueRole, uint16_t>>);
static_assert(!std::is_convertible_v<kern::SmemTile<kern::ValueRole, uint16_t>, kern::SmemTile<kern::KeyRole, uint16_t>>);
static_assert(!std::is_convertible_v<kern::KeyPipelineParams, kern::ValuePipelineParams>);

// The tensor-core kernels this device runs for a bf16/fp16 call of this head dim and block_m:
// the mma.sync kernel everywhere, the wgmma kernel (head dims 64, 128, 192 with 128-row
// tiles) on compute capability 9.0 when the build carries sm_90a.
struct TcKernel {
  kern::AttnKernel which;
  const char* name;
};
std::vector<TcKernel> tensor_core_kernels(int head_dim = 64, int block_m = 128) {
  std::vector<TcKernel> ks = {{kern::AttnKernel::tensor_core, "mma.sync"}};
  kern::VarlenFwdParams probe;
  probe.elem = ElemType::bf16;
  probe.head_dim = head_dim;
  probe.block_m = block_m;
  if (kern::varlen_fwd_has_wgmma_path(probe)) ks.push_back({kern::AttnKernel::wgmma, "wgmma"});
  return ks;
}
// The warp-specialised wgmma kernel where the device and build have it (head dim 128 with
// 128-row tiles): the launcher's choice there; the checked form's second launch is the wgmma
// kernel's.
std::vector<TcKernel> ws_kernels(int head_dim = 128, int block_m = 128) {
  kern::VarlenFwdParams probe;
  probe.elem = ElemType::bf16;
  probe.head_dim = head_dim;
  probe.block_m = block_m;
  if (!(head_dim == 128 && kern::varlen_fwd_has_wgmma_path(probe))) return {};
  return {{kern::AttnKernel::wgmma_ws, "wgmma_ws"}};
}

// ---- attention fixture -------------------------------------------------------------------

struct AttnSpec {
  ElemType elem = ElemType::bf16;
  int heads = 4, heads_k = 4, head_dim = 64;
  std::vector<int32_t> cu_q, cu_k;  // as passed to the kernel
  int64_t rows_q = -1, rows_k = -1; // buffer rows (default: cu[-1])
  int64_t claimed_rows_k = 0;       // > 0: the rows k and v claim in the params (the segments read only those held)
  int max_seqlen_q = -1, max_seqlen_k = -1;  // default: the longest segment
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  uint32_t seed = 1;
  int block_m = 128;  // FA2's kBlockM (64: head dim 256 on an H100)
};

struct AttnRun {
  std::vector<float> out;         // (rows_q, H, D), NaN where unwritten
  std::vector<float> lse;         // (H, rows_q)
  std::vector<uint32_t> row_writes;
  AccessRecord record;
  std::string kernel;
};

struct AttnCase {
  AttnSpec spec;
  HostTensor q, k, v;
  int64_t rows_q = 0, rows_k = 0;

  explicit AttnCase(AttnSpec s) : spec(std::move(s)) {
    complete_spec(spec, rows_q, rows_k);
    std::mt19937 rng(spec.seed);
    q = random_tensor(size_t(rows_q) * spec.heads * spec.head_dim, spec.elem, rng);
    k = random_tensor(size_t(rows_k) * spec.heads_k * spec.head_dim, spec.elem, rng);
    v = random_tensor(size_t(rows_k) * spec.heads_k * spec.head_dim, spec.elem, rng);
  }

  // detail_order: run the checked form in detail mode for the access with that launch-order
  // key (what the backend's second launch does), instead of counting.
  AttnRun run(Checks checks, kern::AttnKernel which = kern::AttnKernel::automatic,
              std::optional<uint64_t> detail_order = std::nullopt) const {
    cuda::DeviceBuffer<unsigned char> dq(q.bytes), dk(k.bytes), dv(v.bytes);
    cuda::DeviceBuffer<unsigned char> dout(q.bytes.size());
    cuda::DeviceBuffer<float> dlse{size_t(rows_q) * spec.heads};
    cuda::DeviceBuffer<uint32_t> dwrites{size_t(rows_q)};
    cuda::DeviceBuffer<int32_t> dcu_q(spec.cu_q), dcu_k(spec.cu_k);
    kern::launch_fill_nan(dout.get(), int64_t(q.values.size()), spec.elem);
    kern::launch_fill_f32(dlse.get(), int64_t(dlse.size()), std::numeric_limits<float>::quiet_NaN());
    dwrites.fill_bytes(0);
    kern::VarlenFwdParams p;
    p.elem = spec.elem;
    p.q = {dq.get(), rows_q, spec.heads};
    const int64_t kv_rows = spec.claimed_rows_k > 0 ? spec.claimed_rows_k : rows_k;
    p.k = {dk.get(), kv_rows, spec.heads_k};
    p.v = {dv.get(), kv_rows, spec.heads_k};
    p.out = {dout.get(), rows_q, spec.heads};
    p.lse = dlse.get();
    p.lse_size = int64_t(dlse.size());
    p.row_writes = checks == Checks::checked ? dwrites.get() : nullptr;
    p.row_writes_size = rows_q;
    p.cu_seqlens_q = {dcu_q.get(), int64_t(spec.cu_q.size())};
    p.cu_seqlens_k = {dcu_k.get(), int64_t(spec.cu_k.size())};
    p.batch = int32_t(spec.cu_q.size()) - 1;
    p.num_heads = spec.heads;
    p.num_heads_k = spec.heads_k;
    p.head_dim = spec.head_dim;
    p.block_m = spec.block_m;
    p.max_seqlen_q = spec.max_seqlen_q;
    p.max_seqlen_k = spec.max_seqlen_k;
    p.softmax_scale = float(1.0 / std::sqrt(double(spec.head_dim)));
    p.softcap = spec.softcap;
    p.causal = spec.causal;
    p.window_left = spec.window_left;
    p.window_right = spec.window_right;
    cuda::RecordSlot slot;
    AttnRun r;
    r.kernel = kern::varlen_fwd_kernel_name(p, checks, which);
    auto outcome = cuda::checked_launch(
        r.kernel, slot,
        [&](AccessRecord* rec) {
          p.record = rec;
          kern::launch_varlen_fwd(p, checks, nullptr, which);
        },
        detail_order ? detail_record(*detail_order) : AccessRecord{});
    r.record = outcome.record;
    r.out = decode(dout.download(), spec.elem);
    r.lse = dlse.download();
    r.row_writes = dwrites.download();
    return r;
  }

  // fp64 attention over each segment with the normalised window (causal: right = 0).
  void reference(std::vector<double>& out, std::vector<double>& lse) const {
    const int H = spec.heads, Hk = spec.heads_k, D = spec.head_dim;
    out.assign(size_t(rows_q) * H * D, std::nan(""));
    lse.assign(size_t(rows_q) * H, std::nan(""));
    const double scale = 1.0 / std::sqrt(double(D));
    const int left = spec.window_left;
    const int right = spec.causal ? 0 : spec.window_right;
    for (size_t b = 0; b + 1 < spec.cu_q.size(); ++b) {
      const int sq = spec.cu_q[b], lq = spec.cu_q[b + 1] - sq;
      const int sk = spec.cu_k[b], lk = spec.cu_k[b + 1] - sk;
      const int computed = std::min(lq, (spec.max_seqlen_q + 127) / 128 * 128);
      for (int h = 0; h < H; ++h) {
        const int hk = h / (H / Hk);
        for (int i = 0; i < computed; ++i) {
          std::vector<double> s;
          std::vector<int> keys;
          for (int j = 0; j < lk; ++j) {
            if (right >= 0 && j > i + lk - lq + right) continue;
            if (left >= 0 && j < i + lk - lq - left) continue;
            double dot = 0;
            for (int d = 0; d < D; ++d)
              dot += double(q.values[(size_t(sq + i) * H + h) * D + d]) * k.values[(size_t(sk + j) * Hk + hk) * D + d];
            dot *= scale;
            if (spec.softcap > 0) dot = spec.softcap * std::tanh(dot / spec.softcap);
            s.push_back(dot);
            keys.push_back(j);
          }
          double* o = &out[(size_t(sq + i) * H + h) * D];
          if (keys.empty()) {
            for (int d = 0; d < D; ++d) o[d] = 0;
            lse[size_t(h) * rows_q + sq + i] = std::numeric_limits<double>::infinity();
            continue;
          }
          const double mx = *std::max_element(s.begin(), s.end());
          double sum = 0;
          for (double& x : s) sum += (x = std::exp(x - mx));
          for (int d = 0; d < D; ++d) {
            double acc = 0;
            for (size_t t = 0; t < keys.size(); ++t) acc += s[t] * v.values[(size_t(sk + keys[t]) * Hk + hk) * D + d];
            o[d] = acc / sum;
          }
          lse[size_t(h) * rows_q + sq + i] = mx + std::log(sum);
        }
      }
    }
  }
};

// Largest per-row relative error ||o - ref|| / ||ref|| over rows the reference computed,
// and whether NaN-ness agrees everywhere (unwritten rows must stay NaN).
struct Compare {
  double worst = 0;
  int64_t nan_mismatch = 0;
  double worst_lse = 0;
};

Compare compare(const AttnCase& c, const AttnRun& run) {
  std::vector<double> ref, ref_lse;
  c.reference(ref, ref_lse);
  Compare cmp;
  const int D = c.spec.head_dim;
  for (size_t row = 0; row < ref.size() / size_t(D); ++row) {
    double num = 0, den = 0;
    bool ref_nan = std::isnan(ref[row * D]);
    bool out_nan = false;
    for (int d = 0; d < D; ++d) {
      out_nan |= std::isnan(run.out[row * D + d]);
      if (!ref_nan) {
        num += (run.out[row * D + d] - ref[row * D + d]) * (run.out[row * D + d] - ref[row * D + d]);
        den += ref[row * D + d] * ref[row * D + d];
      }
    }
    if (ref_nan != out_nan) {
      ++cmp.nan_mismatch;
      continue;
    }
    if (!ref_nan) cmp.worst = std::max(cmp.worst, den > 0 ? std::sqrt(num / den) : std::sqrt(num));
  }
  for (size_t i = 0; i < ref_lse.size(); ++i) {
    if (std::isnan(ref_lse[i]) || std::isinf(ref_lse[i])) {
      if (std::isinf(ref_lse[i]) && !std::isinf(run.lse[i])) ++cmp.nan_mismatch;
      continue;
    }
    cmp.worst_lse = std::max(cmp.worst_lse, std::abs(run.lse[i] - ref_lse[i]) / std::max(1.0, std::abs(ref_lse[i])));
  }
  return cmp;
}

// Broken calls whose records the checked kernels are compared on.
struct Broken {
  const char* what;
  int head_dim;
  bool causal;
  int left, right;
  std::vector<int32_t> cu_q, cu_k;
  int64_t rows_q, rows_k;
};
std::vector<Broken> broken_calls() {
  return {
    {"cu_seqlens_q past q/out", 128, false, -1, -1, {0, 100, 300}, {0, 100, 300}, 200, 300},
    {"cu_seqlens_k past k/v", 64, false, -1, -1, {0, 100, 300}, {0, 150, 420}, 300, 333},
    {"cu_seqlens_k past k/v, causal", 128, true, -1, -1, {0, 260, 600}, {0, 300, 700}, 600, 610},
    {"cu_seqlens_k past k/v, window", 64, false, 40, 7, {0, 260, 600}, {0, 300, 700}, 600, 555},
    {"negative q start", 64, false, -1, -1, {-16, 48, 128}, {0, 64, 144}, 128, 144},
    {"negative k start", 128, true, -1, -1, {0, 64, 144}, {-40, 64, 144}, 144, 144},
    {"d192: cu_seqlens_q past q/out", 192, false, -1, -1, {0, 100, 300}, {0, 100, 300}, 200, 300},
    {"d192: cu_seqlens_k past k/v, causal", 192, true, -1, -1, {0, 260, 600}, {0, 300, 700}, 600, 610},
    {"d192: cu_seqlens_k past k/v, window", 192, false, 40, 7, {0, 260, 600}, {0, 300, 700}, 600, 555},
    {"d192: negative k start", 192, true, -1, -1, {0, 64, 144}, {-40, 64, 144}, 144, 144},
  };
}

double tolerance(ElemType t) { return t == ElemType::fp16 ? 4e-3 : t == ElemType::bf16 ? 2e-2 : 1e-5; }

}  // namespace

TEST_CASE("cuda: varlen forward matches fp64 attention", "[cuda]") {
  if (!have_device()) return;
  struct Config {
    const char* what;
    ElemType elem;
    int heads, heads_k, head_dim;
    bool causal;
    int left, right;
    float softcap;
    std::vector<int32_t> cu_q, cu_k;
    int block_m = 128;
  };
  const std::vector<Config> configs = {
      {"bf16 d64 causal", ElemType::bf16, 4, 4, 64, true, -1, -1, 0.f, {0, 1, 130, 300, 557}, {}},
      {"bf16 d128 non-causal", ElemType::bf16, 4, 4, 128, false, -1, -1, 0.f, {0, 77, 77, 333, 600}, {}},
      {"bf16 d128 causal gqa", ElemType::bf16, 8, 2, 128, true, -1, -1, 0.f, {0, 200, 329, 700}, {}},
      {"fp16 d64 window", ElemType::fp16, 4, 2, 64, false, 37, 5, 0.f, {0, 150, 420}, {}},
      {"fp16 d128 causal softcap", ElemType::fp16, 2, 2, 128, true, -1, -1, 30.f, {0, 129, 390}, {}},
      {"bf16 d64 cross lengths", ElemType::bf16, 4, 4, 64, true, -1, -1, 0.f, {0, 60, 100}, {0, 200, 230}},
      {"bf16 d128 kv shorter", ElemType::bf16, 2, 1, 128, true, -1, -1, 0.f, {0, 300, 310}, {0, 100, 400}},
      {"bf16 d96 causal gqa", ElemType::bf16, 4, 2, 96, true, -1, -1, 0.f, {0, 70, 250}, {}},
      {"fp32 d32 generic", ElemType::fp32, 2, 2, 32, false, 3, 3, 0.f, {0, 40, 41, 90}, {}},
      {"bf16 d256 causal softcap", ElemType::bf16, 2, 2, 256, true, -1, -1, 5.f, {0, 33, 170}, {}},
      {"fp16 d96 window", ElemType::fp16, 4, 4, 96, false, 37, 5, 0.f, {0, 1, 130, 300, 557}, {}},
      {"bf16 d96 kv shorter", ElemType::bf16, 2, 1, 96, true, -1, -1, 0.f, {0, 300, 310}, {0, 100, 400}},
      {"bf16 d192 causal gqa", ElemType::bf16, 8, 2, 192, true, -1, -1, 0.f, {0, 200, 329, 700}, {}},
      {"fp16 d192 softcap cross lengths", ElemType::fp16, 2, 2, 192, false, -1, -1, 20.f, {0, 60, 100}, {0, 200, 230}},
      {"bf16 d192 window", ElemType::bf16, 4, 2, 192, false, 40, 7, 0.f, {0, 77, 77, 333, 600}, {}},
      {"fp16 d256 non-causal gqa", ElemType::fp16, 4, 2, 256, false, -1, -1, 0.f, {0, 77, 77, 333, 600}, {}},
      {"bf16 d256 causal, 64-row tiles", ElemType::bf16, 4, 2, 256, true, -1, -1, 0.f, {0, 1, 130, 300, 557}, {}, 64},
      {"fp16 d256 window, 64-row tiles", ElemType::fp16, 2, 2, 256, false, 37, 5, 0.f, {0, 150, 420}, {}, 64},
  };
  for (const Config& cfg : configs) {
    DYNAMIC_SECTION(cfg.what) {
      AttnSpec s;
      s.elem = cfg.elem, s.heads = cfg.heads, s.heads_k = cfg.heads_k, s.head_dim = cfg.head_dim;
      s.causal = cfg.causal, s.window_left = cfg.left, s.window_right = cfg.right, s.softcap = cfg.softcap;
      s.cu_q = cfg.cu_q, s.cu_k = cfg.cu_k, s.block_m = cfg.block_m;
      const AttnCase c(s);
      // The automatic choice, then each tensor-core kernel by name where the shape has one
      // (on an H200: wgmma and the mma.sync fallback both checked against fp64; head dims 96
      // and 256: mma.sync only), then the generic kernel.
      std::vector<kern::AttnKernel> kernels = {kern::AttnKernel::automatic};
      if (cfg.elem == ElemType::bf16 || cfg.elem == ElemType::fp16)
        for (const TcKernel& k : tensor_core_kernels(cfg.head_dim, cfg.block_m)) kernels.push_back(k.which);
      if (cfg.elem == ElemType::bf16 || cfg.elem == ElemType::fp16)
        for (const TcKernel& k : ws_kernels(cfg.head_dim, cfg.block_m)) kernels.push_back(k.which);
      kernels.push_back(kern::AttnKernel::generic);
      for (const kern::AttnKernel which : kernels) {
        const AttnRun run = c.run(Checks::checked, which);
        INFO(run.kernel);
        if (which == kern::AttnKernel::automatic && cfg.elem != ElemType::fp32)
          CHECK(run.kernel.find("generic") == std::string::npos);  // every bf16/fp16 head dim here has a tensor-core kernel
        CHECK(run.record.count == 0);
        const Compare cmp = compare(c, run);
        CHECK(cmp.nan_mismatch == 0);
        CHECK(cmp.worst < tolerance(cfg.elem));
        CHECK(cmp.worst_lse < 1e-3);
        for (size_t i = 0; i < run.row_writes.size(); ++i) {
          INFO("row " << i);
          REQUIRE(run.row_writes[i] == 1u);
        }
      }
    }
  }
}

TEST_CASE("cuda: checked, unchecked and generic forms compute the same output", "[cuda]") {
  if (!have_device()) return;
  for (const auto& [d, bm] :
       std::initializer_list<std::pair<int, int>>{{64, 128}, {96, 128}, {128, 128}, {192, 128}, {256, 128}, {256, 64}}) {
    INFO("head_dim " << d << " block_m " << bm);
    AttnSpec s;
    s.head_dim = d, s.heads = 4, s.heads_k = 2, s.causal = true, s.block_m = bm;
    s.cu_q = {0, 513, 700, 1400};
    const AttnCase c(s);
    const AttnRun automatic = c.run(Checks::checked);
    // On compute capability 9.0 with sm_90a in the build the Hopper kernel is the default
    // (head dims 64, 128 and 192; 96 and 256 run the mma.sync kernel there too).
    std::vector<TcKernel> tcs = tensor_core_kernels(d, bm);
    const bool hopper = tcs.size() > 1;
    for (const TcKernel& k : ws_kernels(d, bm)) tcs.push_back(k);
    CHECK((!hopper || d == 64 || d == 128 || d == 192));
    INFO(automatic.kernel);
    REQUIRE(automatic.kernel.find(hopper ? "wgmma" : "tc") != std::string::npos);
    const AttnRun generic = c.run(Checks::checked, kern::AttnKernel::generic);
    for (const TcKernel& k : tcs) {
      INFO(k.name);
      const AttnRun checked = c.run(Checks::checked, k.which);
      const AttnRun unchecked = c.run(Checks::unchecked, k.which);
      CHECK(checked.record.count == 0);
      bool identical = true;
      for (size_t i = 0; i < checked.out.size(); ++i)
        if (!(checked.out[i] == unchecked.out[i])) identical = false;
      CHECK(identical);  // the checks change no arithmetic
      // every CTA ran in the checked form's first launch (the unchecked body): it counts the
      // rows it writes as the checked body does
      CHECK(checked.row_writes == generic.row_writes);
      double worst = 0;
      for (size_t i = 0; i < checked.out.size(); ++i)
        worst = std::max(worst, double(std::abs(checked.out[i] - generic.out[i])));
      CHECK(worst < 3e-2);
    }
    // The other warp layout / tile shape, when this build carries it
    // (ATTN_DOCTOR_TC_BOTH_SHAPES, ATTN_DOCTOR_WGMMA_ALT) and the device runs it.
    for (const kern::AttnKernel alt_kernel : {kern::AttnKernel::tensor_core_alt, kern::AttnKernel::wgmma_alt}) {
      try {
        const AttnRun alt = c.run(Checks::checked, alt_kernel);
        INFO(alt.kernel);
        const Compare cmp = compare(c, alt);
        CHECK(alt.record.count == 0);
        CHECK(cmp.nan_mismatch == 0);
        CHECK(cmp.worst < tolerance(ElemType::bf16));
        const AttnRun alt_unchecked = c.run(Checks::unchecked, alt_kernel);
        bool identical = true;
        for (size_t i = 0; i < alt.out.size(); ++i)
          if (!(alt.out[i] == alt_unchecked.out[i])) identical = false;
        CHECK(identical);
      } catch (const cuda::LaunchConfigError&) {
      }
    }
  }
}

// The warp-specialised wgmma kernel (head dim 128; a device and build with the wgmma kernel
// only), with and without ping-pong: the fp64 reference on the forward's head-dim-128 calls
// (masks, softcap, GQA, cross lengths, empty segments, key ranges shorter than a tile), the
// wgmma kernel's output (same GEMM shapes, softmax and key order), and its checked form.
TEST_CASE("cuda: the warp-specialised wgmma forward matches fp64 attention", "[cuda]") {
  if (!have_device()) return;
  kern::VarlenFwdParams probe;
  probe.elem = ElemType::bf16, probe.head_dim = 128, probe.block_m = 128;
  if (!kern::varlen_fwd_has_wgmma_path(probe)) return;
  struct Config {
    const char* what;
    ElemType elem;
    int heads, heads_k;
    bool causal;
    int left, right;
    float softcap;
    std::vector<int32_t> cu_q, cu_k;
  };
  const std::vector<Config> configs = {
      {"bf16 non-causal", ElemType::bf16, 4, 4, false, -1, -1, 0.f, {0, 77, 77, 333, 600}, {}},
      {"bf16 causal gqa", ElemType::bf16, 8, 2, true, -1, -1, 0.f, {0, 200, 329, 700}, {}},
      {"fp16 causal softcap", ElemType::fp16, 2, 2, true, -1, -1, 30.f, {0, 129, 390}, {}},
      {"bf16 kv shorter", ElemType::bf16, 2, 1, true, -1, -1, 0.f, {0, 300, 310}, {0, 100, 400}},
      {"bf16 window", ElemType::bf16, 4, 2, false, 40, 7, 0.f, {0, 1, 130, 300, 557}, {}},
      {"fp16 long keys", ElemType::fp16, 2, 2, false, -1, -1, 0.f, {0, 100, 1200}, {0, 1500, 1700}},
      {"bf16 many tiles causal", ElemType::bf16, 2, 2, true, -1, -1, 0.f, {0, 1000, 2100}, {}},
  };
  for (const Config& cfg : configs) {
    DYNAMIC_SECTION(cfg.what) {
      AttnSpec s;
      s.elem = cfg.elem, s.heads = cfg.heads, s.heads_k = cfg.heads_k, s.head_dim = 128;
      s.causal = cfg.causal, s.window_left = cfg.left, s.window_right = cfg.right, s.softcap = cfg.softcap;
      s.cu_q = cfg.cu_q, s.cu_k = cfg.cu_k;
      const AttnCase c(s);
      std::vector<kern::AttnKernel> kernels = {kern::AttnKernel::wgmma_ws};
      if (cfg.elem == ElemType::bf16) kernels.push_back(kern::AttnKernel::wgmma_ws_alt);
      const AttnRun old = c.run(Checks::unchecked, kern::AttnKernel::wgmma);
      for (const kern::AttnKernel which : kernels) {
        const AttnRun run = c.run(Checks::unchecked, which);
        INFO(run.kernel);
        REQUIRE(run.kernel.find("wgmma_ws") != std::string::npos);
        const Compare cmp = compare(c, run);
        CHECK(cmp.nan_mismatch == 0);
        CHECK(cmp.worst < tolerance(cfg.elem));
        CHECK(cmp.worst_lse < 1e-3);
        double worst = 0;
        for (size_t i = 0; i < run.out.size(); ++i)
          if (!std::isnan(old.out[i])) worst = std::max(worst, double(std::abs(run.out[i] - old.out[i])));
        CHECK(worst < 1e-2);
        // the checked form (every CTA in bounds here: its first launch runs them all) computes
        // the same bits, records nothing and counts every row once
        const AttnRun checked = c.run(Checks::checked, which);
        CHECK(checked.record.count == 0);
        bool identical = true;
        for (size_t i = 0; i < run.out.size(); ++i)
          if (!(run.out[i] == checked.out[i] || (std::isnan(run.out[i]) && std::isnan(checked.out[i])))) identical = false;
        CHECK(identical);
        for (size_t i = 0; i < checked.row_writes.size(); ++i) {
          INFO("row " << i);
          REQUIRE(checked.row_writes[i] == 1u);
        }
      }
    }
  }
}

// The checked form's first launch loads its whole tiles with the tensor memory accelerator
// where the operand's map encodes (tma_operand_ok) and with cp.async where it does not: the
// encoder takes aligned operands and refuses a base off 16 bytes or rows past the signed 32-bit
// coordinates; a call whose k and v claim 2^31 rows (the segments read only the rows held)
// runs its in-bounds CTAs on the cp.async loads and computes the bits the unchecked kernel does.
TEST_CASE("cuda: the warp-specialised forward loads by cp.async where a tensor map cannot describe the operand",
          "[cuda]") {
  if (!have_device()) return;
  if (ws_kernels().empty()) {
    WARN("SKIPPED: this device or build has no warp-specialised wgmma kernel");
    return;
  }
  cuda::DeviceBuffer<unsigned char> buf{size_t(4096)};  // never read: encoding reads no tensor
  unsigned char* fake = buf.get();
  kern::VarlenFwdParams p;
  p.elem = ElemType::bf16, p.head_dim = 128;
  p.q = {fake, 1000, 4};
  p.k = {fake, int64_t(1) << 31, 2};
  p.v = {fake + 8, 1000, 2};
  const kern::FwdTmaMaps maps = kern::fwd_tma_maps(p);
  CHECK(maps.has_q == ATTN_DOCTOR_FWD_TMA);
  CHECK(maps.has_k == 0);
  CHECK(maps.has_v == 0);
  p.k.rows = (int64_t(1) << 31) - 1;
  CHECK(kern::fwd_tma_maps(p).has_k == ATTN_DOCTOR_FWD_TMA);

  for (const bool causal : {false, true}) {
    AttnSpec s;
    s.heads = 2, s.heads_k = 2, s.head_dim = 128, s.causal = causal;
    s.cu_q = {0, 1000, 2100};
    s.cu_k = s.cu_q;
    s.claimed_rows_k = int64_t(1) << 31;
    const AttnCase c(s);
    const AttnRun run = c.run(Checks::unchecked, kern::AttnKernel::wgmma_ws);
    const AttnRun checked = c.run(Checks::checked, kern::AttnKernel::wgmma_ws);
    INFO(checked.kernel << (causal ? " causal" : ""));
    CHECK(checked.record.count == 0);
    CHECK(compare(c, checked).worst < tolerance(ElemType::bf16));
    bool identical = true;
    for (size_t i = 0; i < run.out.size(); ++i)
      if (!(run.out[i] == checked.out[i] || (std::isnan(run.out[i]) && std::isnan(checked.out[i])))) identical = false;
    CHECK(identical);
  }
}

// The wgmma kernel reads the rows the mma.sync kernel reads (its key range is computed in the
// mma.sync kernel's key tiles) and goes through the same loaders, so on broken calls both
// refuse and record the same accesses: same count, smallest index and launch-order key, and
// the same details of the first access in launch order (detail mode), the thread aside.
TEST_CASE("cuda: the wgmma and mma.sync kernels record the same violations", "[cuda]") {
  if (!have_device()) return;
  if (tensor_core_kernels().size() < 2) {
    WARN("SKIPPED: this device or build has no wgmma kernel (compute capability 9.0 and sm_90a needed)");
    return;
  }
  const std::vector<Broken> cases = broken_calls();
  for (const Broken& bc : cases) {
    DYNAMIC_SECTION(bc.what) {
      AttnSpec s;
      s.head_dim = bc.head_dim, s.heads = 4, s.heads_k = 2, s.causal = bc.causal;
      s.window_left = bc.left, s.window_right = bc.right;
      s.cu_q = bc.cu_q, s.cu_k = bc.cu_k, s.rows_q = bc.rows_q, s.rows_k = bc.rows_k;
      const AttnCase c(s);
      const AttnRun mma = c.run(Checks::checked, kern::AttnKernel::tensor_core);
      const AttnRun wg = c.run(Checks::checked, kern::AttnKernel::wgmma);
      INFO(cuda::describe(mma.record) << " | " << cuda::describe(wg.record));
      REQUIRE(mma.record.count > 0);
      CHECK(wg.record.count == mma.record.count);
      CHECK(wg.record.min_index == mma.record.min_index);
      CHECK(wg.record.order == mma.record.order);
      // detail mode: the access with the smallest launch-order key, on both kernels
      const AccessRecord dm = c.run(Checks::checked, kern::AttnKernel::tensor_core, mma.record.order).record;
      const AccessRecord dw = c.run(Checks::checked, kern::AttnKernel::wgmma, mma.record.order).record;
      INFO(cuda::describe(dm) << " | " << cuda::describe(dw));
      CHECK(dw.first.buffer == dm.first.buffer);
      CHECK(dw.first.kind == dm.first.kind);
      CHECK(dw.first.index == dm.first.index);
      CHECK(dw.first.bound == dm.first.bound);
      CHECK((dw.first.block[0] == dm.first.block[0] && dw.first.block[1] == dm.first.block[1] &&
             dw.first.block[2] == dm.first.block[2]));
      CHECK(dw.first.segment == dm.first.segment);
      CHECK(dw.first.row == dm.first.row);
      CHECK(dw.first.head == dm.first.head);
      CHECK(dw.first.tile == dm.first.tile);
      // rows inside the buffers are computed alike (within the bf16 tolerance of each other)
      double worst = 0;
      int64_t nan_mismatch = 0;
      for (size_t i = 0; i < mma.out.size(); ++i) {
        if (std::isnan(mma.out[i]) != std::isnan(wg.out[i])) ++nan_mismatch;
        else if (!std::isnan(mma.out[i])) worst = std::max(worst, double(std::abs(mma.out[i] - wg.out[i])));
      }
      CHECK(nan_mismatch == 0);
      CHECK(worst < 3e-2);
      CHECK(wg.row_writes == mma.row_writes);
      // the warp-specialised kernel (head dim 128): its first launch leaves these CTAs to the
      // wgmma kernel's second, which records what the wgmma kernel records
      for (const TcKernel& k : ws_kernels(bc.head_dim)) {
        const AttnRun ws = c.run(Checks::checked, k.which);
        INFO(cuda::describe(ws.record));
        CHECK(ws.record.count == wg.record.count);
        CHECK(ws.record.min_index == wg.record.min_index);
        CHECK(ws.record.order == wg.record.order);
        CHECK(ws.row_writes == wg.row_writes);
        const AccessRecord dws = c.run(Checks::checked, k.which, mma.record.order).record;
        CHECK(dws.first.buffer == dw.first.buffer);
        CHECK(dws.first.index == dw.first.index);
        CHECK(dws.first.row == dw.first.row);
        CHECK(dws.first.tile == dw.first.tile);
        bool same_nan = true;
        double worst_ws = 0;
        for (size_t i = 0; i < wg.out.size(); ++i) {
          if (std::isnan(wg.out[i]) != std::isnan(ws.out[i])) same_nan = false;
          else if (!std::isnan(wg.out[i])) worst_ws = std::max(worst_ws, double(std::abs(wg.out[i] - ws.out[i])));
        }
        CHECK(same_nan);
        CHECK(worst_ws < 1e-2);
      }
    }
  }
}

// The checked forward runs in two launches (kernels/varlen_attention.cuh fwd_cta_in_bounds,
// fwd_checked_fallback): the unchecked body on the CTAs whose accesses all lie in bounds, the
// checked body on the others, as the CTAs of FA2's grid they are. What it writes is what the
// checked body writes on every CTA in one launch: the same record (count, smallest index,
// launch-order key, the detail-mode access), coverage and output. The one-launch form is in a
// build with ATTN_DOCTOR_FWD_ONE_LAUNCH only (the benchmarks'); elsewhere this says so.
TEST_CASE("cuda: the checked forward in two launches writes what it writes in one", "[cuda]") {
  if (!have_device()) return;
  std::vector<Broken> cases = broken_calls();
  cases.push_back({"healthy segments before one past k/v", 128, false, -1, -1, {0, 300, 600, 900},
                   {0, 300, 600, 1000}, 900, 950});
  for (const Broken& bc : cases) {
    for (const TcKernel& k : tensor_core_kernels(bc.head_dim)) {
      DYNAMIC_SECTION(bc.what << " (" << k.name << ")") {
        AttnSpec s;
        s.head_dim = bc.head_dim, s.heads = 4, s.heads_k = 2, s.causal = bc.causal;
        s.window_left = bc.left, s.window_right = bc.right;
        s.cu_q = bc.cu_q, s.cu_k = bc.cu_k, s.rows_q = bc.rows_q, s.rows_k = bc.rows_k;
        const AttnCase c(s);
        const kern::AttnKernel one_launch = k.which == kern::AttnKernel::wgmma ? kern::AttnKernel::wgmma_one_launch
                                                                               : kern::AttnKernel::tensor_core_one_launch;
        AttnRun one;
        try {
          one = c.run(Checks::checked, one_launch);
        } catch (const cuda::LaunchConfigError&) {
          WARN("SKIPPED: this build has no one-launch checked forward (ATTN_DOCTOR_FWD_ONE_LAUNCH)");
          return;
        }
        const AttnRun two = c.run(Checks::checked, k.which);
        INFO(cuda::describe(one.record) << " | " << cuda::describe(two.record));
        REQUIRE(one.record.count > 0);
        CHECK(two.record.count == one.record.count);
        CHECK(two.record.min_index == one.record.min_index);
        CHECK(two.record.order == one.record.order);
        CHECK(two.row_writes == one.row_writes);
        bool same_out = true, same_lse = true;
        for (size_t i = 0; i < one.out.size(); ++i)
          if (!(one.out[i] == two.out[i] || (std::isnan(one.out[i]) && std::isnan(two.out[i])))) same_out = false;
        for (size_t i = 0; i < one.lse.size(); ++i)
          if (!(one.lse[i] == two.lse[i] || (std::isnan(one.lse[i]) && std::isnan(two.lse[i])))) same_lse = false;
        CHECK(same_out);
        CHECK(same_lse);
        const AccessRecord d1 = c.run(Checks::checked, one_launch, one.record.order).record;
        const AccessRecord d2 = c.run(Checks::checked, k.which, one.record.order).record;
        INFO(cuda::describe(d1) << " | " << cuda::describe(d2));
        CHECK(d2.first.buffer == d1.first.buffer);
        CHECK(d2.first.kind == d1.first.kind);
        CHECK(d2.first.index == d1.first.index);
        CHECK(d2.first.bound == d1.first.bound);
        CHECK((d2.first.block[0] == d1.first.block[0] && d2.first.block[1] == d1.first.block[1] &&
               d2.first.block[2] == d1.first.block[2]));
        CHECK(d2.first.segment == d1.first.segment);
        CHECK(d2.first.row == d1.first.row);
        CHECK(d2.first.head == d1.first.head);
        CHECK(d2.first.tile == d1.first.tile);
        CHECK(d2.thread == d1.thread);
      }
    }
  }
}

TEST_CASE("cuda: an overshooting cu_seqlens is recorded as attention.access, never performed", "[cuda]") {
  if (!have_device()) return;
  for (const int d : {128, 96, 192, 256}) {
    DYNAMIC_SECTION("head_dim " << d) {
      AttnSpec s;
      s.head_dim = d, s.heads = 2, s.heads_k = 2;
      s.cu_q = {0, 100, 300};
      s.rows_q = 200;  // cu_seqlens_q[-1] = 300 > 200 rows: FA2 reads and writes past q/out
      s.rows_k = 300;
      s.cu_k = {0, 100, 300};
      const AttnCase c(s);
      const AttnRun run = c.run(Checks::checked);
      INFO(run.kernel);
      CHECK(run.kernel.find("generic") == std::string::npos);
      REQUIRE(run.record.count > 0);
      CHECK(run.record.min_index == 200);
      CHECK(run.record.first.bound == 200);
      const Buffer buffer = run.record.first.buffer;
      CHECK((buffer == Buffer::q || buffer == Buffer::out));
      CHECK(run.record.first.segment == 1);
      INFO(cuda::describe(run.record));
      // Rows inside the buffer are still computed, as the generic kernel computes them.
      CHECK(!std::isnan(run.out[0]));
      CHECK(!std::isnan(run.out.back()));
      const AttnRun generic = c.run(Checks::checked, kern::AttnKernel::generic);
      CHECK(generic.record.min_index == run.record.min_index);
      double worst = 0;
      int64_t nan_mismatch = 0;
      for (size_t i = 0; i < run.out.size(); ++i) {
        if (std::isnan(run.out[i]) != std::isnan(generic.out[i])) ++nan_mismatch;
        else if (!std::isnan(run.out[i])) worst = std::max(worst, double(std::abs(run.out[i] - generic.out[i])));
      }
      CHECK(nan_mismatch == 0);
      CHECK(worst < 3e-2);
      CHECK(run.row_writes == generic.row_writes);
      // The tensor-core kernels run the CTAs whose rows reach past q/out in their checked
      // form's second launch, as the CTAs of FA2's grid they are: the first access in launch
      // order is the one-launch generic kernel's, with the same CTA.
      CHECK(run.record.order == generic.record.order);
      const AccessRecord dr = c.run(Checks::checked, kern::AttnKernel::automatic, run.record.order).record;
      const AccessRecord dg = c.run(Checks::checked, kern::AttnKernel::generic, run.record.order).record;
      INFO(cuda::describe(dr) << " | " << cuda::describe(dg));
      CHECK(dr.first.buffer == dg.first.buffer);
      CHECK(dr.first.index == dg.first.index);
      CHECK((dr.first.block[0] == dg.first.block[0] && dr.first.block[1] == dg.first.block[1] &&
             dr.first.block[2] == dg.first.block[2]));
      CHECK(dr.first.segment == dg.first.segment);
      CHECK(dr.first.row == dg.first.row);
    }
  }
}

TEST_CASE("cuda: a negative cu_seqlens start becomes a row offset near 2^32", "[cuda]") {
  if (!have_device()) return;
  AttnSpec s;
  s.head_dim = 64, s.heads = 2, s.heads_k = 2;
  s.cu_q = {-16, 48, 128};
  s.cu_k = {0, 64, 144};
  s.rows_q = 128, s.rows_k = 144;
  const AttnCase c(s);
  const AttnRun run = c.run(Checks::checked);
  REQUIRE(run.record.count > 0);
  CHECK(run.record.first.index >= (int64_t(1) << 32) - 16);
  CHECK(run.record.first.bound == 128);
}

TEST_CASE("cuda: max_seqlen_q below a segment leaves its rows past the grid unwritten", "[cuda]") {
  if (!have_device()) return;
  AttnSpec s;
  s.head_dim = 64, s.heads = 2, s.heads_k = 2;
  s.cu_q = {0, 300, 310};
  s.max_seqlen_q = 100;  // grid covers one 128-row tile
  const AttnCase c(s);
  const AttnRun run = c.run(Checks::checked);
  CHECK(run.record.count == 0);
  CHECK(run.row_writes[127] == 1u);
  CHECK(run.row_writes[128] == 0u);
  CHECK(std::isnan(run.out[size_t(128) * 2 * 64]));
  CHECK(!std::isnan(run.out[size_t(127) * 2 * 64]));
  const Compare cmp = compare(c, run);
  CHECK(cmp.nan_mismatch == 0);
  CHECK(cmp.worst < tolerance(ElemType::bf16));
}

TEST_CASE("cuda: the single-query GQA swap computes what the plain path computes", "[cuda]") {
  if (!have_device()) return;
  AttnSpec s;
  s.head_dim = 128, s.heads = 8, s.heads_k = 2, s.causal = true;
  s.cu_q = {0, 1, 2, 3};
  s.cu_k = {0, 40, 41, 300};
  const AttnCase c(s);
  const AttnRun run = c.run(Checks::checked);  // max_seqlen_q == 1: swapped internally
  CHECK(run.record.count == 0);
  const Compare cmp = compare(c, run);
  CHECK(cmp.nan_mismatch == 0);
  CHECK(cmp.worst < tolerance(ElemType::bf16));
}

TEST_CASE("cuda: max_seqlen_k == 0 writes zeros and +inf LSE like FA2", "[cuda]") {
  if (!have_device()) return;
  AttnSpec s;
  s.head_dim = 64, s.heads = 2, s.heads_k = 2;
  s.cu_q = {0, 10, 20};
  s.cu_k = {0, 0, 0};
  s.rows_k = 0;
  s.max_seqlen_k = 0;
  const AttnCase c(s);
  const AttnRun run = c.run(Checks::checked);
  CHECK(run.record.count == 0);
  CHECK(std::all_of(run.out.begin(), run.out.end(), [](float x) { return x == 0.f; }));
  CHECK(std::all_of(run.lse.begin(), run.lse.end(), [](float x) { return std::isinf(x) && x > 0; }));
}

TEST_CASE("cuda: a grid over 65535 segments is refused as an invalid launch", "[cuda]") {
  if (!have_device()) return;
  std::vector<int32_t> cu(70001);
  for (size_t i = 0; i < cu.size(); ++i) cu[i] = int32_t(i);
  AttnSpec s;
  s.head_dim = 64, s.heads = 1, s.heads_k = 1;
  s.cu_q = cu;
  const AttnCase c(s);
  CHECK_THROWS_AS(c.run(Checks::checked), cuda::LaunchConfigError);
}

// ---- gather / scatter --------------------------------------------------------------------

TEST_CASE("cuda: unpad gather and pad scatter copy rows and record out-of-range indices", "[cuda]") {
  if (!have_device()) return;
  const int64_t src_rows = 1000, row_elems = 4 * 64;
  std::mt19937 rng(3);
  const HostTensor src = random_tensor(size_t(src_rows * row_elems), ElemType::bf16, rng);
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < src_rows; i += 3) idx.push_back(i);
  const int64_t n = int64_t(idx.size());
  cuda::DeviceBuffer<unsigned char> dsrc(src.bytes), ddst(size_t(n * row_elems * 2));
  cuda::RecordSlot slot;

  SECTION("valid indices") {
    cuda::DeviceBuffer<int64_t> didx(idx);
    kern::IndexCopyParams p{dsrc.get(), src_rows, ddst.get(), n, row_elems * 2, didx.get(), n, nullptr, Buffer::k_src, Buffer::k};
    auto o = cuda::checked_launch("unpad_gather", slot, [&](AccessRecord* rec) {
      p.record = rec;
      kern::launch_unpad_gather(p, Checks::checked);
    });
    CHECK(o.record.count == 0);
    const auto out = ddst.download();
    bool same = true;
    for (int64_t i = 0; i < n; ++i)
      same &= std::memcmp(&out[size_t(i * row_elems * 2)], &src.bytes[size_t(idx[i] * row_elems * 2)],
                          size_t(row_elems * 2)) == 0;
    CHECK(same);
    // scatter back into a zeroed padded buffer
    cuda::DeviceBuffer<unsigned char> padded(src.bytes.size());
    padded.fill_bytes(0);
    kern::IndexCopyParams s{ddst.get(), n, padded.get(), src_rows, row_elems * 2, didx.get(), n, nullptr, Buffer::out, Buffer::out_final};
    auto o2 = cuda::checked_launch("pad_scatter", slot, [&](AccessRecord* rec) {
      s.record = rec;
      kern::launch_pad_scatter(s, Checks::checked);
    });
    CHECK(o2.record.count == 0);
    const auto back = padded.download();
    bool round_trip = true;
    for (int64_t i = 0; i < n; ++i)
      round_trip &= std::memcmp(&back[size_t(idx[i] * row_elems * 2)], &src.bytes[size_t(idx[i] * row_elems * 2)],
                                size_t(row_elems * 2)) == 0;
    CHECK(round_trip);
    CHECK(back[2 * row_elems * 2] == 0);  // row 2 not scattered: still zero
  }

  SECTION("an index past the source is recorded and its row left untouched") {
    std::vector<int64_t> bad = idx;
    bad[5] = src_rows + 24;  // the Gemma-2 gather: index past B * Lk
    bad[9] = -3;
    cuda::DeviceBuffer<int64_t> didx(bad);
    kern::launch_fill_nan(ddst.get(), n * row_elems, ElemType::bf16);
    AD_CUDA_CHECK(cudaDeviceSynchronize());
    kern::IndexCopyParams p{dsrc.get(), src_rows, ddst.get(), n, row_elems * 2, didx.get(), n, nullptr, Buffer::k_src, Buffer::k};
    auto o = cuda::checked_launch("unpad_gather", slot, [&](AccessRecord* rec) {
      p.record = rec;
      kern::launch_unpad_gather(p, Checks::checked);
    });
    REQUIRE(o.record.count == 2);
    CHECK(o.record.min_index == -3);
    CHECK(o.record.first.bound == src_rows);
    CHECK(o.record.first.buffer == Buffer::k_src);
    const auto out = decode(ddst.download(), ElemType::bf16);
    CHECK(std::isnan(out[size_t(5 * row_elems)]));
    CHECK(!std::isnan(out[size_t(6 * row_elems)]));
  }

  SECTION("a scatter index past the padded tensor is recorded") {
    std::vector<int64_t> bad = idx;
    bad.back() = src_rows;  // one past the end
    cuda::DeviceBuffer<int64_t> didx(bad);
    cuda::DeviceBuffer<unsigned char> padded(src.bytes.size());
    kern::IndexCopyParams s{ddst.get(), n, padded.get(), src_rows, row_elems * 2, didx.get(), n, nullptr, Buffer::out, Buffer::out_final};
    auto o = cuda::checked_launch("pad_scatter", slot, [&](AccessRecord* rec) {
      s.record = rec;
      kern::launch_pad_scatter(s, Checks::checked);
    });
    REQUIRE(o.record.count == 1);
    CHECK(o.record.first.index == src_rows);
    CHECK(o.record.first.buffer == Buffer::out_final);
  }
}

// ---- rotary ---------------------------------------------------------------------------------

namespace {

struct RotaryRun {
  std::vector<float> x;
  AccessRecord record;
};

RotaryRun run_rotary(const HostTensor& x, int64_t rows, int heads, int head_dim, int rotary_dim, int64_t table_rows,
                     const std::vector<int32_t>& cu, int max_seqlen, bool interleaved, RotaryContract contract,
                     std::vector<float>& cos, std::vector<float>& sin) {
  const int half = rotary_dim / 2;
  cos.resize(size_t(table_rows * half));
  sin.resize(cos.size());
  for (int64_t pos = 0; pos < table_rows; ++pos)
    for (int c = 0; c < half; ++c) {
      const double inv = std::pow(10000.0, -2.0 * c / rotary_dim);
      cos[size_t(pos * half + c)] = float(std::cos(pos * inv));
      sin[size_t(pos * half + c)] = float(std::sin(pos * inv));
    }
  cuda::DeviceBuffer<unsigned char> dx(x.bytes);
  cuda::DeviceBuffer<float> dcos(cos), dsin(sin);
  cuda::DeviceBuffer<int32_t> dcu(cu);
  kern::RotaryParams p;
  p.elem = x.elem;
  p.x = dx.get();
  p.rows = rows, p.heads = heads, p.head_dim = head_dim;
  p.cos = dcos.get(), p.sin = dsin.get(), p.table_rows = table_rows, p.rotary_dim = rotary_dim;
  p.interleaved = interleaved;
  p.cu_seqlens = dcu.get();
  p.num_segments = int32_t(cu.size()) - 1;
  p.max_seqlen = max_seqlen;
  p.contract = contract;
  p.block_rows = rope::flash_attn_block_m(rotary_dim, interleaved, 6);  // flash-attn 2.6's BLOCK_M
  p.buffer = Buffer::q_rot;
  const int64_t grid_rows = kern::rotary_grid_rows(p, cu.data());
  cuda::RecordSlot slot;
  RotaryRun r;
  r.record = cuda::checked_launch("rotary", slot, [&](AccessRecord* rec) {
               p.record = rec;
               kern::launch_rotary(p, grid_rows, Checks::checked);
             }).record;
  r.x = decode(dx.download(), x.elem);
  return r;
}

}  // namespace

TEST_CASE("cuda: rotary (flash_attn contract) matches the rotation formula", "[cuda]") {
  if (!have_device()) return;
  for (bool interleaved : {false, true}) {
    const int heads = 3, D = 64, rd = interleaved ? 32 : 64;
    const std::vector<int32_t> cu = {0, 40, 41, 140};
    const int64_t rows = 140, table_rows = 90;  // positions >= 90 rotate by the identity
    const int max_seqlen = 60;                  // rows of the last segment past 60 are skipped
    std::mt19937 rng(5);
    const HostTensor x = random_tensor(size_t(rows * heads * D), ElemType::bf16, rng);
    std::vector<float> cos, sin;
    const RotaryRun run = run_rotary(x, rows, heads, D, rd, table_rows, cu, max_seqlen, interleaved,
                                     RotaryContract::flash_attn, cos, sin);
    CHECK(run.record.count == 0);
    const int bm = rope::flash_attn_block_m(rd, interleaved, 6);
    const int grid_rows = (max_seqlen + bm - 1) / bm * bm;
    double worst = 0;
    for (size_t b = 0; b + 1 < cu.size(); ++b)
      for (int r = 0; r < cu[b + 1] - cu[b]; ++r)
        for (int h = 0; h < heads; ++h)
          for (int c = 0; c < rd / 2; ++c) {
            const size_t base = (size_t(cu[b] + r) * heads + h) * D;
            const size_t ia = base + (interleaved ? 2 * c : c), ib = base + (interleaved ? 2 * c + 1 : c + rd / 2);
            float ea = x.values[ia], eb = x.values[ib];
            if (r < grid_rows && r < table_rows) {
              const float cs = cos[size_t(r * (rd / 2) + c)], sn = sin[size_t(r * (rd / 2) + c)];
              ea = x.values[ia] * cs - x.values[ib] * sn;
              eb = x.values[ia] * sn + x.values[ib] * cs;
            }
            worst = std::max({worst, double(std::abs(run.x[ia] - ea)), double(std::abs(run.x[ib] - eb))});
          }
    CHECK(worst < 1.6e-2);  // one bf16 rounding of values in [-1.5, 1.5]
    // columns past the rotary dim untouched
    if (rd < D) CHECK(run.x[size_t(D - 1)] == x.values[size_t(D - 1)]);
  }
}

TEST_CASE("cuda: rotary (fla contract) with the model width records the cross-head access", "[cuda]") {
  if (!have_device()) return;
  const int heads = 4, D = 32, rd = heads * D;  // RotaryEmbedding(dim=hidden_size): FLA #180
  const std::vector<int32_t> cu = {0, 7, 20};
  const int64_t rows = 20;
  std::mt19937 rng(7);
  const HostTensor x = random_tensor(size_t(rows * heads * D), ElemType::bf16, rng);
  std::vector<float> cos, sin;
  const RotaryRun run =
      run_rotary(x, rows, heads, D, rd, rows, cu, 13, false, RotaryContract::fla, cos, sin);
  REQUIRE(run.record.count > 0);
  INFO(cuda::describe(run.record));
  CHECK(run.record.first.buffer == Buffer::q_rot);
  CHECK((run.record.first.region == Region::head || run.record.first.region == Region::tensor));
}

#endif  // ATTN_DOCTOR_WITH_CUDA
