// GPU tests of the checked varlen backward (kernels/varlen_attention_bwd*): the gradients
// against an fp64 reference over the intended segments (bf16/fp16, head dims 64, 96, 128, 192
// and 256, causal, window, softcap, GQA, query and key segments of different lengths), the checked and
// unchecked forms against each other, and what the checked form records (never performs)
// when cu_seqlens run past the tensors. Tagged [cuda]; without a device (or without CUDA in
// the build) each test prints "SKIPPED: <reason>" and ctest reports it skipped.
#include <catch2/catch.hpp>

#ifndef ATTN_DOCTOR_WITH_CUDA

TEST_CASE("cuda: backward kernels (not built)", "[cuda]") {
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
#include <map>
#include <random>
#include <string>
#include <vector>

#include "exec/cuda/device.hpp"
#include "cuda_test_util.hpp"
#include "launch.hpp"

using namespace ad;
using namespace cuda_test;

namespace {

struct BwdSpec {
  ElemType elem = ElemType::bf16;
  int heads = 4, heads_k = 4, head_dim = 64;
  std::vector<int32_t> cu_q, cu_k;
  int64_t rows_q = -1, rows_k = -1;  // buffer rows (default: cu[-1])
  int max_seqlen_q = -1, max_seqlen_k = -1;
  bool causal = false;
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  int block_m = 0;             // the key-block kernel's rows per step (0: its default)
  bool deterministic = false;  // FA2's deterministic mode (nsplits dq_accum copies, by the contract)
  uint32_t seed = 7;
};

struct BwdRun {
  std::vector<float> dq, dk, dv;              // NaN where unwritten
  std::map<kern::BwdStep, AccessRecord> records;  // per launch
  uint64_t refused() const {
    uint64_t n = 0;
    for (const auto& [step, r] : records) n += r.count;
    return n;
  }
};

struct BwdCase {
  BwdSpec spec;
  int64_t rows_q = 0, rows_k = 0;
  HostTensor q, k, v, dout;

  explicit BwdCase(BwdSpec s) : spec(std::move(s)) {
    complete_spec(spec, rows_q, rows_k);
    std::mt19937 rng(spec.seed);
    const size_t nq = size_t(rows_q) * spec.heads * spec.head_dim, nk = size_t(rows_k) * spec.heads_k * spec.head_dim;
    q = random_tensor(nq, spec.elem, rng);
    k = random_tensor(nk, spec.elem, rng);
    v = random_tensor(nk, spec.elem, rng);
    dout = random_tensor(nq, spec.elem, rng);
  }

  float scale() const { return float(1.0 / std::sqrt(double(spec.head_dim))); }

  // The forward (checked, mma.sync) for O and the LSE, then the backward's launches, each
  // through checked_launch with its own record.
  BwdRun run(Checks checks) const {
    const ElemType e = spec.elem;
    const int H = spec.heads, Hk = spec.heads_k, D = spec.head_dim;
    const int32_t N = int32_t(spec.cu_q.size()) - 1;
    cuda::DeviceBuffer<unsigned char> dq_in(q.bytes), dk_in(k.bytes), dv_in(v.bytes), ddo(dout.bytes);
    cuda::DeviceBuffer<uint16_t> dout_fwd(q.values.size()), dq(q.values.size());
    cuda::DeviceBuffer<uint16_t> dk_x(size_t(rows_k) * H * D), dv_x(size_t(rows_k) * H * D);
    cuda::DeviceBuffer<uint16_t> dk(k.values.size()), dv(v.values.size());
    cuda::DeviceBuffer<float> lse(size_t(rows_q) * H);
    kern::VarlenBwdParams p;
    p.elem = e;
    p.q = {dq_in.get(), rows_q, H};
    p.batch = N;
    p.num_heads = H, p.num_heads_k = Hk, p.head_dim = D;
    p.max_seqlen_q = spec.max_seqlen_q, p.max_seqlen_k = spec.max_seqlen_k;
    p.softmax_scale = scale();
    p.softcap = spec.softcap;
    p.causal = spec.causal;
    p.window_left = spec.window_left, p.window_right = spec.window_right;
    p.block_m = spec.block_m;
    p.deterministic = spec.deterministic;
    const kern::BwdWorkspace ws = kern::varlen_bwd_workspace(p);
    cuda::DeviceBuffer<float> softmax_d(size_t(ws.softmax_d)), dq_accum(size_t(ws.dq_accum));
    cuda::DeviceBuffer<int32_t> cu_q(spec.cu_q), cu_k(spec.cu_k);
    for (auto* b : {&dout_fwd, &dq, &dk_x, &dv_x, &dk, &dv}) kern::launch_fill_nan(b->get(), int64_t(b->size()), e);
    kern::launch_fill_f32(lse.get(), int64_t(lse.size()), std::numeric_limits<float>::quiet_NaN());
    kern::launch_fill_f32(softmax_d.get(), int64_t(softmax_d.size()), std::numeric_limits<float>::quiet_NaN());
    // torch.empty (NaN here: a row read before it is zeroed shows), torch.zeros when deterministic
    kern::launch_fill_f32(dq_accum.get(), int64_t(dq_accum.size()),
                          spec.deterministic ? 0.f : std::numeric_limits<float>::quiet_NaN());
    AD_CUDA_CHECK(cudaDeviceSynchronize());

    cuda::RecordSlot slot;
    kern::VarlenFwdParams f;
    f.elem = e;
    f.q = {dq_in.get(), rows_q, H};
    f.k = {dk_in.get(), rows_k, Hk};
    f.v = {dv_in.get(), rows_k, Hk};
    f.out = {dout_fwd.get(), rows_q, H};
    f.lse = lse.get();
    f.lse_size = int64_t(lse.size());
    f.cu_seqlens_q = {cu_q.get(), int64_t(spec.cu_q.size())};
    f.cu_seqlens_k = {cu_k.get(), int64_t(spec.cu_k.size())};
    f.batch = N;
    f.num_heads = H, f.num_heads_k = Hk, f.head_dim = D;
    f.max_seqlen_q = spec.max_seqlen_q, f.max_seqlen_k = spec.max_seqlen_k;
    f.softmax_scale = scale();
    f.softcap = spec.softcap;
    f.causal = spec.causal;
    f.window_left = spec.window_left, f.window_right = spec.window_right;
    cuda::checked_launch("forward", slot, [&](AccessRecord* rec) {
      f.record = rec;
      kern::launch_varlen_fwd(f, Checks::checked, nullptr, kern::AttnKernel::tensor_core);
    });

    p.k = {dk_in.get(), rows_k, Hk};
    p.v = {dv_in.get(), rows_k, Hk};
    p.out = {dout_fwd.get(), rows_q, H};
    p.dout = {ddo.get(), rows_q, H};
    p.dq = {dq.get(), rows_q, H};
    const bool gqa = H != Hk;
    p.dk = {gqa ? dk_x.get() : dk.get(), rows_k, gqa ? H : Hk};
    p.dv = {gqa ? dv_x.get() : dv.get(), rows_k, gqa ? H : Hk};
    p.dk_out = gqa ? dk.get() : nullptr;
    p.dv_out = gqa ? dv.get() : nullptr;
    p.lse = lse.get();
    p.lse_size = int64_t(lse.size());
    p.softmax_d = softmax_d.get();
    p.softmax_d_size = int64_t(softmax_d.size());
    p.dq_accum = dq_accum.get();
    p.dq_accum_size = int64_t(dq_accum.size());
    p.cu_seqlens_q = {cu_q.get(), int64_t(spec.cu_q.size())};
    p.cu_seqlens_k = {cu_k.get(), int64_t(spec.cu_k.size())};
    BwdRun r;
    for (const kern::BwdStep step : kern::varlen_bwd_steps(p)) {
      const cuda::LaunchOutcome o = cuda::checked_launch(kern::to_string(step), slot, [&](AccessRecord* rec) {
        p.record = rec;
        kern::launch_varlen_bwd_step(p, step, checks);
      });
      r.records[step] = o.record;
      if (checks == Checks::unchecked || o.record.count == 0) continue;
      // as the engine does: a second launch in detail mode names the access with the smallest
      // launch-order key (dq_dk_dv adds into dq_accum: its second launch adds into a scratch copy)
      kern::VarlenBwdParams d = p;
      cuda::DeviceBuffer<float> scratch;
      if (step == kern::BwdStep::key_blocks) {
        scratch.allocate(dq_accum.size());
        d.dq_accum = scratch.get();
      }
      const cuda::LaunchOutcome od = cuda::checked_launch(
          kern::to_string(step), slot,
          [&](AccessRecord* rec) {
            d.record = rec;
            kern::launch_varlen_bwd_step(d, step, checks);
          },
          detail_record(o.record.order));
      r.records[step].first = od.record.first;
      r.records[step].thread = od.record.thread;
    }
    r.dq = decode(dq.download(), e);
    r.dk = decode(dk.download(), e);
    r.dv = decode(dv.download(), e);
    return r;
  }

  // fp64 gradients over each segment (the normalised window: causal = right window 0).
  void reference(std::vector<double>& gq, std::vector<double>& gk, std::vector<double>& gv) const {
    const int H = spec.heads, Hk = spec.heads_k, D = spec.head_dim, G = H / Hk;
    gq.assign(size_t(rows_q) * H * D, 0.0);
    gk.assign(size_t(rows_k) * Hk * D, 0.0);
    gv.assign(size_t(rows_k) * Hk * D, 0.0);
    const double sc = scale();
    const int left = spec.window_left, right = spec.causal ? 0 : spec.window_right;
    auto at = [D](const std::vector<float>& t, int64_t row, int heads, int h) { return &t[(size_t(row) * heads + h) * D]; };
    for (size_t b = 0; b + 1 < spec.cu_q.size(); ++b) {
      const int sq = spec.cu_q[b], lq = spec.cu_q[b + 1] - sq;
      const int sk = spec.cu_k[b], lk = spec.cu_k[b + 1] - sk;
      for (int h = 0; h < H; ++h) {
        const int hk = h / G;
        for (int i = 0; i < lq; ++i) {
          std::vector<int> keys;
          std::vector<double> s, t;
          for (int j = 0; j < lk; ++j) {
            if (right >= 0 && j > i + lk - lq + right) continue;
            if (left >= 0 && j < i + lk - lq - left) continue;
            double dot = 0;
            const float *qi = at(q.values, sq + i, H, h), *kj = at(k.values, sk + j, Hk, hk);
            for (int d = 0; d < D; ++d) dot += double(qi[d]) * kj[d];
            dot *= sc;
            double th = 0;
            if (spec.softcap > 0) {
              th = std::tanh(dot / spec.softcap);
              dot = spec.softcap * th;
            }
            keys.push_back(j), s.push_back(dot), t.push_back(th);
          }
          if (keys.empty()) continue;
          const double mx = *std::max_element(s.begin(), s.end());
          double sum = 0;
          for (double& x : s) sum += (x = std::exp(x - mx));
          for (double& x : s) x /= sum;  // P
          const float* doi = at(dout.values, sq + i, H, h);
          std::vector<double> dp(keys.size());
          double dsum = 0;
          for (size_t n = 0; n < keys.size(); ++n) {
            const float* vj = at(v.values, sk + keys[n], Hk, hk);
            double x = 0;
            for (int d = 0; d < D; ++d) x += double(doi[d]) * vj[d];
            dp[n] = x;
            dsum += s[n] * x;
          }
          for (size_t n = 0; n < keys.size(); ++n) {
            const int j = keys[n];
            double ds = s[n] * (dp[n] - dsum) * sc;
            if (spec.softcap > 0) ds *= 1 - t[n] * t[n];
            const float *qi = at(q.values, sq + i, H, h), *kj = at(k.values, sk + j, Hk, hk);
            double* gqi = &gq[(size_t(sq + i) * H + h) * D];
            double* gkj = &gk[(size_t(sk + j) * Hk + hk) * D];
            double* gvj = &gv[(size_t(sk + j) * Hk + hk) * D];
            for (int d = 0; d < D; ++d) {
              gqi[d] += ds * kj[d];
              gkj[d] += ds * qi[d];
              gvj[d] += s[n] * doi[d];
            }
          }
        }
      }
    }
  }
};

// ||x - ref|| / ||ref|| over the rows [0, rows) of a (rows, heads, D) tensor, and the count
// of NaN elements there.
struct Err {
  double rel = 0;
  int64_t nan = 0;
};
Err rel_error(const std::vector<float>& x, const std::vector<double>& ref, size_t elems) {
  Err e;
  double num = 0, den = 0;
  for (size_t i = 0; i < elems; ++i) {
    if (std::isnan(x[i])) {
      ++e.nan;
      continue;
    }
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  e.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

double tolerance(ElemType t) { return t == ElemType::fp16 ? 5e-3 : 2e-2; }

void check_gradients(const BwdCase& c, const BwdRun& r) {
  std::vector<double> gq, gk, gv;
  c.reference(gq, gk, gv);
  const Err eq = rel_error(r.dq, gq, gq.size()), ek = rel_error(r.dk, gk, gk.size()), ev = rel_error(r.dv, gv, gv.size());
  INFO("dq " << eq.rel << " (" << eq.nan << " NaN), dk " << ek.rel << " (" << ek.nan << " NaN), dv " << ev.rel << " ("
             << ev.nan << " NaN)");
  CHECK(eq.nan == 0);
  CHECK(ek.nan == 0);
  CHECK(ev.nan == 0);
  CHECK(eq.rel < tolerance(c.spec.elem));
  CHECK(ek.rel < tolerance(c.spec.elem));
  CHECK(ev.rel < tolerance(c.spec.elem));
}

}  // namespace

TEST_CASE("cuda: varlen backward matches fp64 gradients", "[cuda]") {
  if (!have_device()) return;
  struct Config {
    const char* what;
    BwdSpec spec;
  };
  std::vector<Config> configs;
  for (const ElemType e : {ElemType::bf16, ElemType::fp16})
    for (const int d : {64, 96, 128})
      for (const bool causal : {false, true}) {
        BwdSpec s;
        s.elem = e, s.head_dim = d, s.causal = causal;
        s.cu_q = {0, 1, 130, 385, 700};  // 1, 129, 255, 315 rows: partial tiles everywhere
        configs.push_back({"plain", s});
      }
  {
    BwdSpec s;
    s.cu_q = {0, 70, 300, 301};
    s.cu_k = {0, 200, 260, 400};  // len_k != len_q: bottom-right causal, keys without queries
    s.causal = true;
    configs.push_back({"causal, len_q != len_k", s});
    s.causal = false;
    s.heads = 6, s.heads_k = 2;  // GQA: dk / dv summed over groups of 3
    configs.push_back({"GQA", s});
    s.heads = 4, s.heads_k = 4;
    s.window_left = 40, s.window_right = 7;
    configs.push_back({"window", s});
    s.window_left = s.window_right = -1;
    s.softcap = 5.f;
    s.head_dim = 128;
    configs.push_back({"softcap", s});
  }
  {
    BwdSpec s;
    s.head_dim = 128, s.heads = 2, s.heads_k = 1;
    s.cu_q = {0, 1000, 1700};
    s.causal = true;
    configs.push_back({"long segments, MQA", s});
    // block_m 0 is the wgmma kernel on an H100 / H200; a block_m names an mma.sync shape
    s.block_m = 64;
    configs.push_back({"mma.sync 64 rows per step", s});
    s.block_m = 32;
    configs.push_back({"mma.sync 32 rows per step", s});
    s.block_m = 0;
    s.deterministic = true;  // ceil(132 / (N H)) = 33 dq_accum copies, one key block each
    configs.push_back({"deterministic", s});
    s.head_dim = 64;
    s.causal = false;
    s.heads = 16, s.heads_k = 16;  // ceil(132 / 32) = 5 copies for 8 key blocks: CTA 0 runs blocks 0 and 5
    configs.push_back({"deterministic", s});
  }
  {
    // head dim 96 (FA2's 64 x 128 tile; the preprocess's rows of 12 lanes in 16): GQA with
    // lengths that differ, a window, a softcap, the deterministic walk
    BwdSpec s;
    s.head_dim = 96, s.heads = 6, s.heads_k = 2;
    s.cu_q = {0, 70, 300, 301};
    s.cu_k = {0, 200, 260, 400};
    s.causal = true;
    configs.push_back({"GQA, len_q != len_k", s});
    s.heads = 4, s.heads_k = 4, s.causal = false;
    s.window_left = 40, s.window_right = 7;
    configs.push_back({"window", s});
    s.window_left = s.window_right = -1;
    s.softcap = 5.f;
    configs.push_back({"softcap", s});
    s.softcap = 0.f;
    s.elem = ElemType::fp16;
    s.cu_q = {0, 1000, 1700};
    s.cu_k = {};
    s.deterministic = true;
    configs.push_back({"deterministic", s});
  }
  for (const ElemType e : {ElemType::bf16, ElemType::fp16})
    for (const int d : {192, 256}) {
      // head dims 192 and 256 (FA2's 64 x 64 tile, the split kernel's 64-key blocks and
      // 32-row steps): partial blocks everywhere, bottom-right causal with len_q != len_k,
      // GQA, a window, a softcap, the deterministic walk
      BwdSpec s;
      s.elem = e, s.head_dim = d;
      s.cu_q = {0, 1, 130, 385, 700};
      configs.push_back({"plain", s});
      s.causal = true;
      configs.push_back({"plain", s});
      s.heads = 6, s.heads_k = 2;
      s.cu_q = {0, 70, 300, 301};
      s.cu_k = {0, 200, 260, 400};
      configs.push_back({"GQA, len_q != len_k", s});
      s.heads = 4, s.heads_k = 4, s.causal = false;
      s.window_left = 40, s.window_right = 7;
      configs.push_back({"window", s});
      s.window_left = s.window_right = -1;
      s.softcap = 5.f;
      configs.push_back({"softcap", s});
      s.softcap = 0.f;
      s.cu_q = {0, 1000, 1700};
      s.cu_k = {};
      s.heads = 2, s.heads_k = 1;
      s.deterministic = true;
      configs.push_back({"deterministic, MQA", s});
    }
  for (const Config& cfg : configs) {
    DYNAMIC_SECTION(cfg.what << " " << to_string(cfg.spec.elem) << " d" << cfg.spec.head_dim
                              << (cfg.spec.causal ? " causal" : "")) {
      const BwdCase c(cfg.spec);
      const BwdRun r = c.run(Checks::checked);
      CHECK(r.refused() == 0);
      check_gradients(c, r);
    }
  }
}

TEST_CASE("cuda: checked and unchecked backward compute the same gradients", "[cuda]") {
  if (!have_device()) return;
  // d64 / d128 on an H100 / H200: the checked form's warp-specialised kernel (loads by the
  // tensor memory accelerator, partial blocks zeroed) against the unchecked wgmma kernel
  for (const int d : {64, 128, 192, 256}) {
    DYNAMIC_SECTION("d" << d) {
      BwdSpec s;
      s.cu_q = {0, 300, 333, 900};
      s.head_dim = d, s.causal = true, s.heads = 4, s.heads_k = 2;
      const BwdCase c(s);
      const BwdRun a = c.run(Checks::checked), b = c.run(Checks::unchecked);
      // dk / dv are summed in one order in both; dq goes through fp32 atomics (any order), so
      // the two agree to the rounding of the last bit of the sum
      CHECK(a.dk == b.dk);
      CHECK(a.dv == b.dv);
      std::vector<double> dqa(a.dq.begin(), a.dq.end());
      const Err e = rel_error(b.dq, dqa, dqa.size());
      CHECK(e.nan == 0);
      CHECK(e.rel < 1e-2);
    }
  }
}

TEST_CASE("cuda: the deterministic backward gives the same dq bit for bit on every run", "[cuda]") {
  if (!have_device()) return;
  BwdSpec s;
  s.cu_q = {0, 900, 1300};
  s.head_dim = 64, s.heads = 16, s.heads_k = 16, s.deterministic = true;
  const BwdCase c(s);
  const BwdRun a = c.run(Checks::checked), b = c.run(Checks::checked);
  CHECK(a.refused() == 0);
  CHECK(a.dq == b.dq);
  CHECK(a.dk == b.dk);
  check_gradients(c, a);
}

TEST_CASE("cuda: an overshooting cu_seqlens_q is recorded by the backward, never performed", "[cuda]") {
  if (!have_device()) return;
  for (const int d : {64, 192}) {
    DYNAMIC_SECTION("d" << d) {
      BwdSpec s;
      s.head_dim = d, s.heads = 2, s.heads_k = 2;
      s.cu_q = {0, 100, 300};
      s.cu_k = {0, 100, 300};
      s.rows_q = 200;  // cu_seqlens_q[-1] = 300 > 200 rows of q, dO, out, dq
      const BwdCase c(s);
      const BwdRun r = c.run(Checks::checked);
      const AccessRecord& pre = r.records.at(kern::BwdStep::preprocess);
      REQUIRE(pre.count > 0);
      CHECK(pre.min_index == 200);
      CHECK((pre.first.buffer == Buffer::dout || pre.first.buffer == Buffer::out));
      CHECK(pre.first.segment == 1);
      const AccessRecord& main = r.records.at(kern::BwdStep::key_blocks);
      REQUIRE(main.count > 0);
      INFO(cuda::describe(main));
      // q / dO rows from 200 on, and the LSE / softmax_d / dq_accum elements of those rows
      CHECK(main.first.segment == 1);
      const AccessRecord& conv = r.records.at(kern::BwdStep::convert_dq);
      REQUIRE(conv.count > 0);
      CHECK(conv.first.buffer == Buffer::dq);
      CHECK(conv.min_index == 200);
      // the rows inside the buffers are still computed
      CHECK(!std::isnan(r.dq[0]));
      CHECK(!std::isnan(r.dq.back()));
      CHECK(!std::isnan(r.dk.back()));
    }
  }
}

TEST_CASE("cuda: an overshooting cu_seqlens_k is recorded as k / v reads and dk / dv writes", "[cuda]") {
  if (!have_device()) return;
  for (const int d : {128, 256}) {
    DYNAMIC_SECTION("d" << d) {
      BwdSpec s;
      s.head_dim = d, s.heads = 2, s.heads_k = 2;
      s.cu_q = {0, 100, 300};
      s.cu_k = {0, 100, 400};
      s.rows_k = 300;  // cu_seqlens_k[-1] = 400 > 300 rows of k, v, dk, dv
      const BwdCase c(s);
      const BwdRun r = c.run(Checks::checked);
      const AccessRecord& main = r.records.at(kern::BwdStep::key_blocks);
      REQUIRE(main.count > 0);
      INFO(cuda::describe(main));
      CHECK(main.min_index == 300);
      CHECK(r.records.at(kern::BwdStep::preprocess).count == 0);
      CHECK(!std::isnan(r.dk[0]));
      CHECK(!std::isnan(r.dv.back()));
    }
  }
}

TEST_CASE("cuda: the backward's launch refuses shapes without a kernel", "[cuda]") {
  if (!have_device()) return;
  kern::VarlenBwdParams p;
  p.elem = ElemType::bf16;
  p.head_dim = 160;  // FA2's 64 x 64 tile, but no key-block kernel of that head dim
  CHECK(!kern::varlen_bwd_supported(p));
  CHECK_THROWS_AS(kern::launch_varlen_bwd_step(p, kern::BwdStep::preprocess, Checks::unchecked), cuda::LaunchConfigError);
  for (const int d : {64, 96, 128, 192, 256}) {
    p.head_dim = d;
    CHECK(kern::varlen_bwd_supported(p));
  }
  // a block_m the head dim has no instantiation of
  CHECK_THROWS_AS(kern::detail::varlen_bwd_tc_bf16(256, 64, true), cuda::LaunchConfigError);
  p.elem = ElemType::fp32;
  p.head_dim = 64;
  CHECK(!kern::varlen_bwd_supported(p));
}

#endif  // ATTN_DOCTOR_WITH_CUDA
