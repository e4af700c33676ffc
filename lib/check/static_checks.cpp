// run_static_checks(): every static invariant's check, in catalogue order, then the violations
// sorted by catalogue order (stable: a check's own violations keep their order).
#include <algorithm>

#include "check/static_checks.hpp"

namespace ad {

std::vector<Violation> run_static_checks(const Batch& batch, const Conversion& conversion, const CheckContext& context) {
  std::vector<Violation> out;
  const auto& fa_release = context.flash_attn ? context.flash_attn : kernel_release(batch);
  const VarlenArgs* replayed = conversion.replayed ? &*conversion.replayed : nullptr;
  // A replay that failed the way the release fails (the key gather out of range) never called
  // the kernel: its partial fields feed the conversion checks, not the kernel-argument ones.
  const VarlenArgs* reached = conversion.effective();
  if (reached && reached == replayed && replayed->failure) reached = nullptr;
  // The API the call was made through: what reached the kernel, else the replay (a replay that
  // failed before the kernel still names the API it was calling).
  const VarlenArgs* call = conversion.effective();
  const std::optional<Api> api = call ? std::optional<Api>(call->call.api) : std::nullopt;
  // torch's varlen_attn runs PyTorch's bundled FA2: FA2 varlen's invariants speak for it, with
  // the torch release's rules and host-check messages (environment.torch), never flash-attn's.
  const bool torch_varlen = api == Api::torch_varlen_attn;
  checks::Ctx ctx{batch, conversion, reached, replayed, context,
                  torch_varlen                                           ? resolve_torch_varlen(batch.environment.torch)
                  : !context.flash_attn && batch.environment.flash_attn_cute ? resolve_flash_attn_cute(*fa_release)
                                                                             : resolve_flash_attn(fa_release),
                  out};
  ctx.symptoms = symptom_context(batch, context.flash_attn, context.transformers);
  for (const Invariant& inv : catalogue()) {
    if (!inv.check) continue;
    if (api && !inv.apis.contains(*api) && !(torch_varlen && inv.apis.contains(Api::flash_attn_2_varlen))) continue;
    ctx.current = &inv;
    inv.check(ctx);
  }
  std::stable_sort(out.begin(), out.end(), [](const Violation& a, const Violation& b) { return a.order < b.order; });
  return out;
}

}  // namespace ad
