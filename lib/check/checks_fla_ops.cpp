// Static: FLA's own ops other than attention (id 48, launch.fla_grid), per the release in
// environment.fla, on the packed x the batch describes (batch-format.md `fla_op`).
//
// token_shift (fla/modules/token_shift.py, token_shift_fwd):
//  - 0.2.2 - 0.3.0: one kernel, grid (N, T) with T the longest document (varlen) or x's T.
//  - 0.3.1 - 0.5.0 (PR#528): the short kernel, grid (N, T), when x's T (the flat packed length)
//    is at most 4096; otherwise the long kernel, grid (ceil(D / BD) = 1, NT, N) with
//    BT = min(64, next_pow2(ceil(max(16, B * T) / multiprocessors))), T the longest document,
//    and NT = sum of ceil(len / BT) over the documents (ceil(T / BT) without cu_seqlens)
//    (fla-org/flash-linear-attention#903).
//  - 0.5.1 on (PR#904): the kernel is chosen from the longest document and the long kernel's
//    time chunks go on grid axis x: no axis near its limit.
#include <algorithm>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

constexpr int64_t kMaxGridYZ = 65535;

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// x's documents: the explicit block's cu_seqlens_q segments (x is [1, total_q, D]), else the
// batch's B rows of query_length tokens. Empty when neither says.
struct PackedX {
  bool varlen = false;
  int64_t B = 1, T = 0;          // x's shape [B, T, D]
  std::vector<int64_t> lengths;  // the documents (varlen), else B rows of T
};

std::optional<PackedX> packed_x(const Ctx& ctx) {
  PackedX x;
  if (ctx.batch.varlen && is_vector(ctx.batch.varlen->cu_seqlens_q)) {
    const auto& cu = ctx.batch.varlen->cu_seqlens_q.values;
    for (size_t i = 1; i < cu.size(); ++i)
      if (cu[i] < cu[i - 1] || cu[i - 1] < 0) return std::nullopt;  // cu_seqlens.* explain it
    x.varlen = true;
    x.T = ctx.batch.varlen->total_q;
    for (size_t i = 1; i < cu.size(); ++i) x.lengths.push_back(cu[i] - cu[i - 1]);
    return x;
  }
  if (!ctx.batch.batch) return std::nullopt;
  x.B = ctx.batch.batch->batch_size;
  x.T = ctx.batch.batch->query_length;
  return x;
}

}  // namespace

// 48 launch.fla_grid
void launch_fla_grid(Ctx& ctx) {
  if (!ctx.batch.fla_op || ctx.batch.fla_op->name != "token_shift" || !ctx.symptoms.fla) return;
  const Version& fla = *ctx.symptoms.fla;
  // token_shift is in fla.modules from 0.2.2; the grid moved off axis y in 0.5.1
  if (fla < version_literal("0.2.2") || !(fla < version_literal("0.5.1"))) return;
  const std::optional<PackedX> x = packed_x(ctx);
  if (!x || x->T <= 0) return;
  const int64_t N = x->varlen ? static_cast<int64_t>(x->lengths.size()) : x->B;
  const int64_t longest = x->varlen ? (x->lengths.empty() ? 0 : *std::max_element(x->lengths.begin(), x->lengths.end())) : x->T;
  const int64_t sms = ctx.batch.fla_op->multiprocessors;
  const std::string release = "FLA " + fla.text;
  nlohmann::json ev = {{"op", "token_shift"}, {"fla", fla.text}, {"documents", N}, {"longest", longest},
                       {"packed_length", x->T}, {"multiprocessors", sms}};
  const bool long_kernel = !(fla < version_literal("0.3.1")) && x->T > 4096;
  int64_t y = 0, z = 1;
  std::string kernel, why;
  if (!long_kernel) {
    // grid (N, T): the longest document's tokens on axis y
    kernel = fla < version_literal("0.3.1") ? "token_shift_fwd_kernel" : "token_shift_fwd_kernel_short";
    y = longest;
    why = release + "'s " + kernel + " launches grid (N, T) = (" + std::to_string(N) + ", " + std::to_string(longest) + "): one program per token of the longest " +
          (x->varlen ? "document" : "row") + " on axis y";
  } else {
    kernel = "token_shift_fwd_kernel_long";
    const int64_t work = std::max<int64_t>(16, checked::mul(x->B, longest).value_or(INT64_MAX));
    const int64_t BT = std::min<int64_t>(64, next_pow2(checked::ceil_div(work, sms)));
    int64_t NT = 0;
    if (x->varlen)
      for (int64_t len : x->lengths) NT = checked::add(NT, checked::ceil_div(len, BT)).value_or(INT64_MAX);
    else
      NT = checked::ceil_div(x->T, BT);
    y = NT;
    z = N;
    ev["block_t"] = BT;
    ev["time_chunks"] = NT;
    why = release + "'s token_shift picks " + kernel + " from x's T = " + std::to_string(x->T) + " (> 4096)" +
          (x->varlen && longest <= 4096 ? " although its longest document has " + std::to_string(longest) + " tokens" : "") +
          ", and launches grid (1, NT, N) = (1, " + std::to_string(NT) + ", " + std::to_string(N) + "): NT time chunks of BT = " +
          std::to_string(BT) + " tokens (" + std::to_string(sms) + " multiprocessors) on axis y";
  }
  ev["kernel"] = kernel;
  ev["grid_y"] = y;
  ev["grid_z"] = z;
  if (y <= kMaxGridYZ && z <= kMaxGridYZ) return;
  const std::string axis = y > kMaxGridYZ ? "y holds " + std::to_string(y) : "z holds " + std::to_string(z);
  Violation& v = ctx.report(Severity::error, why + "; axis " + axis + " blocks, past the 65535 CUDA allows", ev,
                            "Triton Error [CUDA]: invalid argument");
  ctx.symptom(v, long_kernel ? "" : "one_kernel", "RuntimeError: Triton Error [CUDA]: invalid argument");
}

}  // namespace ad::checks
