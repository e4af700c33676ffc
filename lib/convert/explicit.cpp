// The batch file's explicit `varlen` block as the arguments that reached the kernel.
#include "convert/convert.hpp"

namespace ad {

std::string to_string(VarlenPath p) {
  switch (p) {
    case VarlenPath::mask: return "mask";
    case VarlenPath::position_ids: return "position_ids";
    case VarlenPath::kwargs: return "kwargs";
    case VarlenPath::explicit_varlen: return "explicit";
    case VarlenPath::dense: return "dense";
  }
  return "?";
}

Api flash_attn_api(const std::optional<Version>& release, bool dense) {
  const long major = release && !release->release.empty() ? release->release.front() : 2;
  if (major == 3) return dense ? Api::flash_attn_3_dense : Api::flash_attn_3_varlen;
  if (major >= 4) return dense ? Api::flash_attn_4_dense : Api::flash_attn_4_varlen;
  return dense ? Api::flash_attn_2_dense : Api::flash_attn_2_varlen;
}

void set_flash_attn_release(KernelCall& call, const std::optional<Version>& release) {
  call.api = flash_attn_api(release, !is_varlen(call.api));
  call.release = release;
}

// Kernel flags a correct call derives from the model: FA2's window_size is inclusive on
// both sides, so a window of W tokens (the query itself included) is (W - 1, 0) when causal.
KernelCall kernel_call_for(const Model& model) {
  KernelCall call;
  call.causal = model.causal;
  if (model.sliding_window && *model.sliding_window > 0) {
    call.window_left = *model.sliding_window - 1;
    call.window_right = model.causal ? 0 : *model.sliding_window - 1;
  }
  call.softcap = model.softcap;
  call.dropout = model.dropout;
  return call;
}

void set_explicit_release(KernelCall& call, const ExplicitVarlen& e, const std::optional<Version>& flash_attn) {
  set_flash_attn_release(call, flash_attn);
  if (!e.api) return;
  call.api = *e.api;
  // the flash-attn release names this API's release only when the API is flash-attn's
  if (flash_attn_family(call.api) == 0) call.release.reset();
}

VarlenArgs explicit_varlen_args(const Batch& batch) {
  const ExplicitVarlen& e = *batch.varlen;
  VarlenArgs a;
  a.path = VarlenPath::explicit_varlen;
  a.library = "batch";
  a.rule_set = "explicit";
  a.cu_seqlens_q = e.cu_seqlens_q;
  a.cu_seqlens_k = e.cu_seqlens_k;
  a.max_seqlen_q = {e.max_seqlen_q.value, e.max_seqlen_q.is_tensor, DType::int32};
  a.max_seqlen_k = {e.max_seqlen_k.value, e.max_seqlen_k.is_tensor, DType::int32};
  a.seqused_k = e.seqused_k;
  // rows of the packed tensors: total_q/total_k, else the tensors' row overrides, else cu[-1]
  const TensorOverride* q = batch.override_for("q");
  const TensorOverride* k = batch.override_for("k");
  a.total_q = e.total_q_given ? e.total_q : (q && q->rows) ? *q->rows : e.total_q;
  a.total_k = e.total_k_given ? e.total_k : (k && k->rows) ? *k->rows : e.total_k;
  a.call = kernel_call_for(batch.model);
  a.seqused_q = e.seqused_q;
  a.page_table = e.page_table;
  a.qv = e.qv;
  a.attention_chunk = e.attention_chunk;
  // the batch file says what was passed; how, only where it records `binding`
  set_explicit_release(a.call, e, kernel_release(batch));
  if (e.window_size) std::tie(a.call.window_left, a.call.window_right) = *e.window_size;
  a.steps.push_back("arguments taken as written in the batch file's varlen block");
  // A packed batch (one row of S tokens in the `batch` block) says how many rows q and k/v
  // have: cu_seqlens ending past them overruns the tensors (cu_seqlens.total), it does not
  // describe longer tensors. Without the block (or with total_q/total_k or row overrides)
  // the rows are cu[-1] as before.
  if (batch.batch && batch.batch->batch_size == 1) {
    const BatchInputs& in = *batch.batch;
    if (!e.total_q_given && !(q && q->rows) && a.total_q > in.query_length) {
      a.total_q = in.query_length;
      a.steps.push_back("q rows: the packed batch's " + std::to_string(in.query_length) + " tokens");
    }
    if (!e.total_k_given && !(k && k->rows) && a.total_k > in.kv_length) {
      a.total_k = in.kv_length;
      a.steps.push_back("k/v rows: the packed batch's " + std::to_string(in.kv_length) + " tokens");
    }
  }
  return a;
}

}  // namespace ad
