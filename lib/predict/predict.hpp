// The prediction: what the real stack does with a call (docs/spec/report-format.md#prediction).
//
// The one table of symptoms per invariant (symptoms.cpp: outcome,
// message and basis per id, per case a check selects, per release and pass) and the one
// combination rule that turns the symptoms of a call's violations into the prediction for the
// call as a whole. The oracle (tools/oracle) applies the same rule to what it measures.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vocab/outcome.hpp"
#include "vocab/symptom.hpp"
#include "vocab/version.hpp"

namespace ad {

// The releases and the pass a symptom may depend on. Absent releases: the newest behaviour
// (a table row open towards newer releases applies), as the rule sets do.
struct SymptomContext {
  std::optional<Version> flash_attn;
  std::optional<Version> fla;
  std::optional<Version> transformers;
  int flash_attn_family = 2;  // 1, 2, 3 (hopper), 4 (cute): the flash-attn rule set that applies
  CallPass pass = CallPass::forward;
};

// The table's symptom for an invariant and a case (`variant`, "" = the invariant's default),
// under the context; `message` and `rows`, when given, replace the row's message and rows
// (the check knows the amounts). nullopt: the table has no row for it (no symptom modelled).
std::optional<Symptom> symptom_for(std::string_view invariant, std::string_view variant, const SymptomContext& context,
                                   std::string message = {}, std::vector<RowRange> rows = {});

// One row of the table, for docs, tests and `explain`.
struct SymptomRow {
  std::string_view invariant;
  std::string_view variant;   // "" = the default for the id
  std::string_view library;   // "" | "flash_attn" | "fla" | "transformers": whose release selects the row
  std::string_view from, to;  // [from, to) of that library's releases; "" = open
  bool training_only;         // applies only when the batch's pass is "training"
  Outcome outcome;
  Pass pass;
  Moment at;
  std::string_view message;
  std::string_view basis;
  std::string_view when;      // the case in words
};
std::span<const SymptomRow> symptom_table();

// A symptom of the call, for the combination: the violation's id and catalogue order.
struct Finding {
  std::string_view invariant;
  int order = 0;
  const Symptom* symptom = nullptr;
};

// The combination rule (one definition): loud outcomes (raises, device_assert,
// illegal_address, hang) in the order they happen (Moment, then host raise before device assert
// before fault before hang, then catalogue order) win; otherwise wrong_output > wrong_gradient >
// out_of_bounds > ok (catalogue order among equals). Backward symptoms count only for a
// training call. With nothing to combine: ok, in the last pass the call runs.
Prediction combine(std::span<const Finding> findings, CallPass pass);

// How the caching allocator of PyTorch places a tensor of `bytes` bytes on a CUDA device
// (c10/cuda/CUDACachingAllocator.cpp): the block it rounds to and the segment (one
// cudaMalloc) it is carved from. Accesses past the tensor but inside its segment hit mapped
// memory and raise nothing; past the segment they reach memory that is usually unmapped.
struct AllocatorPlacement {
  int64_t block_bytes = 0;    // the rounded request
  int64_t segment_bytes = 0;  // the cudaMalloc the block lives in
};
AllocatorPlacement caching_allocator_placement(int64_t bytes);

}  // namespace ad
