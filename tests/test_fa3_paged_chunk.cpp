// FlashAttention-3's page_table, qv and attention_chunk: the batch keys (loader), the host
// checks in mha_fwd's order (vocab/host_checks.cpp, the plan, input.feature), the page_table.*
// invariants, the signature of flash_attn_with_kvcache, and attention_chunk in the shared mask
// rule (contract/fa2_forward.hpp) run by the CPU twin against an fp64 reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"
#include "render/render.hpp"
#include "vocab/host_checks.hpp"
#include "vocab/signature.hpp"

using namespace ad;

namespace {

Batch batch_from(const nlohmann::json& j) { return parse_batch_text(j.dump(), "test.json"); }

const Violation* find(const Diagnosis& d, std::string_view id) {
  for (const auto& v : d.report.violations)
    if (v.id == id) return &v;
  return nullptr;
}

Diagnosis static_only(const Batch& b) {
  CheckOptions o;
  o.backend = BackendChoice::none;
  return diagnose(b, o, "test.json");
}

nlohmann::json paged_call(nlohmann::json table, nlohmann::json seqused_k) {
  return {{"format", "attn-doctor/batch@1"},
          {"environment", {{"flash_attn", "3.0.0b1"}, {"gpu_arch", "sm_90a"}}},
          {"model", {{"num_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 128}, {"dtype", "bf16"}}},
          {"varlen", {{"api", "flash_attn_3.kvcache"}, {"cu_seqlens_q", {0, 1, 2, 3}}, {"max_seqlen_q", 1},
                      {"seqused_k", seqused_k},
                      {"page_table", {{"page_size", 256}, {"num_pages", 6}, {"table", table}}}}}};
}

nlohmann::json qv_call(int64_t head_dim, nlohmann::json qv) {
  return {{"format", "attn-doctor/batch@1"},
          {"environment", {{"flash_attn", "3.0.0b1"}, {"gpu_arch", "sm_90a"}}},
          {"model", {{"num_heads", 4}, {"head_dim", head_dim}, {"dtype", "bf16"}}},
          {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8}, {"qv", qv}}}};
}

}  // namespace

TEST_CASE("fa3 paged: the loader's page table and the keys it lays out", "[fa3_paged]") {
  const Batch b = batch_from(paged_call({{0, 1}, {2, 3}, {4, 5}}, {300, 17, 512}));
  REQUIRE(b.varlen->page_table);
  const PageTable& p = *b.varlen->page_table;
  CHECK(p.rows == 3);
  CHECK(p.pages_per_seq == 2);
  CHECK(p.values->size() == 6);
  CHECK(p.dtype == DType::int32);
  // sequence b's keys: the b-th block of 2 * 256 logical rows
  CHECK(b.varlen->cu_seqlens_k.values == std::vector<int64_t>{0, 512, 1024, 1536});
  CHECK(b.varlen->max_seqlen_k.value == 512);
  CHECK(b.varlen->total_k == 1536);
  // the report's varlen block shows the call's page table
  const nlohmann::json rj = varlen_json(explicit_varlen_args(b), true);
  CHECK(rj["page_table"]["shape"] == nlohmann::json({3, 2}));
  CHECK(rj["page_table"]["table"] == nlohmann::json({0, 1, 2, 3, 4, 5}));
  CHECK(rj["page_table"]["num_pages"] == 6);
  CHECK_FALSE(rj.contains("attention_chunk"));

  // a shape without values
  nlohmann::json j = paged_call({{0}}, {1, 1, 1});
  j["varlen"]["page_table"].erase("table");
  j["varlen"]["page_table"]["shape"] = {3, 4};
  const Batch s = batch_from(j);
  CHECK_FALSE(s.varlen->page_table->values);
  CHECK(s.varlen->max_seqlen_k.value == 1024);

  auto error = [](nlohmann::json bad) -> std::string {
    try {
      batch_from(bad);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  nlohmann::json both = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  both["varlen"]["page_table"]["shape"] = {3, 2};
  CHECK(error(both).find("/varlen/page_table") != std::string::npos);
  nlohmann::json with_k = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  with_k["varlen"]["cu_seqlens_k"] = {0, 1, 2, 3};
  CHECK(error(with_k).find("no cu_seqlens_k beside page_table") != std::string::npos);
  nlohmann::json fa2 = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  fa2["varlen"]["api"] = "flash_attn_2.varlen";
  CHECK(error(fa2).find("FlashAttention-3 / -4 API") != std::string::npos);
  nlohmann::json rank1 = paged_call({0, 1}, {1, 1, 1});
  CHECK(error(rank1).find("2-D array") != std::string::npos);
  nlohmann::json chunk = qv_call(64, {{"head_dim", 64}});
  chunk["varlen"]["attention_chunk"] = -1;
  CHECK(error(chunk).find("/varlen/attention_chunk") != std::string::npos);
}

TEST_CASE("fa3 paged: page_table.index and page_table.coverage", "[fa3_paged]") {
  CHECK_FALSE(find(static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 5}}, {300, 17, 512}))), "page_table.index"));
  // page_table[2][1] = 6 of 6 pages, read for keys 256 - 511 of sequence 2
  const Diagnosis past = static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 6}}, {300, 17, 512})));
  const Violation* v = find(past, "page_table.index");
  REQUIRE(v);
  CHECK(v->evidence["sequence"] == 2);
  CHECK(v->evidence["page"] == 1);
  CHECK(v->evidence["value"] == 6);
  // the same entry, unread: sequence 2 holds 256 keys, one page
  CHECK_FALSE(find(static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 6}}, {300, 17, 256}))), "page_table.index"));
  // a negative index
  CHECK(find(static_only(batch_from(paged_call({{0, -1}, {2, 3}, {4, 5}}, {300, 17, 256}))), "page_table.index"));

  // 600 keys need 3 pages of a 2-page row: the third comes from the next row
  const Diagnosis over = static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 5}}, {600, 17, 300})));
  const Violation* c = find(over, "page_table.coverage");
  REQUIRE(c);
  CHECK(c->evidence["sequence"] == 0);
  CHECK(c->evidence["last_row"] == false);
  REQUIRE(over.report.prediction);
  CHECK(over.report.prediction->symptom.outcome == Outcome::wrong_output);
  const Diagnosis last = static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 5}}, {10, 17, 513})));
  REQUIRE(find(last, "page_table.coverage"));
  CHECK(find(last, "page_table.coverage")->evidence["last_row"] == true);
  // without cache_seqlens every sequence holds exactly its row's pages
  nlohmann::json j = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  j["varlen"].erase("seqused_k");
  CHECK_FALSE(find(static_only(batch_from(j)), "page_table.coverage"));
}

TEST_CASE("fa3 paged: mha_fwd's host checks on the page table, in its order", "[fa3_paged]") {
  const HostCheckTable& t = host_checks("fa3");
  auto position = [&](HostCheck c) {
    for (size_t i = 0; i < t.entries.size(); ++i)
      if (t.entries[i].check == c) return i;
    return t.entries.size();
  };
  CHECK(position(HostCheck::v_dtype) < position(HostCheck::page_table_dtype));
  CHECK(position(HostCheck::page_table_dtype) < position(HostCheck::cu_seqlens_q_device));
  CHECK(position(HostCheck::cu_seqlens_k_dtype) < position(HostCheck::batch_size_k));
  CHECK(position(HostCheck::batch_size_k) < position(HostCheck::head_dim_max));
  CHECK(position(HostCheck::head_dim_aligned) < position(HostCheck::qv_head_dim));
  CHECK(position(HostCheck::qv_head_dim) < position(HostCheck::qv_q_dtype));
  CHECK(position(HostCheck::qv_q_dtype) < position(HostCheck::qv_arch));
  CHECK(position(HostCheck::qv_arch) < position(HostCheck::qv_dtype));
  CHECK(position(HostCheck::qv_dtype) < position(HostCheck::qv_shape));

  // int64 page table: the dtype check, before the batch sizes
  nlohmann::json j = paged_call({{0, 1}, {2, 3}}, {1, 1, 1});
  j["varlen"]["page_table"]["dtype"] = "int64";
  const Diagnosis d = static_only(batch_from(j));
  const Violation* f = find(d, "input.feature");
  REQUIRE(f);
  CHECK(f->evidence["upstream_message"] == "page_table must have dtype torch.int32");
  // int32, two rows for three sequences
  j["varlen"]["page_table"].erase("dtype");
  Batch rows = batch_from(j);
  const Diagnosis dr = static_only(rows);
  const Violation* r = find(dr, "input.feature");
  REQUIRE(r);
  CHECK(r->evidence["upstream_message"] == "batch_size must be equal to batch_size_k");
  // the plan raises it before the (paged) attention runs
  ExecPlan p = make_exec_plan(rows, convert(rows), ExecOptions{});
  CHECK(p.skip_reason.empty());
  REQUIRE(p.attention.raises);
  CHECK(p.attention.raises->message == "batch_size must be equal to batch_size_k");
  // the healthy table: no feature error, and flash_attn_with_kvcache binds every argument
  CHECK_FALSE(find(static_only(batch_from(paged_call({{0, 1}, {2, 3}, {4, 5}}, {300, 17, 512}))), "input.feature"));
}

TEST_CASE("fa3: the signatures take page_table, qv, attention_chunk where the release does", "[fa3_paged]") {
  // FA3's flash_attn_varlen_func has no page_table
  nlohmann::json j = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  j["varlen"]["api"] = "flash_attn_3.varlen";
  const Diagnosis dv = static_only(batch_from(j));
  const Violation* v = find(dv, "input.feature");
  REQUIRE(v);
  CHECK(v->evidence["upstream_message"] == "flash_attn_varlen_func() got an unexpected keyword argument 'page_table'");
  // flash_attn_with_kvcache has no seqused_q
  nlohmann::json q = paged_call({{0, 1}, {2, 3}, {4, 5}}, {1, 1, 1});
  q["varlen"]["seqused_q"] = {1, 1, 1};
  const Diagnosis ds = static_only(batch_from(q));
  const Violation* s = find(ds, "input.feature");
  REQUIRE(s);
  CHECK(s->evidence["upstream_message"] == "flash_attn_with_kvcache() got an unexpected keyword argument 'seqused_q'");
  // FA4 has no attention_chunk
  nlohmann::json c = qv_call(64, {{"head_dim", 64}});
  c["varlen"].erase("qv");
  c["varlen"]["api"] = "flash_attn_4.varlen";
  c["varlen"]["attention_chunk"] = 64;
  c["environment"] = {{"flash_attn_4", "4.0.0b36"}};
  const Diagnosis d4 = static_only(batch_from(c));
  const Violation* f4 = find(d4, "input.feature");
  REQUIRE(f4);
  CHECK(f4->evidence["upstream_message"] == "flash_attn_varlen_func() got an unexpected keyword argument 'attention_chunk'");
  const Signature* kv = signature_for(Api::flash_attn_3_kvcache, std::nullopt);
  REQUIRE(kv);
  CHECK(kv->parameters[11].name == "page_table");
}

TEST_CASE("fa3 qv: mha_fwd's q_v checks", "[fa3_paged]") {
  auto first = [](nlohmann::json j) -> std::string {
    const Diagnosis d = static_only(batch_from(j));
    const Violation* v = find(d, "input.feature");
    return v && v->evidence.contains("upstream_message") ? v->evidence["upstream_message"].get<std::string>() : "";
  };
  CHECK(first(qv_call(64, {{"head_dim", 64}})).empty());
  CHECK(first(qv_call(128, {{"head_dim", 128}})) == "q_v is only supported for head_size <= 64");
  nlohmann::json fp8 = qv_call(64, {{"head_dim", 64}});
  fp8["model"]["dtype"] = "fp8_e4m3";
  CHECK(first(fp8) == "q_v is only supported for fp16 and bf16 data type");
  nlohmann::json ampere = qv_call(64, {{"head_dim", 64}});
  ampere["environment"]["gpu_arch"] = "sm_80";
  CHECK(first(ampere) == "q_v is only supported for Hopper GPUs");
  CHECK(first(qv_call(64, {{"head_dim", 64}, {"dtype", "fp16"}})) == "q_v must have the same dtype as query");
  CHECK(first(qv_call(64, {{"head_dim", 32}})) == "q_v must have shape (total_q, num_heads, head_size_v)");
  // the plan raises the same message before the attention runs
  Batch b = batch_from(qv_call(128, {{"head_dim", 128}}));
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  CHECK(p.skip_reason.empty());
  REQUIRE(p.attention.raises);
  CHECK(p.attention.raises->message == "q_v is only supported for head_size <= 64");
}

TEST_CASE("fa3 attention_chunk: the host adjustments and each row's keys", "[fa3_paged]") {
  // causal with a chunk of 4: local, left and right capped at 3, right 0 from causal
  fa2::Normalized n = fa2::normalize({.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1,
                                      .causal = true, .family = 3, .attention_chunk = 4});
  CHECK_FALSE(n.causal);
  CHECK(n.local);
  CHECK(n.window_left == 3);
  CHECK(n.window_right == 0);
  CHECK(n.attention_chunk == 4);
  const fa2::Flags f{n.causal, n.local, int32_t(n.window_left), int32_t(n.window_right), 128, 128, int32_t(n.attention_chunk)};
  // row 5 of (10, 10): its chunk is keys 4 .. 7, causal cuts at 5
  CHECK(fa2::row_keys(5, 10, 10, f).lo == 4);
  CHECK(fa2::row_keys(5, 10, 10, f).hi == 6);
  CHECK(fa2::row_keys(3, 10, 10, f).lo == 0);
  CHECK(fa2::row_keys(3, 10, 10, f).hi == 4);
  // bottom-right aligned on (4 rows, 10 keys): row 0's diagonal is key 6, chunk 4 .. 7
  CHECK(fa2::row_keys(0, 4, 10, f).lo == 4);
  CHECK(fa2::row_keys(0, 4, 10, f).hi == 7);
  // non-causal with a chunk: both sides open, capped at chunk - 1; the chunk bounds the row
  n = fa2::normalize({.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .causal = false,
                      .family = 3, .attention_chunk = 4});
  CHECK(n.local);
  CHECK(n.window_left == 3);
  CHECK(n.window_right == 3);
  const fa2::Flags g{n.causal, n.local, int32_t(n.window_left), int32_t(n.window_right), 128, 128, int32_t(n.attention_chunk)};
  CHECK(fa2::row_keys(5, 10, 10, g).lo == 4);
  CHECK(fa2::row_keys(5, 10, 10, g).hi == 8);
  // a window narrower than the chunk still applies: (1, 0) inside chunk 4 .. 7
  n = fa2::normalize({.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .causal = false,
                      .window_left = 1, .window_right = 0, .family = 3, .attention_chunk = 4});
  const fa2::Flags w{n.causal, n.local, int32_t(n.window_left), int32_t(n.window_right), 128, 128, int32_t(n.attention_chunk)};
  CHECK(fa2::row_keys(4, 10, 10, w).lo == 4);  // the chunk starts at 4, the window at 3
  CHECK(fa2::row_keys(6, 10, 10, w).lo == 5);
  CHECK(fa2::row_keys(6, 10, 10, w).hi == 7);
  // a single query row keeps causal when a chunk is given (mha_fwd's special case needs chunk 0)
  n = fa2::normalize({.max_seqlen_q = 1, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .causal = true,
                      .family = 3, .attention_chunk = 4});
  CHECK(n.window_right == 0);
  // FA2 and FA4 ignore the field
  n = fa2::normalize({.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .causal = true,
                      .family = 2, .attention_chunk = 4});
  CHECK(n.causal);
  CHECK(n.attention_chunk == 0);
}

TEST_CASE("fa3 attention_chunk: the CPU twin against an fp64 reference", "[fa3_paged]") {
  // two segments of 11 and 7 rows, chunk 4, causal and not
  const int64_t H = 2, Hk = 1, D = 32, total = 18, C = 4;
  const int64_t starts[2] = {0, 11}, lens[2] = {11, 7};
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                        {"environment", {{"flash_attn", "3.0.0b1"}}},
                        {"model", {{"num_heads", H}, {"num_kv_heads", Hk}, {"head_dim", D}, {"dtype", "fp16"}, {"causal", causal}}},
                        {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 11, 18}}, {"max_seqlen_q", 11},
                                    {"attention_chunk", C}}}};
    Batch b = batch_from(j);
    ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    REQUIRE_FALSE(p.attention.raises);
    CHECK(p.attention.flags.chunk == C);
    std::vector<float> q(size_t(total * H * D)), k(size_t(total * Hk * D)), v(size_t(total * Hk * D));
    std::vector<float> out(size_t(total * H * D), NAN), lse(size_t(H * total), NAN);
    for (size_t i = 0; i < q.size(); ++i) q[i] = num::input_value(5, num::InputTensor::q, i, ElemType::fp16);
    for (size_t i = 0; i < k.size(); ++i) k[i] = num::input_value(5, num::InputTensor::k, i, ElemType::fp16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = num::input_value(5, num::InputTensor::v, i, ElemType::fp16);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    CHECK_FALSE(r.access.has_first());
    for (int seg = 0; seg < 2; ++seg)
      for (int64_t i = 0; i < lens[seg]; ++i) {
        // keys of row i: its chunk [floor(i / C) * C, + C), up to i when causal
        const int64_t lo = i / C * C, hi = causal ? i + 1 : std::min(lo + C, lens[seg]);
        const int64_t row = starts[seg] + i;
        for (int64_t h = 0; h < H; ++h) {
          std::vector<double> s;
          double m = -INFINITY;
          for (int64_t jk = lo; jk < hi; ++jk) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += double(q[size_t((row * H + h) * D + d)]) * double(k[size_t((starts[seg] + jk) * D + d)]);
            s.push_back(dot / std::sqrt(double(D)));
            m = std::max(m, s.back());
          }
          double sum = 0;
          for (double x : s) sum += std::exp(x - m);
          for (int64_t d = 0; d < D; ++d) {
            double want = 0;
            for (size_t t = 0; t < s.size(); ++t)
              want += std::exp(s[t] - m) / sum * double(v[size_t((starts[seg] + lo + int64_t(t)) * D + d)]);
            CHECK(std::fabs(out[size_t((row * H + h) * D + d)] - want) < 3e-3);
          }
        }
      }
  }
}

TEST_CASE("fa3 attention_chunk: a training step raises in the backward", "[fa3_paged]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "3.0.0b1"}}},
                      {"pass", "training"},
                      {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}}},
                      {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8},
                                  {"attention_chunk", 4}}}};
  const Diagnosis d = static_only(batch_from(j));
  const Violation* v = find(d, "input.feature");
  REQUIRE(v);
  CHECK(v->evidence["upstream_message"] == "FA3 backward does not support attention_chunk");
  REQUIRE(d.report.prediction);
  CHECK(d.report.prediction->symptom.outcome == Outcome::raises);
  CHECK(d.report.prediction->symptom.pass == Pass::backward);
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  CHECK(p.backward.skip_reason.find("FA3 backward does not support attention_chunk") != std::string::npos);
  j["pass"] = "forward";
  CHECK_FALSE(find(static_only(batch_from(j)), "input.feature"));
}
