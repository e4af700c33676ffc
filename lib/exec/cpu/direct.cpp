// One varlen call on the caller's buffers through the CPU twins (direct.hpp).
#include "exec/cpu/direct.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "contract/rotary.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/numeric.hpp"
#include "exec/plan/plan.hpp"
#include "exec/reference/misroute.hpp"

namespace ad::direct {

namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kInt32Max = 2147483647;

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float f;
  if (exp == 0) f = std::ldexp(float(man), -24);
  else if (exp == 31) f = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else f = std::ldexp(float(man | 0x400u), int(exp) - 25);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

// x already holds an fp16 value (num::round_fp16), so this is exact.
uint16_t float_to_half(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const float a = std::fabs(x);
  if (a != a) return uint16_t(sign | 0x7e00u);
  if (a == std::numeric_limits<float>::infinity() || a > 65504.f) return uint16_t(sign | 0x7c00u);
  if (a < 6.103515625e-05f) return uint16_t(sign | uint16_t(std::lround(a * 16777216.f)));  // subnormal: a / 2^-24
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const uint16_t man = uint16_t(std::lround((m * 2.f - 1.f) * 1024.f));
  return uint16_t(sign | uint16_t((e - 1 + 15) << 10) | man);
}

float load(const void* data, ElemType elem, int64_t i) {
  switch (elem) {
    case ElemType::fp32: return static_cast<const float*>(data)[i];
    case ElemType::fp16: return half_to_float(static_cast<const uint16_t*>(data)[i]);
    default: {
      const uint32_t u = uint32_t(static_cast<const uint16_t*>(data)[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
  }
}

void store(void* data, ElemType elem, int64_t i, float x) {
  switch (elem) {
    case ElemType::fp32: static_cast<float*>(data)[i] = x; break;
    case ElemType::fp16: static_cast<uint16_t*>(data)[i] = float_to_half(num::round_fp16(x)); break;
    default: {
      const float r = num::round_bf16(x);
      uint32_t u;
      std::memcpy(&u, &r, 4);
      static_cast<uint16_t*>(data)[i] = uint16_t(u >> 16);
    }
  }
}

// The tensor as the twins read it: fp32, contiguous (rows, heads, dim).
std::vector<float> gather(const TensorView& t, ElemType elem) {
  std::vector<float> x(static_cast<size_t>(t.rows * t.heads * t.dim));
  size_t o = 0;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t h = 0; h < t.heads; ++h)
      for (int64_t d = 0; d < t.dim; ++d) x[o++] = load(t.data, elem, r * t.stride[0] + h * t.stride[1] + d * t.stride[2]);
  return x;
}

void scatter(const std::vector<float>& x, void* dst, ElemType elem) {
  for (size_t i = 0; i < x.size(); ++i) store(dst, elem, static_cast<int64_t>(i), x[i]);
}

template <class Count>
Coverage coverage(const std::vector<Count>& writes) {
  Coverage c;
  for (size_t r = 0; r < writes.size(); ++r) {
    if (writes[r] == 0) {
      if (c.unwritten++ == 0) c.first_unwritten = static_cast<int64_t>(r);
    } else if (writes[r] > 1) {
      if (c.overwritten++ == 0) c.first_overwritten = static_cast<int64_t>(r);
    }
  }
  return c;
}

// The attention and backward parts of an ExecPlan for the call, as make_exec_plan builds
// them for a batch (flash-attn 2.8's rules: unpadded LSE, the backward's dq_accum offsets).
ExecPlan plan_for(const VarlenCall& c) {
  ExecPlan p;
  p.function = "flash_attn_varlen_func";
  p.api = Api::flash_attn_2_varlen;
  p.elem = c.elem;
  p.num_heads = c.q.heads;
  p.num_kv_heads = c.k.heads;
  p.head_dim = c.q.dim;
  p.rows_q_src = c.q.rows;
  p.rows_k_src = c.k.rows;
  p.rows_final = c.q.rows;
  AttentionPlan& at = p.attention;
  at.num_heads = c.q.heads;
  at.num_kv_heads = c.k.heads;
  at.head_dim = c.q.dim;
  at.softmax_scale = c.softmax_scale;
  at.softcap = c.softcap > 0 ? c.softcap : 0.f;
  at.tile = fa2::tile_for(static_cast<int>(std::min<int64_t>(c.q.dim, 256)), false, at.arch);
  at.cu_seqlens_q = c.cu_seqlens_q;
  at.cu_seqlens_k = c.cu_seqlens_k;
  at.total_q = c.q.rows;
  at.total_k = c.k.rows;
  at.num_segments = std::max<int64_t>(static_cast<int64_t>(c.cu_seqlens_q.size()) - 1, 0);
  const fa2::Normalized n = fa2::normalize({.max_seqlen_q = c.max_seqlen_q,
                                            .max_seqlen_k = c.max_seqlen_k,
                                            .num_heads = c.q.heads,
                                            .num_heads_k = c.k.heads,
                                            .head_dim = c.q.dim,
                                            .causal = c.causal,
                                            .window_left = c.window_left,
                                            .window_right = c.window_right,
                                            .dropout = false});
  set_attention_grid(at, n, c.max_seqlen_k);
  at.unpadded_lse = true;
  at.lse_elements = c.q.heads * c.q.rows;
  at.zero_fill = c.max_seqlen_k <= 0;
  at.seqused_k = c.seqused_k;  // the forward's segments (the backward's ignore it: ref::backward_segment)
  p.attention.past_rows = attention_tiles_past_rows(p);

  BackwardPlan& bw = p.backward;
  bw.enabled = true;
  bw.release = fa2::bwd::release_rules(2, 8, 3);
  plan_backward_kernel(p, c.max_seqlen_q, c.causal, c.window_left, c.window_right);
  return p;
}

int worker_threads(int threads) { return std::max(1, threads); }

// The backward's launch check (contract/fa2_backward.hpp keys_past_grid, keys_past_seqused),
// noted as the checked CUDA preprocess kernel records it: by dot_do_o's CTA (0, b, h) of every
// segment that CTA runs for (len_q > 0), one note per head.
void launch_check(const VarlenCall& c, const ExecPlan& plan, AccessRecord& rec) {
  const fa2::bwd::Normalized& kn = plan.backward.kernel;
  const int64_t N = plan.attention.num_segments;
  if (kn.grid_m <= 0) return;
  for (int64_t b = 0; b < N; ++b) {
    const ref::BackwardSegment s = ref::backward_segment(plan.attention, b);
    if (s.len_q <= 0) continue;
    const fa2::bwd::KeysLeftOut grid = fa2::bwd::keys_past_grid(s.len_k, kn.n_blocks, kn.tile.block_n);
    const fa2::bwd::KeysLeftOut used = c.seqused_k ? fa2::bwd::keys_past_seqused(s.len_k, (*c.seqused_k)[size_t(b)])
                                                   : fa2::bwd::KeysLeftOut{};
    for (int64_t h = 0; h < c.q.heads; ++h) {
      const uint64_t program = order::grid_linear(0, uint64_t(b), uint64_t(h), uint64_t(kn.grid_m), uint64_t(N));
      auto note = [&](const fa2::bwd::KeysLeftOut& k, Region region, int64_t sub) {
        if (k.count <= 0) return;
        const int64_t row = s.start_k + k.first;
        rec.note(order::key(program, fa2::bwd::order_class::kDotReads, sub),
                 Access{.buffer = Buffer::k, .kind = AccessKind::read, .unit = Unit::rows, .region = region,
                        .index = row, .bound = k.first, .block = {0, b, h}, .segment = b, .row = row, .head = h,
                        .tile = 0},
                 uint64_t(k.count));
      };
      note(grid, Region::max_seqlen, fa2::bwd::order_class::kLaunchCheckGrid);
      note(used, Region::seqused, fa2::bwd::order_class::kLaunchCheckSeqused);
    }
  }
}

}  // namespace

std::string host_refusal(const VarlenCall& c) {
  const int64_t batch = static_cast<int64_t>(c.cu_seqlens_q.size()) - 1;
  if (batch <= 0) return "batch size must be positive";
  if (static_cast<int64_t>(c.cu_seqlens_k.size()) != batch + 1) return "cu_seqlens_k must have shape (batch_size + 1)";
  if (c.q.dim > 256) return "FlashAttention forward only supports head dimension at most 256";
  if (c.k.heads <= 0 || c.q.heads % c.k.heads != 0)
    return "Number of heads in key/value must divide number of heads in query";
  if (c.k.heads != c.v.heads || c.k.rows != c.v.rows || c.k.dim != c.q.dim || c.v.dim != c.q.dim)
    return "key and value must have the same number of rows and heads, and q, k, v the same head dim";
  if (c.seqused_k && static_cast<int64_t>(c.seqused_k->size()) != batch) return "seqused_k must have shape (batch_size)";
  if (c.max_seqlen_q > kInt32Max || c.max_seqlen_q < 0 || c.max_seqlen_k > kInt32Max || c.max_seqlen_k < 0)
    return "max_seqlen does not fit a C int";
  const int64_t grid_m = (c.max_seqlen_q + 63) / 64;
  if (batch > 65535 || c.q.heads > 65535 || grid_m > kInt32Max)
    return "CUDA error: invalid configuration argument (grid past the launch limits)";
  return "";
}

ForwardResult varlen_forward(const VarlenCall& c, void* out, float* lse, int threads) {
  const ExecPlan plan = plan_for(c);
  const std::vector<float> q = gather(c.q, c.elem), k = gather(c.k, c.elem), v = gather(c.v, c.elem);
  const int64_t total_q = c.q.rows, H = c.q.heads, D = c.q.dim;
  std::vector<float> o(static_cast<size_t>(total_q * H * D), kPoison);
  std::vector<float> l(static_cast<size_t>(H * total_q), kPoison);
  ForwardResult res;
  if (plan.attention.zero_fill) {
    // max_seqlen_k <= 0: FA2 launches nothing, zero-fills out and sets the LSE to +inf
    std::fill(o.begin(), o.end(), 0.f);
    std::fill(l.begin(), l.end(), std::numeric_limits<float>::infinity());
  } else {
    cpu::AttentionResult r = cpu::fa2_varlen_forward(plan, q.data(), k.data(), v.data(), o.data(), l.data(),
                                                     worker_threads(threads));
    res.access = r.access;
    res.access.merge(plan.attention.past_rows.access);
    res.rows = coverage(r.writes);
  }
  scatter(o, out, c.elem);
  std::memcpy(lse, l.data(), l.size() * sizeof(float));
  return res;
}

BackwardResult varlen_backward(const VarlenCall& c, const TensorView& out, const TensorView& dout, const float* lse,
                               void* dq, void* dk, void* dv, int threads) {
  const ExecPlan plan = plan_for(c);
  const std::vector<float> q = gather(c.q, c.elem), k = gather(c.k, c.elem), v = gather(c.v, c.elem);
  const std::vector<float> o = gather(out, c.elem), g = gather(dout, c.elem);
  BackwardResult res;
  std::vector<float> dq32, dk32, dv32;
  if (!plan.backward.kernel.launches || plan.attention.zero_fill) {
    dq32.assign(static_cast<size_t>(c.q.rows * c.q.heads * c.q.dim), 0.f);
    dk32.assign(static_cast<size_t>(c.k.rows * c.k.heads * c.k.dim), 0.f);
    dv32 = dk32;
  } else {
    AttentionBackwardObservation ob =
        cpu::fa2_varlen_backward(plan, q.data(), k.data(), v.data(), o.data(), lse, g.data(), worker_threads(threads));
    res.dot_do_o = ob.dot_do_o;
    launch_check(c, plan, res.dot_do_o);
    res.dq_dk_dv = ob.dq_dk_dv;
    res.convert_dq = ob.convert_dq;
    res.dq_rows = coverage(ob.dq_writes);
    res.dkv_rows = coverage(ob.dkv_writes);
    dq32 = std::move(ob.dq), dk32 = std::move(ob.dk), dv32 = std::move(ob.dv);
  }
  scatter(dq32, dq, c.elem);
  scatter(dk32, dk, c.elem);
  scatter(dv32, dv, c.elem);
  return res;
}

RotaryResult rotary(const RotaryCall& c, void* out, int threads) {
  ExecPlan p;
  p.elem = c.elem;
  p.num_heads = c.x.heads;
  p.head_dim = c.x.dim;
  RotaryPlan& r = p.rotary;
  r.enabled = true;
  r.contract = c.contract;
  r.dim = 2 * c.half;
  r.half = c.half;
  r.interleaved = c.interleaved;
  r.table_rows = c.table_rows;
  r.varlen = c.varlen;
  r.inplace = c.contract == RotaryContract::flash_attn || c.inplace;
  r.offsets_per_sequence = c.per_sequence;
  r.offsets_q = c.offsets.empty() ? std::vector<int64_t>{0} : c.offsets;
  const int64_t rows = c.x.rows, heads = c.x.heads, D = c.x.dim;
  if (c.varlen) {
    r.cu_q = c.cu_seqlens;
    r.max_seqlen_q = c.max_seqlen;
  } else {
    r.positions_q.resize(static_cast<size_t>(rows));
    const int64_t L = std::max<int64_t>(c.seqlen, 1);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t b = i / L;
      const int64_t off = c.per_sequence ? (b < static_cast<int64_t>(r.offsets_q.size()) ? r.offsets_q[size_t(b)] : 0)
                                         : r.offsets_q.front();
      r.positions_q[size_t(i)] = i % L + off;
    }
  }
  r.block_rows = c.contract == RotaryContract::flash_attn
                     ? rope::flash_attn_block_m(r.dim, c.interleaved, c.fa_minor)
                     : rope::fla_block_t(c.varlen ? rows : c.seqlen);
  const std::vector<float> x = gather(c.x, c.elem);
  // flash_attn rotates in place and FLA's inplace=True writes x: the rows no program writes
  // keep x; FLA's new tensor starts as torch.empty_like (NaN here)
  std::vector<float> y = r.inplace ? x : cpu::rotary_output(p, x.data(), rows, heads);
  const RotaryCallObservation ob =
      cpu::rotary_apply(p, true, x.data(), y.data(), rows, heads, c.cos.data(), c.sin.data(), std::max(1, threads),
                        c.conjugate);
  RotaryResult res;
  res.outside_tensor = ob.outside_tensor;
  res.outside_head = ob.outside_head;
  res.table = ob.table;
  res.rotated = ob.rotated;
  res.left = ob.past_table;
  res.not_visited = ob.not_visited;
  if (!r.inplace) {
    const int64_t cols = std::min<int64_t>(2 * c.half, D);
    std::vector<uint8_t> written(static_cast<size_t>(rows), 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t h = 0; h < heads && written[size_t(i)]; ++h)
        for (int64_t e = 0; e < cols; ++e)
          if (std::isnan(y[size_t((i * heads + h) * D + e)]) && !std::isnan(x[size_t((i * heads + h) * D + e)])) {
            written[size_t(i)] = 0;
            break;
          }
    res.rows = coverage(written);
  }
  scatter(y, out, c.elem);
  return res;
}

}  // namespace ad::direct
