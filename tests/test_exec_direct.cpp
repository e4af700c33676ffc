// exec/cpu/direct: one varlen call on the caller's buffers through the CPU twins (what
// attn_doctor.ops runs on CPU tensors): values against a direct computation, refused accesses,
// unwritten rows, strided operands, bf16 / fp16 storage, the backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "exec/cpu/direct.hpp"

using namespace ad;

namespace {

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::vector<float> x(n);
  uint32_t s = seed;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = float((s >> 8) & 0xffff) / 32768.f - 1.f;
  }
  return x;
}

direct::TensorView view(const float* data, int64_t rows, int64_t heads, int64_t dim) {
  direct::TensorView t;
  t.data = data;
  t.rows = rows, t.heads = heads, t.dim = dim;
  t.stride[0] = heads * dim, t.stride[1] = dim, t.stride[2] = 1;
  return t;
}

// softmax(q k^T * scale) v for one query row over keys [k0, k1) of one head
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                           int64_t row, int64_t k0, int64_t k1, int64_t H, int64_t h, int64_t D, double scale) {
  std::vector<double> s;
  double m = -1e300;
  for (int64_t j = k0; j < k1; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d) dot += double(q[(row * H + h) * D + d]) * k[(j * H + h) * D + d];
    s.push_back(dot * scale);
    m = std::max(m, s.back());
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - m));
  std::vector<double> o(static_cast<size_t>(D), 0.0);
  for (int64_t j = k0; j < k1; ++j)
    for (int64_t d = 0; d < D; ++d) o[d] += s[j - k0] / z * v[(j * H + h) * D + d];
  return o;
}

}  // namespace

TEST_CASE("direct: a healthy call computes causal attention per segment, every row written", "[direct]") {
  const int64_t T = 20, H = 2, D = 64;
  const auto q = seeded(T * H * D, 1), k = seeded(T * H * D, 2), v = seeded(T * H * D, 3);
  direct::VarlenCall c;
  c.elem = ElemType::fp32;
  c.q = view(q.data(), T, H, D), c.k = view(k.data(), T, H, D), c.v = view(v.data(), T, H, D);
  c.cu_seqlens_q = c.cu_seqlens_k = {0, 5, 12, 20};
  c.max_seqlen_q = c.max_seqlen_k = 8;
  c.softmax_scale = 0.125f;
  c.causal = true;
  REQUIRE(direct::host_refusal(c).empty());
  std::vector<float> out(T * H * D), lse(H * T);
  const direct::ForwardResult r = direct::varlen_forward(c, out.data(), lse.data(), 2);
  CHECK(r.access.count == 0);
  CHECK(r.rows.unwritten == 0);
  CHECK(r.rows.overwritten == 0);
  double worst = 0;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = c.cu_seqlens_q[b]; i < c.cu_seqlens_q[b + 1]; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const auto want = attend(q, k, v, i, c.cu_seqlens_k[b], i + 1, H, h, D, 0.125);
        for (int64_t d = 0; d < D; ++d) worst = std::max(worst, std::fabs(want[d] - out[(i * H + h) * D + d]));
      }
  CHECK(worst < 1e-5);
}

TEST_CASE("direct: cu_seqlens_k past k is refused and recorded, not performed", "[direct]") {
  const int64_t Tq = 16, Tk = 10, D = 64;
  const auto q = seeded(Tq * D, 4), k = seeded(Tk * D, 5);
  direct::VarlenCall c;
  c.elem = ElemType::fp32;
  c.q = view(q.data(), Tq, 1, D), c.k = view(k.data(), Tk, 1, D), c.v = c.k;
  c.cu_seqlens_q = {0, 16};
  c.cu_seqlens_k = {0, 16};
  c.max_seqlen_q = c.max_seqlen_k = 16;
  c.softmax_scale = 0.125f;
  std::vector<float> out(Tq * D), lse(Tq);
  const direct::ForwardResult r = direct::varlen_forward(c, out.data(), lse.data(), 1);
  REQUIRE(r.access.count > 0);
  CHECK(r.access.first.buffer == Buffer::k);
  CHECK(r.access.first.kind == AccessKind::read);
  CHECK(r.access.first.index == 10);
  CHECK(r.access.first.bound == 10);
}

TEST_CASE("direct: rows past the grid of a short max_seqlen_q stay NaN and are counted", "[direct]") {
  const int64_t T = 200, D = 64;
  const auto q = seeded(T * D, 6);
  direct::VarlenCall c;
  c.elem = ElemType::fp32;
  c.q = c.k = c.v = view(q.data(), T, 1, D);
  c.cu_seqlens_q = c.cu_seqlens_k = {0, 200};
  c.max_seqlen_q = 100;  // one 128-row block of FA2's grid (head_dim 64)
  c.max_seqlen_k = 200;
  c.softmax_scale = 0.125f;
  c.causal = true;
  std::vector<float> out(T * D), lse(T);
  const direct::ForwardResult r = direct::varlen_forward(c, out.data(), lse.data(), 1);
  CHECK(r.access.count == 0);
  CHECK(r.rows.unwritten == 72);
  CHECK(r.rows.first_unwritten == 128);
  CHECK(std::isnan(out[128 * D]));
  CHECK_FALSE(std::isnan(out[127 * D]));
}

TEST_CASE("direct: strided bf16 and fp16 operands read in place, outputs stored in the dtype", "[direct]") {
  const int64_t T = 12, H = 2, D = 64;
  const auto f = seeded(T * H * D, 7);
  for (ElemType e : {ElemType::bf16, ElemType::fp16}) {
    // (rows, heads, dim) stored head-major: stride (D, T * D, 1)
    std::vector<uint16_t> buf(T * H * D);
    std::vector<float> contiguous(T * H * D);
    for (int64_t r = 0; r < T; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const float x = f[(r * H + h) * D + d];
          uint16_t bits;
          float rounded;
          if (e == ElemType::bf16) {
            uint32_t u;
            std::memcpy(&u, &x, 4);
            bits = uint16_t(u >> 16);  // truncate: an exact bf16 value
            const uint32_t back = uint32_t(bits) << 16;
            std::memcpy(&rounded, &back, 4);
          } else {
            rounded = std::ldexp(std::round(std::ldexp(x, 10)), -10);  // |x| < 1: a multiple of 2^-10 is exact
            const int ex = rounded == 0 ? 0 : std::ilogb(rounded);
            const uint16_t sign = rounded < 0 ? 0x8000 : 0;
            const float a = std::fabs(rounded);
            bits = a == 0 ? sign
                          : uint16_t(sign | uint16_t((ex + 15) << 10) |
                                     uint16_t(std::lround((std::ldexp(a, -ex) - 1.f) * 1024.f)));
          }
          buf[(h * T + r) * D + d] = bits;
          contiguous[(r * H + h) * D + d] = rounded;
        }
    direct::VarlenCall c;
    c.elem = e;
    direct::TensorView t;
    t.data = buf.data(), t.rows = T, t.heads = H, t.dim = D;
    t.stride[0] = D, t.stride[1] = T * D, t.stride[2] = 1;
    c.q = c.k = c.v = t;
    c.cu_seqlens_q = c.cu_seqlens_k = {0, 5, 12};
    c.max_seqlen_q = c.max_seqlen_k = 7;
    c.softmax_scale = 0.125f;
    std::vector<uint16_t> out(T * H * D);
    std::vector<float> lse(H * T);
    const direct::ForwardResult r = direct::varlen_forward(c, out.data(), lse.data(), 1);
    CHECK(r.access.count == 0);
    CHECK(r.rows.unwritten == 0);
    // row 6 (segment 1), head 1: against the values read back
    const auto want = attend(contiguous, contiguous, contiguous, 6, 5, 12, H, 1, D, 0.125);
    for (int64_t d = 0; d < D; ++d) {
      const uint16_t bits = out[(6 * H + 1) * D + d];
      float got;
      if (e == ElemType::bf16) {
        const uint32_t u = uint32_t(bits) << 16;
        std::memcpy(&got, &u, 4);
      } else {
        const int ex = (bits >> 10) & 0x1f;
        got = (ex == 0 ? std::ldexp(float(bits & 0x3ff), -24) : std::ldexp(float((bits & 0x3ff) | 0x400), ex - 25)) *
              ((bits & 0x8000) ? -1.f : 1.f);
      }
      CHECK(std::fabs(got - want[d]) < (e == ElemType::bf16 ? 2e-2 : 2e-3));
    }
  }
}

TEST_CASE("direct: the backward of a healthy call writes every gradient row, refuses nothing", "[direct]") {
  const int64_t T = 20, H = 4, Hk = 2, D = 64;
  const auto q = seeded(T * H * D, 8), k = seeded(T * Hk * D, 9), v = seeded(T * Hk * D, 10),
             g = seeded(T * H * D, 11);
  direct::VarlenCall c;
  c.elem = ElemType::fp32;
  c.q = view(q.data(), T, H, D), c.k = view(k.data(), T, Hk, D), c.v = view(v.data(), T, Hk, D);
  c.cu_seqlens_q = c.cu_seqlens_k = {0, 9, 20};
  c.max_seqlen_q = c.max_seqlen_k = 11;
  c.softmax_scale = 0.125f;
  c.causal = true;
  std::vector<float> out(T * H * D), lse(H * T);
  direct::varlen_forward(c, out.data(), lse.data(), 1);
  std::vector<float> dq(T * H * D), dk(T * Hk * D), dv(T * Hk * D);
  const direct::BackwardResult r = direct::varlen_backward(c, view(out.data(), T, H, D), view(g.data(), T, H, D),
                                                           lse.data(), dq.data(), dk.data(), dv.data(), 2);
  CHECK(r.dot_do_o.count + r.dq_dk_dv.count + r.convert_dq.count == 0);
  CHECK(r.dq_rows.unwritten == 0);
  CHECK(r.dkv_rows.unwritten == 0);
  // dv of the last key of segment 0 (row 8): only query 8 sees it (causal), with weight p
  // = its softmax probability, so dv = p * dO[8] summed over the group's query heads
  for (int64_t hk = 0; hk < Hk; ++hk) {
    double want = 0;
    for (int64_t h = hk * 2; h < hk * 2 + 2; ++h) {
      double m = -1e300, z = 0;
      std::vector<double> s;
      for (int64_t j = 0; j <= 8; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(q[(8 * H + h) * D + d]) * k[(j * Hk + hk) * D + d];
        s.push_back(dot * 0.125);
        m = std::max(m, s.back());
      }
      for (double& x : s) z += (x = std::exp(x - m));
      want += s[8] / z * g[(8 * H + h) * D + 0];
    }
    CHECK(std::fabs(dv[(8 * Hk + hk) * D + 0] - want) < 1e-5);
  }
}

TEST_CASE("direct: shapes the kernels cannot take are refused on the host", "[direct]") {
  const float x = 0;
  direct::VarlenCall c;
  c.q = view(&x, 4, 3, 64), c.k = view(&x, 4, 2, 64), c.v = c.k;
  c.cu_seqlens_q = c.cu_seqlens_k = {0, 4};
  c.max_seqlen_q = c.max_seqlen_k = 4;
  CHECK(direct::host_refusal(c) == "Number of heads in key/value must divide number of heads in query");
  c.q = view(&x, 4, 2, 512), c.k = c.v = view(&x, 4, 2, 512);
  CHECK(direct::host_refusal(c) == "FlashAttention forward only supports head dimension at most 256");
  c.q = c.k = c.v = view(&x, 4, 2, 64);
  c.cu_seqlens_q = {0};
  CHECK(direct::host_refusal(c) == "batch size must be positive");
}
