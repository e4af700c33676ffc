// The call site of an explicit call (the batch's varlen block): the arguments the caller passed,
// by the names it meant, bound to the signature of the API's release (vocab/signature.hpp).
// input.feature reports the TypeError of an argument the release does not take, the advisory
// table the arguments a positional caller binds to other parameters, the execution plan raises
// the TypeError before anything runs.
#pragma once

#include <optional>
#include <string>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "vocab/signature.hpp"

namespace ad {

struct CallSite {
  const Signature* signature = nullptr;  // the release's table
  std::string function;                  // "flash_attn_varlen_func"
  CallArguments args;
  Binding binding;
};

// The arguments the caller passed: q, k, v by position; with `varlen.binding: "positional"`
// also cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k in that order (flash-attn 2's
// order, which positional callers were written against), else by keyword; then, by keyword,
// each call-site fact the batch records (seqused_q, seqused_k, window_size, pack_gqa,
// num_splits) and softcap when the model has one. nullopt without a varlen block, or when the
// API's release has no signature table (flash-attn 2, FLA, TE), and for torch's varlen_attn
// (its own names: torch_signature_error binds it).
std::optional<CallSite> call_site(const Batch& batch, const VarlenArgs& args);

}  // namespace ad
