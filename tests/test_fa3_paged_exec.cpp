// FlashAttention-3's paged KV and q_v in the checked CPU twin: the contract's paged row
// address (contract/fa3_paged.hpp), the twin reading k / v through the table against the same
// keys laid out contiguously, refused reads (a page outside the pool, an entry past the table),
// q_v's score term against a reference computed here, the CUDA engine's hand-off facts and the
// backward's reason.
#include <catch2/catch.hpp>

#include <cmath>

#include "contract/fa3_paged.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"

using namespace ad;

namespace {

Batch batch_from(const nlohmann::json& j) { return parse_batch_text(j.dump(), "test.json"); }

// Three decoding sequences (one query row each) over a pool of `num_pages` pages of 4 rows.
nlohmann::json paged(nlohmann::json table, nlohmann::json seqused_k, int64_t num_pages, int64_t page_size = 4) {
  return {{"format", "attn-doctor/batch@1"},
          {"environment", {{"flash_attn", "3.0.0b1"}, {"gpu_arch", "sm_90a"}}},
          {"model", {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 32}, {"dtype", "fp16"}, {"causal", true}}},
          {"varlen", {{"api", "flash_attn_3.kvcache"}, {"cu_seqlens_q", {0, 1, 2, 3}}, {"max_seqlen_q", 1},
                      {"seqused_k", seqused_k},
                      {"page_table", {{"page_size", page_size}, {"num_pages", num_pages}, {"table", table}}}}}};
}

std::vector<float> seeded(size_t n, num::InputTensor t) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = num::input_value(11, t, i, ElemType::fp16);
  return x;
}

}  // namespace

TEST_CASE("fa3 paged contract: key j of sequence b is row j % page_size of page table[b][j / page_size]",
          "[fa3_paged_exec]") {
  const std::vector<int64_t> table = {3, 0, 5, 1, -1, 9};  // 3 rows x 2 pages
  const fa3::PagedKV kv{table.data(), 6, 2, 4, 6};
  CHECK(kv.pool_rows() == 24);
  // inside the row
  fa3::PagedRow r = fa3::paged_row(kv, 0, 5);
  CHECK(r.status == fa3::PagedStatus::ok);
  CHECK(r.entry == 1);
  CHECK(r.page == 0);
  CHECK(r.row == 1);
  r = fa3::paged_row(kv, 1, 3);
  CHECK(r.status == fa3::PagedStatus::ok);
  CHECK(r.row == 5 * 4 + 3);
  // past the row: the next row's entry, as the kernel reads a row slice without a bound
  r = fa3::paged_row(kv, 0, 9);
  CHECK(r.status == fa3::PagedStatus::ok);
  CHECK(r.entry == 2);
  CHECK(r.row == 5 * 4 + 1);
  // a page outside [0, num_pages): refused, with the row the kernel would read
  r = fa3::paged_row(kv, 2, 1);
  CHECK(r.status == fa3::PagedStatus::outside_pool);
  CHECK(r.page == -1);
  CHECK(r.row == -4 + 1);
  r = fa3::paged_row(kv, 2, 6);
  CHECK(r.status == fa3::PagedStatus::outside_pool);
  CHECK(r.row == 9 * 4 + 2);
  // past the end of the table: refused, no page read
  r = fa3::paged_row(kv, 2, 8);
  CHECK(r.status == fa3::PagedStatus::past_table);
  CHECK(r.entry == 6);
  CHECK(r.page == -1);
  CHECK(fa3::first_key_past_table(kv, 0) == 24);
  CHECK(fa3::first_key_past_table(kv, 2) == 8);
  CHECK(fa3::first_key_past_table(kv, 3) == 0);
  CHECK(fa3::page_run_end(kv, 5, 100) == 8);
  CHECK(fa3::page_run_end(kv, 5, 7) == 7);
  // the refused reads of a key range, one page at a time
  fa3::PagedRefusals rf = fa3::paged_refusals(kv, 2, 0, 11);
  CHECK(rf.outside_pool == 8);
  CHECK(rf.first_outside == 0);
  CHECK(rf.first_outside_row.page == -1);
  CHECK(rf.past_table == 3);
  CHECK(rf.first_past == 8);
  rf = fa3::paged_refusals(kv, 0, 2, 9);  // row 0, then row 1's first entry: all in the pool
  CHECK(rf.outside_pool == 0);
  CHECK(rf.past_table == 0);
  CHECK(rf.first_outside == -1);
  rf = fa3::paged_refusals(kv, 1, 6, 13);  // row 1's second page (5), then row 2's: -1 and 9
  CHECK(rf.outside_pool == 5);
  CHECK(rf.first_outside == 8);
  CHECK(rf.first_outside_row.row == -4);
  // a huge page index saturates instead of overflowing
  const std::vector<int64_t> huge = {int64_t{1} << 61};
  const fa3::PagedKV big{huge.data(), 1, 1, 1 << 30, 2};
  r = fa3::paged_row(big, 0, 3);
  CHECK(r.status == fa3::PagedStatus::outside_pool);
  CHECK(r.row == int64_t{1} << 62);
}

TEST_CASE("fa3 paged twin: the same output as the keys laid out contiguously", "[fa3_paged_exec]") {
  // the pool's pages in a scrambled order; sequence b's keys are its pages in table order
  const nlohmann::json table = {{4, 1}, {0, 5}, {2, 3}};
  const std::vector<int64_t> used = {7, 3, 8};
  const Batch b = batch_from(paged(table, used, 6));
  const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  REQUIRE(p.attention.paged);
  CHECK(p.attention.total_k == 24);
  CHECK(p.rows_k_src == 24);
  const int64_t H = 4, Hk = 2, D = 32, ps = 4;
  const std::vector<float> q = seeded(3 * H * D, num::InputTensor::q);
  const std::vector<float> k = seeded(24 * Hk * D, num::InputTensor::k);
  const std::vector<float> v = seeded(24 * Hk * D, num::InputTensor::v);
  std::vector<float> out(size_t(3 * H * D), NAN), lse(size_t(H * 3), NAN);
  const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
  CHECK_FALSE(r.access.has_first());
  CHECK(r.access.count == 0);

  // the contiguous call: each sequence's keys copied out of its pages, cu_seqlens_k as offsets
  std::vector<float> kc, vc;
  std::vector<int64_t> cu_k = {0};
  for (int64_t s = 0; s < 3; ++s) {
    for (int64_t j = 0; j < used[size_t(s)]; ++j) {
      const int64_t page = table[size_t(s)][size_t(j / ps)].get<int64_t>();
      const int64_t row = page * ps + j % ps;
      kc.insert(kc.end(), k.begin() + row * Hk * D, k.begin() + (row + 1) * Hk * D);
      vc.insert(vc.end(), v.begin() + row * Hk * D, v.begin() + (row + 1) * Hk * D);
    }
    cu_k.push_back(cu_k.back() + used[size_t(s)]);
  }
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "3.0.0b1"}}},
                      {"model", {{"num_heads", H}, {"num_kv_heads", Hk}, {"head_dim", D}, {"dtype", "fp16"}, {"causal", true}}},
                      {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 1, 2, 3}}, {"cu_seqlens_k", cu_k},
                                  {"max_seqlen_q", 1}, {"max_seqlen_k", 8}}}};
  const Batch bc = batch_from(j);
  const ExecPlan pc = make_exec_plan(bc, convert(bc), ExecOptions{});
  REQUIRE(pc.skip_reason.empty());
  REQUIRE_FALSE(pc.attention.paged);
  std::vector<float> out_c(out.size(), NAN), lse_c(lse.size(), NAN);
  const cpu::AttentionResult rc = cpu::fa2_varlen_forward(pc, q.data(), kc.data(), vc.data(), out_c.data(), lse_c.data(), 2);
  CHECK_FALSE(rc.access.has_first());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == out_c[i]);
  for (size_t i = 0; i < lse.size(); ++i) CHECK(lse[i] == lse_c[i]);

  // and the whole check agrees: every invariant holds, the reference matches
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  const Diagnosis d = diagnose(b, o, "test.json");
  CHECK(d.report.violations.empty());
}

TEST_CASE("fa3 paged twin: a page outside the pool and an entry past the table are refused and recorded",
          "[fa3_paged_exec]") {
  const int64_t H = 4, Hk = 2, D = 32;
  SECTION("a page index past the pool") {
    // sequence 2's second page is 6 of 6 pages: keys 4 - 7 of it are refused (k and v, each head)
    const Batch b = batch_from(paged({{0, 1}, {2, 3}, {4, 6}}, {5, 3, 8}, 6));
    const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    const std::vector<float> q = seeded(3 * H * D, num::InputTensor::q);
    const std::vector<float> k = seeded(24 * Hk * D, num::InputTensor::k);
    const std::vector<float> v = seeded(24 * Hk * D, num::InputTensor::v);
    std::vector<float> out(size_t(3 * H * D), NAN), lse(size_t(H * 3), NAN);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    REQUIRE(r.access.has_first());
    CHECK(r.access.count == 2 * 4 * H);
    CHECK(r.access.first.buffer == Buffer::k);
    CHECK(r.access.first.index == 24);
    CHECK(r.access.first.bound == 24);
    CHECK(r.access.first.segment == 2);
    CHECK(r.access.min_index == 24);
    // the refused rows read as zeros: every output finite
    for (float x : out) CHECK(std::isfinite(x));
    // the reference leaves sequence 2 out; the check reports the measured access first
    CheckOptions o;
    o.backend = BackendChoice::cpu;
    const Diagnosis d = diagnose(b, o, "test.json");
    REQUIRE_FALSE(d.report.violations.empty());
    CHECK(d.report.violations.front().id == "attention.access");
  }
  SECTION("a negative page index") {
    const Batch b = batch_from(paged({{0, 1}, {-2, 3}, {4, 5}}, {5, 3, 8}, 6));
    const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    const std::vector<float> q = seeded(3 * H * D, num::InputTensor::q);
    const std::vector<float> k = seeded(24 * Hk * D, num::InputTensor::k), v = k;
    std::vector<float> out(size_t(3 * H * D), NAN), lse(size_t(H * 3), NAN);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    REQUIRE(r.access.has_first());
    CHECK(r.access.count == 2 * 3 * H);
    CHECK(r.access.first.index == -8);
    CHECK(r.access.min_index == -8);
  }
  SECTION("cache_seqlens past the last row: entries past the table") {
    // sequence 2 has 2 pages (8 keys) and claims 11: keys 8 - 10 read entries 6 and 7 of a
    // 6-entry table
    const Batch b = batch_from(paged({{0, 1}, {2, 3}, {4, 5}}, {5, 3, 11}, 6));
    const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    const std::vector<float> q = seeded(3 * H * D, num::InputTensor::q);
    const std::vector<float> k = seeded(24 * Hk * D, num::InputTensor::k), v = k;
    std::vector<float> out(size_t(3 * H * D), NAN), lse(size_t(H * 3), NAN);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    REQUIRE(r.access.has_first());
    CHECK(r.access.first.buffer == Buffer::page_table);
    CHECK(r.access.first.unit == Unit::elements);
    CHECK(r.access.first.index == 6);
    CHECK(r.access.first.bound == 6);
    CHECK(r.access.count == 3 * H);
  }
  SECTION("cache_seqlens past a middle row: the next sequence's pages, in bounds") {
    // sequence 0 claims 11 keys over 2 pages: keys 8 - 10 come from page table[1][0] = 2
    const Batch b = batch_from(paged({{0, 1}, {2, 3}, {4, 5}}, {11, 3, 8}, 6));
    const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    const std::vector<float> q = seeded(3 * H * D, num::InputTensor::q);
    const std::vector<float> k = seeded(24 * Hk * D, num::InputTensor::k), v = k;
    std::vector<float> out(size_t(3 * H * D), NAN), lse(size_t(H * 3), NAN);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    CHECK_FALSE(r.access.has_first());
    CheckOptions o;
    o.backend = BackendChoice::cpu;
    const Diagnosis d = diagnose(b, o, "test.json");
    REQUIRE_FALSE(d.report.violations.empty());
    CHECK(d.report.violations.front().id == "result.reference");
  }
}

TEST_CASE("fa3 paged: a segment wholly past q counts its refused table reads from the plan", "[fa3_paged_exec]") {
  // cu_seqlens_q runs 200 rows past the 3 rows of q: the third segment's CTAs past q are
  // counted on the host, their keys through page 7 (outside the pool) included
  nlohmann::json j = paged({{0, 1}, {2, 3}, {4, 7}}, {5, 3, 8}, 6);
  j["varlen"]["cu_seqlens_q"] = {0, 1, 2, 203};
  j["varlen"]["max_seqlen_q"] = 201;
  j["varlen"]["total_q"] = 3;
  const Batch b = batch_from(j);
  const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  REQUIRE(p.attention.paged);
  CHECK(p.attention.past_rows.tiles > 0);
  // the CTAs past q: keys 4 - 7 of segment 2 lie in page 7 (k and v, each head)
  CHECK(p.attention.past_rows.access.count > 0);
  CHECK(p.attention.past_rows.access.min_index <= 7 * 4);
}

TEST_CASE("fa3 paged: a table given by its shape only, or naming too many keys, is not run", "[fa3_paged_exec]") {
  nlohmann::json j = paged({{0, 1}, {2, 3}, {4, 5}}, {5, 3, 8}, 6);
  j["varlen"]["page_table"].erase("table");
  j["varlen"]["page_table"]["shape"] = {3, 2};
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  CHECK(p.skip_reason.find("given by its shape only") != std::string::npos);
  // 1 page of 1 row named 4096 times per sequence, and cache_seqlens of 2^31 - 1: far more keys
  // than the pool, so a sample of two rows per sequence is still over 8x the budget
  nlohmann::json rows = nlohmann::json::array();
  for (int s = 0; s < 3; ++s) rows.push_back(std::vector<int64_t>(4096, 0));
  j = paged(rows, {2147483647, 2147483647, 2147483647}, 1, 1);
  b = batch_from(j);
  ExecOptions small;
  small.budget = 1 << 20;
  p = make_exec_plan(b, convert(b), small);
  CHECK(p.skip_reason.find("over 8x --budget") != std::string::npos);
  small.full = true;
  p = make_exec_plan(b, convert(b), small);
  CHECK(p.skip_reason.empty());
}

TEST_CASE("fa3 qv: each score adds q_v . v_j, scaled by (d + d_v) ** -0.5", "[fa3_paged_exec]") {
  const int64_t H = 2, D = 16, total = 10;
  const int64_t starts[2] = {0, 6}, lens[2] = {6, 4};
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "3.0.0b1"}, {"gpu_arch", "sm_90a"}}},
                      {"model", {{"num_heads", H}, {"head_dim", D}, {"dtype", "fp16"}, {"causal", true}}},
                      {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 6, 10}}, {"max_seqlen_q", 6},
                                  {"qv", {{"head_dim", D}}}}}};
  const Batch b = batch_from(j);
  const ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  REQUIRE(p.attention.qv);
  CHECK(p.attention.softmax_scale == Approx(1.0 / std::sqrt(2.0 * D)));
  const std::vector<float> q = seeded(size_t(total * H * D), num::InputTensor::q);
  const std::vector<float> qv = seeded(q.size(), num::InputTensor::qv);
  const std::vector<float> k = seeded(size_t(total * H * D), num::InputTensor::k);
  const std::vector<float> v = seeded(k.size(), num::InputTensor::v);
  std::vector<float> out(q.size(), NAN), lse(size_t(H * total), NAN);
  const cpu::AttentionResult r =
      cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2, qv.data());
  CHECK_FALSE(r.access.has_first());
  double worst = 0, moved = 0;
  for (int seg = 0; seg < 2; ++seg)
    for (int64_t i = 0; i < lens[seg]; ++i) {
      const int64_t row = starts[seg] + i;
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> s, s0;
        for (int64_t jk = 0; jk <= i; ++jk) {
          const int64_t kr = starts[seg] + jk;
          double qk = 0, qvv = 0;
          for (int64_t d = 0; d < D; ++d) {
            qk += double(q[size_t((row * H + h) * D + d)]) * double(k[size_t((kr * H + h) * D + d)]);
            qvv += double(qv[size_t((row * H + h) * D + d)]) * double(v[size_t((kr * H + h) * D + d)]);
          }
          s.push_back((qk + qvv) / std::sqrt(2.0 * D));
          s0.push_back(qk / std::sqrt(2.0 * D));
        }
        auto attend = [&](const std::vector<double>& sc, int64_t d) {
          double m = -INFINITY, sum = 0, o = 0;
          for (double x : sc) m = std::max(m, x);
          for (double x : sc) sum += std::exp(x - m);
          for (size_t t = 0; t < sc.size(); ++t)
            o += std::exp(sc[t] - m) / sum * double(v[size_t(((starts[seg] + int64_t(t)) * H + h) * D + d)]);
          return o;
        };
        for (int64_t d = 0; d < D; ++d) {
          const double got = out[size_t((row * H + h) * D + d)];
          worst = std::max(worst, std::fabs(got - attend(s, d)));
          moved = std::max(moved, std::fabs(got - attend(s0, d)));
        }
      }
    }
  CHECK(worst < 3e-3);
  // the term matters: without it the output is measurably different
  CHECK(moved > 1e-2);
  // without q_v passed the twin computes q . k alone (the same plan): a different output
  std::vector<float> out0(q.size(), NAN), lse0(lse.size(), NAN);
  (void)cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out0.data(), lse0.data(), 2);
  CHECK(out0 != out);
}

TEST_CASE("fa3 paged and qv: the backward is not run, with FA3's reason", "[fa3_paged_exec]") {
  nlohmann::json j = paged({{0, 1}, {2, 3}, {4, 5}}, {5, 3, 8}, 6);
  j["pass"] = "training";
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  CHECK(p.backward.skip_reason.find("flash_attn_with_kvcache is not an autograd function") != std::string::npos);
  nlohmann::json q = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "3.0.0b1"}, {"gpu_arch", "sm_90a"}}},
                      {"pass", "training"},
                      {"model", {{"num_heads", 2}, {"head_dim", 64}, {"dtype", "bf16"}}},
                      {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8},
                                  {"qv", {{"head_dim", 64}}}}}};
  b = batch_from(q);
  p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  CHECK(p.backward.skip_reason.find("FA3's backward takes no q_v") != std::string::npos);
}
