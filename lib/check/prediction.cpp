// The bridge from violations to the prediction: the context the symptom table reads, the
// default symptom of each violation, and the call's prediction (lib/predict's combination rule).
#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"
#include "check/static_checks.hpp"

namespace ad {

namespace {

// The case of a dynamic observation, from its evidence (exec/run/observe.cpp): the rotary kernel's first
// refused access says whether it read before the table, outside its head, or past the tensor.
// attention.coverage: output rows that are only a tail of padding past cu_seqlens_q[-1] (read
// as padding in a training step when the batch does not say, as cu_seqlens.total does) harm
// nothing the user reads.
std::string_view dynamic_variant(const Violation& v, const Batch& batch) {
  if (v.id == "attention.coverage") {
    const int64_t never = v.evidence.value("never_written", int64_t{0}), rows = v.evidence.value("rows", int64_t{0});
    const int64_t first = v.evidence.value("first_never_written", int64_t{0});
    if (never <= 0 || v.evidence.contains("written_twice") || v.evidence.contains("outside_segment") ||
        first + never != rows)
      return "";
    const checks::RowsIntent tail = checks::packed_rows_intent(batch, first, rows);
    const bool as_padding = tail == checks::RowsIntent::padding ||
                            (tail == checks::RowsIntent::unknown && batch.pass == CallPass::training);
    return as_padding ? "padding" : "";
  }
  if (v.id == "rotary.access") {
    if (v.evidence.value("table", 0) > 0) return "table";
    if (v.evidence.value("outside_head", 0) > 0) return "head";
    return "tensor";
  }
  return "";
}

}  // namespace

SymptomContext symptom_context(const Batch& batch, const std::optional<Version>& flash_attn_override,
                               const std::optional<Version>& transformers_override) {
  SymptomContext c;
  c.flash_attn = flash_attn_override ? flash_attn_override : kernel_release(batch);
  c.fla = batch.environment.fla;
  c.transformers = transformers_override ? transformers_override : batch.environment.transformers;
  c.flash_attn_family = !flash_attn_override && batch.environment.flash_attn_cute
                            ? resolve_flash_attn_cute(*c.flash_attn).rules->family
                            : resolve_flash_attn(c.flash_attn).rules->family;
  c.pass = batch.pass;
  return c;
}

Prediction predict_call(std::vector<Violation>& violations, const Batch& batch,
                        const std::optional<Version>& flash_attn_override, bool trusted_reference,
                        const std::vector<AdvisoryMatch>* advisories,
                        const std::optional<Version>& transformers_override) {
  const SymptomContext context = symptom_context(batch, flash_attn_override, transformers_override);
  // the static checks found the unpad gather's assert deferred past flash-attn's host checks
  // (checks::gather_assert_deferred): the dynamic stage's observation of that gather is too
  bool gather_deferred = false;
  for (const Violation& v : violations)
    gather_deferred |= v.id == "indices.range" && v.symptom && v.symptom->at == Moment::attention;
  std::vector<Finding> findings;
  for (Violation& v : violations) {
    if (!v.symptom) {
      // a warning is latent: its "warning" case says what it does (nothing modelled: none)
      std::string_view variant = v.severity == Severity::warning ? "warning" : dynamic_variant(v, batch);
      if (v.id == "unpad.gather" && gather_deferred && variant.empty()) variant = "async";
      v.symptom = symptom_for(v.id, variant, context);
      // a raise: the message this very case gives, where the check knows it
      if (v.symptom && v.symptom->outcome == Outcome::raises && v.evidence.contains("upstream_message") &&
          v.evidence["upstream_message"].is_string())
        v.symptom->message = v.evidence["upstream_message"].get<std::string>();
    }
    if ((v.id == "result.reference" || v.id == "backward.reference") && !trusted_reference) continue;
    findings.push_back({v.id, v.order, v.symptom ? &*v.symptom : nullptr});
  }
  if (advisories) {
    constexpr int kAfterCatalogue = 1 << 20;  // an advisory ranks after every invariant among equals
    int i = 0;
    for (const AdvisoryMatch& m : *advisories)
      if (!m.possible) findings.push_back({m.advisory->id, kAfterCatalogue + i++, &m.symptom});
  }
  return combine(findings, batch.pass);
}

}  // namespace ad
