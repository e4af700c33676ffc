// Static: argument values flash-attn takes without a check of its own (ids 45-46). Both are
// passed through to the kernel unchecked by mha_varlen_fwd, so a value that means nothing
// silently changes what the kernel computes.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "check/static_checks.hpp"

namespace ad::checks {

// 45 seqused_k.range: FA2's BlockInfo takes a sequence's key count from seqused_k when it is
// given (block_info.h: actual_seqlen_k = seqused_k ? seqused_k[bidb] : cu_seqlens_k[bidb + 1] -
// cu_seqlens_k[bidb]). A negative count gives n_block_max = ceil_div(seqused_k[b], kBlockN) <= 0:
// the forward writes zeros and an infinite LSE for every query of that sequence
// (flash_fwd_kernel.h, the early exit when n_block_max <= n_block_min; a varlen call is never
// Is_even_MN). A count past the segment is left to the dynamic stages, which see exactly which
// keys it reaches (attention.access past k and v, result.reference inside them).
void seqused_k_range(Ctx& ctx) {
  const VarlenArgs* a = ctx.args && ctx.args->path != VarlenPath::dense ? ctx.args : nullptr;
  if (!a || !a->seqused_k) return;
  const std::vector<int64_t>& used = *a->seqused_k;
  const auto negative = std::find_if(used.begin(), used.end(), [](int64_t v) { return v < 0; });
  if (negative == used.end()) return;
  const int64_t b = negative - used.begin();
  const int64_t count = std::count_if(used.begin(), used.end(), [](int64_t v) { return v < 0; });
  Violation& v = ctx.report(
      Severity::error,
      "seqused_k[" + std::to_string(b) + "] = " + std::to_string(*negative) + " is negative (" + std::to_string(count) +
          " of " + std::to_string(used.size()) + " entries): seqused_k counts the keys each sequence uses, and the "
          "kernel attends to no key for such a sequence",
      {{"tensor", "seqused_k"}, {"index", b}, {"value", *negative}, {"negative_entries", count}});
  ctx.symptom(v, "");
}

// 46 input.softcap: flash-attn's C++ op takes softcap as a float (mha_varlen_fwd's `const float
// softcap`) and set_params_fprop then uses softmax_scale / softcap as the pre-tanh factor and
// softcap as the scale: score = tanh(s * softmax_scale / softcap) * softcap. Below the smallest
// normal float32 the value either rounds to 0 (softcap > 0.0 is false: the kernel runs without
// a cap) or makes softmax_scale / softcap overflow to inf (every score becomes +-1 times a
// subnormal, ~0: uniform attention; NaN where s == 0). Reasoned from the source (basis model).
void input_softcap(Ctx& ctx) {
  const Model& m = ctx.batch.model;
  if (!m.softcap || !(*m.softcap > 0) || *m.softcap >= static_cast<double>(FLT_MIN)) return;
  if (!ctx.rules().softcap) return;  // a release without softcap: input.feature explains the call
  const double softcap = *m.softcap;
  const float as_float = static_cast<float>(softcap);
  const float scale = m.head_dim > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(m.head_dim))) : 1.f;
  const bool flushed = as_float == 0.f;
  const float factor = flushed ? 0.f : scale / as_float;
  std::string what =
      flushed ? "it rounds to 0 as the float32 flash-attn takes, so the kernel runs without softcap"
              : std::isinf(factor) ? "softmax_scale / softcap overflows float32 to inf, so every score becomes tanh(+-inf) "
                                     "x softcap, about 0: uniform attention (NaN where a score is exactly 0)"
                                   : "a subnormal float32: softmax_scale / softcap is " + nlohmann::json(factor).dump() +
                                         " and every score is scaled by the subnormal softcap, about 0: uniform attention";
  Violation& v = ctx.report(Severity::error,
                            "softcap " + nlohmann::json(softcap).dump() + " is below the smallest normal float32 (" +
                                nlohmann::json(FLT_MIN).dump() + "): " + what,
                            {{"softcap", softcap}, {"softcap_float32", as_float}, {"smallest_normal", FLT_MIN},
                             {"rounds_to_zero", flushed}});
  ctx.symptom(v, flushed ? "flushed" : "");
}

}  // namespace ad::checks
