// Intent provenance: what the result stage compares against, and whether it may vouch for the
// output. The intent is derived from the mask, the position ids or cu_seqlens_q when the batch
// gives none (batch/intent.cpp); when the conversion broke that very input, the derived
// sequences carry the breakage (hf-4.46.3-partial-query-right-padding: the queries are placed
// where the broken mask[:, -Lq:] slice puts them), and agreement with them proves nothing.
#include <algorithm>

#include "check/check.hpp"

namespace ad {

namespace {

// The first static violation among `ids`, or nullptr.
const Violation* first_of(const std::vector<Violation>& found, std::initializer_list<std::string_view> ids) {
  for (const Violation& v : found)
    if (std::find(ids.begin(), ids.end(), v.id) != ids.end()) return &v;
  return nullptr;
}

}  // namespace

IntentTrust assess_intent(const Batch& batch, const std::vector<Violation>& found) {
  IntentTrust t;
  t.source = to_string(batch.intent.source);
  switch (batch.intent.source) {
    case IntentSource::given:
      t.trusted = true;
      t.why = "the intended sequences the batch file gives";
      return t;
    case IntentSource::collator:
      t.trusted = true;
      t.why = "the examples the collator block names";
      return t;
    case IntentSource::none:
      t.trusted = false;
      t.why = "no intended sequences (no mask, position ids, cu_seqlens_q or intent): nothing to compare against";
      return t;
    case IntentSource::mask: {
      const Violation* v = first_of(found, {"mask.padding_side", "mask.binary", "position_ids.rank",
                                            "position_ids.origin", "position_ids.consecutive"});
      if (!v) break;
      t.trusted = false;
      if (v->id == "mask.padding_side")
        t.why = "derived from the mask, whose slice mask[:, -Lq:] the replayed release used to unpad the queries: the "
                "reference places the queries where the broken slice does (mask.padding_side); give `intent` to check the "
                "output";
      else if (v->id == "mask.binary")
        t.why = "derived from a mask holding segment ids, which the release reads as lengths (mask.binary); give `intent` "
                "to check the output";
      else
        t.why = "derived from the mask split where the position ids restart, and the release misreads those position ids (" +
                v->id + "); give `intent` to check the output";
      return t;
    }
    case IntentSource::position_ids: {
      const Violation* v = first_of(found, {"position_ids.rank", "position_ids.origin", "position_ids.consecutive"});
      if (!v) break;
      t.trusted = false;
      t.why = "derived from the position ids whose sequence boundaries the release misreads (" + v->id +
              "); give `intent` to check the output";
      return t;
    }
    case IntentSource::cu_seqlens_q: {
      const Violation* v = first_of(found, {"cu_seqlens.shape", "cu_seqlens.start", "cu_seqlens.monotonic",
                                            "cu_seqlens.total", "cu_seqlens.segments"});
      if (!v) break;
      t.trusted = false;
      t.why = "derived from the cu_seqlens_q under test, which is itself broken (" + v->id +
              "): the reference follows the same segments; give `intent` to check the output";
      return t;
    }
  }
  t.trusted = true;
  t.why = "derived from the " + t.source + " (no invariant of the conversion breaks it)";
  return t;
}

}  // namespace ad
