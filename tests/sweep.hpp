// The generated sweep of the execution stages, shared by the CPU tests (tests/test_exec.cpp)
// and the CUDA lane (tests/test_cuda_backend.cpp, run by scripts/gpu-check): seeded batches,
// each with the dynamic violations it must produce.
//
//  - valid_cases(): correct calls (random segment lengths, GQA, head dims, dtypes, causal or
//    not, sliding windows, softcap, rotary on/off with every contract, explicit varlen, the
//    mask path, single-query decoding, the dense path). Expected: no dynamic violation, and
//    result.reference passes.
//  - broken_cases(): one generator per broken-metadata class, each yielding the dynamic
//    violation that class must produce.
//
// Header-only, no test framework: a case is a batch file text (what a user would write)
// plus, for the mask and dense paths, the conversion built here the way transformers'
// _upad_input builds it, not by the replay: the sweep tests the execution stages alone,
// whatever a rule set does (the replay has its own goldens, tests/test_convert_golden.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "convert/convert.hpp"

namespace ad::sweep {

// splitmix64: a small seeded generator (the sweep must be identical on every machine)
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(next() % v.size())]; }
};

enum class Route { explicit_varlen, mask, dense };

struct Case {
  std::string klass;                     // "valid", "overrun", "decreasing", ...
  std::string name;
  nlohmann::json batch;                  // the batch file
  Route route = Route::explicit_varlen;  // how the conversion is obtained
  bool four_d = false;                   // mask route: the mask reaching unpad is 4-D
  std::vector<std::string> expect;       // dynamic violation ids that must be reported
  std::string expect_raise;              // a stage must say it raises this (substring)
  uint64_t seed = 0;                     // --seed for the run
};

inline Batch load(const Case& c) { return parse_batch_text(c.batch.dump(), "sweep/" + c.name + ".json"); }

inline IntTensor int_tensor(std::vector<int64_t> v, DType t = DType::int32) {
  IntTensor x;
  x.shape = {static_cast<int64_t>(v.size())};
  x.values = std::move(v);
  x.dtype = t;
  return x;
}

// transformers' _upad_input on a 2-D mask with Lq == Lk (or 4-D: the indices enumerate mask
// entries and the key gather fails, as the release fails).
inline VarlenArgs mask_unpad(const Batch& b, bool four_d) {
  VarlenArgs a;
  a.path = VarlenPath::mask;
  a.library = "transformers";
  a.rule_set = "sweep-unpad";
  const Mask& m = *b.batch->attention_mask;
  const IntTensor& t = m.tensor;
  const int64_t B = b.batch->batch_size, Lk = b.batch->kv_length, Lq = b.batch->query_length;
  std::vector<int64_t> idx, cu{0};
  const int64_t S = t.dim(-1);
  const int64_t rows = t.numel() / S;
  int64_t mx = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t n = 0;
    for (int64_t c = 0; c < S; ++c)
      if (t.values[static_cast<size_t>(r * S + c)] != 0) {
        idx.push_back(r * S + c);
        ++n;
      }
    cu.push_back(cu.back() + n);
    mx = std::max(mx, n);
  }
  a.indices_k = int_tensor(idx, DType::int64);
  a.cu_seqlens_k = int_tensor(cu);
  (void)four_d;  // a 4-D mask fails in the key gather below, before cu_seqlens matters
  a.max_seqlen_k = {mx, false, DType::int64};
  a.gather_rows_k = B * Lk;
  a.total_k = static_cast<int64_t>(idx.size());
  a.call = kernel_call_for(b.model);
  for (int64_t i : idx)
    if (i >= B * Lk) {
      a.failure = ReplayFailure{"_flash_attention_forward > _upad_input > index_first_axis(key_layer, indices_k)",
                                "RuntimeError", "index out of bounds",
                                "ScatterGatherKernel.cu: Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed"};
      return a;
    }
  a.indices_q = a.indices_k;
  a.cu_seqlens_q = a.cu_seqlens_k;
  a.max_seqlen_q = a.max_seqlen_k;
  a.gather_rows_q = B * Lq;
  a.total_q = a.total_k;
  return a;
}

// The conversion a case runs with: the batch file's explicit block, or the mask unpad above,
// or the dense path.
inline Conversion conversion_for(const Case& c, const Batch& b) {
  if (c.route == Route::explicit_varlen) return convert(b);
  Conversion cv;
  if (c.route == Route::mask) {
    cv.replayed = mask_unpad(b, c.four_d);
  } else {
    VarlenArgs a;
    a.path = VarlenPath::dense;
    a.call = kernel_call_for(b.model);
    a.call.api = ad::Api::flash_attn_2_dense;
    cv.replayed = a;
  }
  return cv;
}

// ---------------------------------------------------------------------------------------

namespace detail {

inline nlohmann::json model(Rng& g, int64_t& H, int64_t& Hk, int64_t& D, bool allow_big = true) {
  Hk = g.pick<int64_t>({1, 1, 2, 2, 4});
  H = Hk * g.pick<int64_t>({1, 1, 2, 3, 4});
  std::vector<int64_t> dims = {32, 40, 64, 64, 64, 80, 96, 128, 128};
  if (allow_big) dims.insert(dims.end(), {160, 192, 256});
  D = g.pick(dims);
  nlohmann::json m = {{"num_heads", H}, {"num_kv_heads", Hk}, {"head_dim", D}};
  const double d = static_cast<double>(g.next() % 100);
  m["dtype"] = d < 50 ? "bf16" : d < 85 ? "fp16" : "fp32";
  m["causal"] = g.chance(0.7);
  if (g.chance(0.25)) m["sliding_window"] = g.range(1, 48);
  if (g.chance(0.2)) m["softcap"] = g.pick<double>({0.3, 1.0, 5.0, 30.0, 50.0});
  return m;
}

inline void maybe_rotary(Rng& g, nlohmann::json& j, int64_t D, bool varlen_only) {
  if (!g.chance(0.45)) return;
  std::vector<std::string> impls = {"flash_attn", "fla"};
  if (!varlen_only) impls.push_back("hf");
  const std::string impl = g.pick(impls);
  int64_t dim = g.chance(0.7) ? D : std::max<int64_t>(2, (D / 2) / 2 * 2);
  if (dim % 2) dim -= 1;
  j["rotary"] = {{"implementation", impl}, {"dim", dim}, {"interleaved", g.chance(0.3)}};
  if (g.chance(0.2)) j["rotary"]["base"] = 500000.0;
}

inline std::vector<int64_t> lengths(Rng& g, int64_t n, int64_t lo, int64_t hi) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(g.range(lo, hi));
  return v;
}

inline std::vector<int64_t> cumsum(const std::vector<int64_t>& len) {
  std::vector<int64_t> cu{0};
  for (int64_t l : len) cu.push_back(cu.back() + l);
  return cu;
}

inline int64_t max_of(const std::vector<int64_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

}  // namespace detail

// Correct calls. Kept small (a few hundred tokens) so that hundreds run in seconds.
inline std::vector<Case> valid_cases(uint64_t seed, int count) {
  using namespace detail;
  std::vector<Case> out;
  Rng g(seed);
  for (int i = 0; i < count; ++i) {
    Case c;
    c.klass = "valid";
    c.seed = g.next() % 1000;
    int64_t H, Hk, D;
    nlohmann::json m = model(g, H, Hk, D);
    const int64_t max_len = D >= 192 ? 100 : 300;
    const int kind = static_cast<int>(g.next() % 10);
    nlohmann::json j = {{"format", "attn-doctor/batch@1"}, {"model", m}};
    if (kind < 5) {
      // explicit packed self-attention (zero-length segments allowed)
      std::vector<int64_t> len = lengths(g, g.range(1, 6), 1, max_len);
      if (g.chance(0.15)) len.insert(len.begin() + static_cast<long>(g.next() % len.size()), 0);
      auto cu = cumsum(len);
      j["varlen"] = {{"cu_seqlens_q", cu}, {"max_seqlen_q", max_of(len)}};
      maybe_rotary(g, j, D, true);
      // rotary on the packed tensor without cu_seqlens: positions run on across sequences,
      // which leaves every relative position (all attention sees) unchanged
      if (j.contains("rotary") && g.chance(0.3)) j["rotary"]["varlen"] = false;
      c.route = Route::explicit_varlen;
      c.name = "valid-" + std::to_string(i) + "-packed";
    } else if (kind < 6) {
      // single-query decoding against per-sequence keys (the swapped path when H > Hk)
      const int64_t n = g.range(1, 6);
      std::vector<int64_t> q(static_cast<size_t>(n), 1), k = lengths(g, n, 1, 2 * max_len);
      j["varlen"] = {{"cu_seqlens_q", cumsum(q)}, {"cu_seqlens_k", cumsum(k)}, {"max_seqlen_q", 1}, {"max_seqlen_k", max_of(k)}};
      c.route = Route::explicit_varlen;
      c.name = "valid-" + std::to_string(i) + "-decode";
    } else if (kind < 9) {
      // padded batch through the attention mask
      const int64_t B = g.range(1, 4), S = g.range(2, std::min<int64_t>(max_len, 96));
      std::vector<int64_t> len = lengths(g, B, 1, S);
      const std::string side = g.chance(0.5) ? "left" : "right";
      j["batch"] = {{"attention_mask", {{"lengths", len}, {"width", S}, {"padding_side", side}}}};
      if (g.chance(0.5)) j["batch"]["position_ids"] = {{"from", "mask"}};
      maybe_rotary(g, j, D, false);
      if (j.contains("rotary")) j["rotary"]["varlen"] = j["rotary"]["implementation"] != "hf";
      c.route = Route::mask;
      c.name = "valid-" + std::to_string(i) + "-mask-" + side;
    } else {
      // dense: one sequence per row, no padding
      const int64_t B = g.range(1, 3), S = g.range(1, max_len);
      j["batch"] = {{"batch_size", B}, {"query_length", S}, {"kv_length", S}};
      nlohmann::json seqs = nlohmann::json::array();
      for (int64_t r = 0; r < B; ++r) seqs.push_back({{"row", r}, {"start", 0}, {"length", S}});
      j["intent"] = {{"sequences", seqs}};
      c.route = Route::dense;
      c.name = "valid-" + std::to_string(i) + "-dense";
    }
    j["name"] = c.name;
    c.batch = j;
    out.push_back(std::move(c));
  }
  return out;
}

// The broken-metadata classes and the dynamic violation each must produce.
inline const std::vector<std::string>& broken_classes() {
  static const std::vector<std::string> k = {"overrun",      "decreasing", "max_too_small", "merged",     "split",
                                             "single_query", "single_query_raises", "rotary_dim", "rotary_table", "mask_4d",
                                             "mask_kv_length"};
  return k;
}

inline Case broken_case(const std::string& klass, uint64_t seed, int variant) {
  using namespace detail;
  Rng g(seed * 1315423911ull + static_cast<uint64_t>(variant) * 2654435761ull + std::hash<std::string>{}(klass));
  Case c;
  c.klass = klass;
  c.name = klass + "-" + std::to_string(variant);
  c.seed = g.next() % 1000;
  int64_t H, Hk, D;
  nlohmann::json m = model(g, H, Hk, D, false);
  m.erase("sliding_window");
  nlohmann::json j = {{"format", "attn-doctor/batch@1"}, {"name", c.name}, {"model", m}};
  if (klass == "overrun") {
    // cu_seqlens_q[-1] past the rows of q/k/v: the last segment reads and writes past them
    std::vector<int64_t> len = lengths(g, g.range(1, 4), 8, 100);
    auto cu = cumsum(len);
    const int64_t total = cu.back() - g.range(1, std::min<int64_t>(len.back(), 20));
    j["varlen"] = {{"cu_seqlens_q", cu}, {"max_seqlen_q", max_of(len)}, {"total_q", total}};
    c.expect = {"attention.access"};
  } else if (klass == "decreasing") {
    // cu_seqlens goes down: a negative segment computes nothing, the next one rewrites rows
    std::vector<int64_t> len = lengths(g, 3, 20, 80);
    auto cu = cumsum(len);
    const int64_t back = g.range(5, len[1] + 10);
    cu[2] = cu[1] - back;  // segment 1 has a negative length; segment 2 overlaps segment 0
    j["varlen"] = {{"cu_seqlens_q", cu}, {"max_seqlen_q", max_of(len) + back}};
    c.expect = {"attention.coverage"};
  } else if (klass == "max_too_small") {
    // max_seqlen_q below a segment longer than one tile: its rows past the grid never computed
    std::vector<int64_t> len = lengths(g, g.range(1, 3), 10, 60);
    len.push_back(g.range(300, 420));
    auto cu = cumsum(len);
    j["varlen"] = {{"cu_seqlens_q", cu}, {"max_seqlen_q", g.range(8, 120)}};
    c.expect = {"attention.coverage"};
  } else if (klass == "merged" || klass == "split") {
    // the segments are not the intended sequences: cross-contamination or truncated context
    std::vector<int64_t> len = lengths(g, g.range(2, 4), 12, 90);
    auto cu = cumsum(len);
    nlohmann::json seqs = nlohmann::json::array();
    for (size_t i = 0; i < len.size(); ++i) seqs.push_back({{"row", 0}, {"start", cu[i]}, {"length", len[i]}});
    std::vector<int64_t> wrong;
    if (klass == "merged") {
      const size_t drop = 1 + static_cast<size_t>(g.next() % (cu.size() - 2));
      for (size_t i = 0; i < cu.size(); ++i)
        if (i != drop) wrong.push_back(cu[i]);
    } else {
      const size_t at = static_cast<size_t>(g.next() % len.size());
      for (size_t i = 0; i < cu.size(); ++i) {
        wrong.push_back(cu[i]);
        if (i == at) wrong.push_back(cu[i] + len[i] / 2);
      }
    }
    int64_t mx = 0;
    for (size_t i = 1; i < wrong.size(); ++i) mx = std::max(mx, wrong[i] - wrong[i - 1]);
    j["varlen"] = {{"cu_seqlens_q", wrong}, {"max_seqlen_q", mx}};
    j["intent"] = {{"sequences", seqs}};
    j["model"]["causal"] = true;
    c.expect = {"result.reference"};
  } else if (klass == "single_query" || klass == "single_query_raises") {
    // max_seqlen_q == 1 with GQA: FA2 swaps heads into rows and assumes one query per segment
    Hk = g.pick<int64_t>({1, 2, 4});
    H = Hk * g.pick<int64_t>({2, 3, 4});
    D = g.pick<int64_t>({64, 128});
    j["model"]["num_heads"] = H;
    j["model"]["num_kv_heads"] = Hk;
    j["model"]["head_dim"] = D;
    const int64_t n = g.range(3, 6);
    std::vector<int64_t> q(static_cast<size_t>(n), 1), k = lengths(g, n, 4, 60);
    const size_t z = static_cast<size_t>(g.next() % static_cast<uint64_t>(n - 1));
    q[z] = 0;  // a zero-length segment (Dao-AILab/flash-attention#1537)
    if (klass == "single_query") q[z + 1] = 2;  // ... and a segment with two queries: total_q == N
    j["varlen"] = {{"cu_seqlens_q", cumsum(q)}, {"cu_seqlens_k", cumsum(k)}, {"max_seqlen_q", 1}, {"max_seqlen_k", max_of(k)}};
    if (klass == "single_query") {
      c.expect = {"attention.coverage", "result.reference"};
    } else {
      c.expect = {"attention.coverage"};  // the call raises: no output row is written
      c.expect_raise = "is invalid for input of size";
    }
  } else if (klass == "rotary_dim") {
    // RotaryEmbedding(dim=hidden_size) with FLA's kernel (fla-org/flash-linear-attention#180)
    if (H < 2) {
      H = 2 * Hk;
      j["model"]["num_heads"] = H;
    }
    D = g.pick<int64_t>({32, 64});
    j["model"]["head_dim"] = D;
    j["model"]["hidden_size"] = H * D;
    std::vector<int64_t> len = lengths(g, g.range(1, 3), 4, 40);
    j["varlen"] = {{"cu_seqlens_q", cumsum(len)}, {"max_seqlen_q", max_of(len)}};
    j["rotary"] = {{"implementation", "fla"}, {"dim", H * D}};
    c.expect = {"rotary.access"};
  } else if (klass == "rotary_table") {
    // per-sequence offsets past a fixed table: flash_attn leaves those rows unrotated
    std::vector<int64_t> len = lengths(g, g.range(2, 4), 16, 64);
    const int64_t table = max_of(len) + g.range(0, 8);
    std::vector<int64_t> off;
    for (size_t i = 0; i < len.size(); ++i) off.push_back(i == 0 ? 0 : table - g.range(0, len[i] / 2));
    j["varlen"] = {{"cu_seqlens_q", cumsum(len)}, {"max_seqlen_q", max_of(len)}};
    j["rotary"] = {{"implementation", "flash_attn"}, {"dim", D}, {"table_length", table}, {"seqlen_offset", off}};
    j["model"]["softcap"] = nullptr;
    j["model"].erase("softcap");
    c.expect = {"result.reference"};
  } else if (klass == "mask_4d") {
    // a 4-D (B, 1, S, S) mask reaches _upad_input: indices enumerate mask entries
    const int64_t B = g.range(1, 3), S = g.range(4, 24);
    std::vector<int64_t> len = lengths(g, B, 1, S);
    j["batch"] = {{"attention_mask",
                   {{"shape", {B, 1, S, S}},
                    {"from", {{"lengths", len}, {"width", S}, {"padding_side", "left"}}},
                    {"style", "boolean"},
                    {"causal", true}}}};
    c.route = Route::mask;
    c.four_d = true;
    c.expect = {"unpad.gather"};
  } else if (klass == "mask_kv_length") {
    // the mask is wider than the keys (Gemma-2 sliding window, FLA decoding): the key gather
    // indices run past B * Lk
    const int64_t B = g.range(1, 3), Lk = g.range(4, 32), W = Lk + g.range(4, 32);
    std::vector<int64_t> len = lengths(g, B, W - Lk + 1, W);
    j["batch"] = {{"attention_mask", {{"lengths", len}, {"width", W}, {"padding_side", "left"}}},
                  {"query_length", Lk},
                  {"kv_length", Lk}};
    c.route = Route::mask;
    c.expect = {"unpad.gather"};
  }
  c.batch = j;
  return c;
}

inline std::vector<Case> broken_cases(uint64_t seed, int per_class) {
  std::vector<Case> out;
  for (const std::string& k : broken_classes())
    for (int v = 0; v < per_class; ++v) out.push_back(broken_case(k, seed, v));
  return out;
}

}  // namespace ad::sweep
