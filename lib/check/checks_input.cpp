// Static: inputs (ids 1-5). What flash-attn's host code checks before any kernel runs, per the
// release named in environment.flash_attn (flash_attn_rules.cpp gives each release's rules and
// messages), plus the 32-bit index limit the kernels do not check.
#include "contract/fa2_backward.hpp"
#include "util/checked_math.hpp"
#include "check/call_site.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

DType tensor_dtype(const Batch& b, const char* name) {
  if (const TensorOverride* o = b.override_for(name); o && o->dtype) return *o->dtype;
  return b.model.dtype;
}

bool dtype_supported(const FlashAttnRules& r, DType t) {
  return t == DType::fp16 || t == DType::bf16 || (r.fp8 && t == DType::fp8_e4m3);
}

std::string family_name(const FlashAttnRules& r) { return "FA" + std::to_string(r.family); }

// The longest key range a query sees in this call: the longest k segment of what reached the
// kernel, else the key length of the padded batch.
int64_t longest_key_range(const Ctx& ctx) {
  int64_t longest = 0;
  if (ctx.args && ctx.args->path != VarlenPath::dense && is_vector(ctx.args->cu_seqlens_k)) {
    const IntTensor& cu = ctx.args->cu_seqlens_k;
    for (size_t i = 0; i + 1 < cu.values.size(); ++i)
      if (auto l = segment_length(cu, i); l && *l > longest) longest = *l;
    return longest;
  }
  return ctx.batch.batch ? ctx.batch.batch->kv_length : 0;
}

}  // namespace

// 1 input.dtype: flash_api.cpp checks q's dtype first, then that k and v match it (the family's
// host-check table, vocab/host_checks.cpp, has each message); FA3 adds fp8_e4m3, FA4 from
// 4.0.0b10 too.
void input_dtype(Ctx& ctx) {
  const FlashAttnRules& r = ctx.rules();
  DType q = tensor_dtype(ctx.batch, "q"), k = tensor_dtype(ctx.batch, "k"), v = tensor_dtype(ctx.batch, "v");
  nlohmann::json ev = {{"q", to_string(q)}, {"k", to_string(k)}, {"v", to_string(v)}, {"flash_attn", ctx.fa.label()}};
  if (!dtype_supported(r, q)) {
    ev["supported"] = r.fp8 ? "fp16, bf16, fp8_e4m3" : "fp16, bf16";
    ctx.report(Severity::error,
               "q is " + to_string(q) + " but " + family_name(r) + " (flash_attn " + ctx.fa.label() + ") only runs " +
                   ev["supported"].get<std::string>(),
               ev, r.host_checks().message(HostCheck::q_dtype));
    return;
  }
  if (k != q || v != q) {
    ctx.report(Severity::error,
               "q, k and v do not share one dtype (q " + to_string(q) + ", k " + to_string(k) + ", v " + to_string(v) + ")", ev,
               r.host_checks().message(k != q ? HostCheck::k_dtype : HostCheck::v_dtype));
  }
}

// 2 input.head_dim: at most 256 (FA1: 128); a head dim that is not a multiple of 8 is padded
// silently by FA2 (in C++ up to 2.6, in flash_attn_interface.py from 2.7.0) and rejected by FA1,
// FA3 and FA4 (16 for fp8 on FA3/FA4).
void input_head_dim(Ctx& ctx) {
  const FlashAttnRules& r = ctx.rules();
  const int64_t D = ctx.batch.model.head_dim;
  const int64_t align = head_dim_alignment(r, tensor_dtype(ctx.batch, "q"));
  nlohmann::json ev = {{"head_dim", D}, {"max_head_dim", r.max_head_dim}, {"alignment", align}, {"flash_attn", ctx.fa.label()}};
  if (D > r.max_head_dim) {
    ctx.report(Severity::error,
               "head_dim " + std::to_string(D) + " is above the " + std::to_string(r.max_head_dim) + " that " + family_name(r) +
                   " (flash_attn " + ctx.fa.label() + ") supports",
               ev, r.host_checks().message(HostCheck::head_dim_max));
    return;
  }
  if (D % align == 0) return;
  const int64_t padded = (D / align + 1) * align;
  ev["padded_to"] = padded;
  if (r.alignment == HeadDimAlignment::required) {
    ctx.report(Severity::error,
               "head_dim " + std::to_string(D) + " is not a multiple of " + std::to_string(align) + "; " + family_name(r) +
                   " (flash_attn " + ctx.fa.label() + ") rejects it",
               ev, r.host_checks().message(HostCheck::head_dim_aligned));
    return;
  }
  const char* where = r.alignment == HeadDimAlignment::padded_in_cpp ? "in C++ (mha_varlen_fwd, releases 2.0 - 2.6)"
                                                                      : "in Python (flash_attn_interface.py, releases 2.7 -)";
  ctx.report(Severity::warning,
             "head_dim " + std::to_string(D) + " is not a multiple of 8: flash-attn pads q, k and v to " +
                 std::to_string(padded) + " " + where +
                 ", an extra copy of every tensor per call, and the GQA single-query fast path is off",
             ev);
}

// 3 input.gqa: num_heads a multiple of num_kv_heads (FA2, FA3, FA4: heads_divide in the
// family's host-check table); FA1 takes k/v with num_heads heads only (kv_heads_equal).
void input_gqa(Ctx& ctx) {
  const FlashAttnRules& r = ctx.rules();
  const int64_t H = ctx.batch.model.num_heads, Hk = ctx.batch.model.num_kv_heads;
  nlohmann::json ev = {{"num_heads", H}, {"num_kv_heads", Hk}, {"flash_attn", ctx.fa.label()}};
  if (!r.gqa && H != Hk) {
    ctx.report(Severity::error,
               "num_kv_heads " + std::to_string(Hk) + " differs from num_heads " + std::to_string(H) +
                   "; FA1 has no multi-query / grouped-query attention",
               ev, r.host_checks().message(HostCheck::kv_heads_equal));
    return;
  }
  if (H % Hk != 0)
    ctx.report(Severity::error,
               "num_heads " + std::to_string(H) + " is not a multiple of num_kv_heads " + std::to_string(Hk) +
                   " (remainder " + std::to_string(H % Hk) + ")",
               ev, r.host_checks().message(HostCheck::heads_divide));
}

// 4 input.feature, torch.varlen_attn: an argument the torch release's signature does not take
// (vocab/signature.hpp) is Python's TypeError before any check or kernel runs (measured on
// 2.11.0: seqused_k=, oracle case oracle-torch-varlen-seqused-k). The batch records the
// arguments beyond max_k as call-site facts; they are passed by keyword (2.11 makes them
// keyword-only). True when it reported.
static bool torch_signature(Ctx& ctx) {
  if (!ctx.args || ctx.args->call.api != Api::torch_varlen_attn) return false;
  const std::optional<TorchSignatureError> error = torch_signature_error(ctx.batch);
  if (!error) return false;
  const Signature& sig = *error->signature;
  const std::optional<Version>& torch = ctx.batch.environment.torch;
  const std::string release = torch ? "torch " + torch->text : "torch " + std::string(sig.first) + " (none given)";
  if (error->exception != "TypeError") {  // 2.12.0 on: the head-count check before the custom op
    Violation& v = ctx.report(Severity::error,
                              release + "'s varlen_attn checks the head counts before anything runs and raises " +
                                  error->exception + ": " + error->message + " (enable_gqa " +
                                  (ctx.batch.varlen && ctx.batch.varlen->enable_gqa.value_or(false) ? "True" : "not passed") +
                                  ", torch/nn/attention/varlen.py)",
                              {{"feature", "enable_gqa"}, {"signature", sig.source}}, error->message);
    ctx.symptom(v, "signature", error->exception + ": " + error->message);
    return true;
  }
  std::string takes;
  for (size_t i = 7; i < sig.parameters.size(); ++i)  // after query, key, value, cu_seq_q/k, max_q/k
    takes += (takes.empty() ? "" : ", ") + std::string(sig.parameters[i].name);
  Violation& v = ctx.report(Severity::error,
                            release + "'s varlen_attn does not take this argument, so the call raises TypeError before "
                                      "anything runs: " + error->message + " (its arguments after max_k: " + takes + ")",
                            {{"feature", "signature"}, {"signature", sig.source}}, error->message);
  ctx.symptom(v, "signature", "TypeError: " + error->message);
  return true;
}

// 4 input.feature: window_size exists from 2.3.0 (transformers checks the signature and
// silently drops the window before that); softcap from 2.6.0 (transformers <= 4.54 passes it
// anyway -> TypeError; 4.55 - 5.17 drop it silently; 5.23 raises); softcap with dropout raises
// on every FA2 release that has softcap; FA3/FA4 have no dropout argument.
// FlashAttention-3's page table, q_v and attention_chunk (hopper/flash_api.cpp mha_fwd as of
// v2.8.3; hopper/flash_attn_interface.py's backward): the first of mha_fwd's checks on them that
// fails, in the release's order, then the backward's assert on attention_chunk. A call whose
// arguments do not bind raises TypeError first (reported above).
static void fa3_call_extras(Ctx& ctx) {
  const ExplicitVarlen* e = ctx.batch.varlen ? &*ctx.batch.varlen : nullptr;
  if (!ctx.args || !e || ctx.args->path != VarlenPath::explicit_varlen || flash_attn_family(ctx.args->call.api) != 3) return;
  if (const std::optional<CallSite> site = call_site(ctx.batch, *ctx.args); site && site->binding.type_error) return;
  const Model& m = ctx.batch.model;
  const PageTable* paged = e->page_table ? &*e->page_table : nullptr;
  const QvArg* qv = e->qv ? &*e->qv : nullptr;
  const int64_t batch_size = ctx.args->cu_seqlens_q.numel() - 1;
  auto failing = [&](HostCheck c) {
    switch (c) {
      case HostCheck::page_table_dtype: return paged && paged->dtype != DType::int32;
      case HostCheck::batch_size_k: return paged && paged->rows != batch_size;  // cu_seqlens_k: cu_seqlens.shape
      case HostCheck::qv_head_dim: return qv && m.head_dim > 64;
      case HostCheck::qv_q_dtype: return qv && m.dtype == DType::fp8_e4m3;
      case HostCheck::qv_arch: return qv && ctx.batch.environment.gpu_arch && ctx.batch.environment.gpu_arch->compute_capability() != 90;
      case HostCheck::qv_dtype: return qv && qv->dtype && *qv->dtype != m.dtype;
      case HostCheck::qv_shape: return qv && qv->head_dim != m.head_dim;
      default: return false;
    }
  };
  const HostCheckTable& host = host_checks("fa3");
  for (const HostCheckEntry& entry : host.entries) {
    if (!failing(entry.check)) continue;
    const std::string raised = std::string(entry.type) + ": " + std::string(entry.message);
    std::string what;
    nlohmann::json evidence = {{"check", entry.condition}, {"source", entry.source}};
    if (paged) evidence["page_table"] = {{"rows", paged->rows}, {"pages_per_sequence", paged->pages_per_seq},
                                         {"page_size", paged->page_size}, {"num_pages", paged->num_pages},
                                         {"dtype", to_string(paged->dtype)}};
    if (qv) evidence["qv_head_dim"] = qv->head_dim;
    switch (entry.check) {
      case HostCheck::page_table_dtype: what = "page_table is " + to_string(paged->dtype) + ", not int32"; break;
      case HostCheck::batch_size_k:
        what = "page_table has " + std::to_string(paged->rows) + " rows for " + std::to_string(batch_size) + " sequences";
        break;
      case HostCheck::qv_head_dim: what = "q_v with head_dim " + std::to_string(m.head_dim) + " (at most 64)"; break;
      case HostCheck::qv_q_dtype: what = "q_v with " + to_string(m.dtype) + " inputs"; break;
      case HostCheck::qv_arch: what = "q_v on " + to_string(*ctx.batch.environment.gpu_arch) + " (Hopper only)"; break;
      case HostCheck::qv_dtype: what = "q_v is " + to_string(*qv->dtype) + " and q " + to_string(m.dtype); break;
      default:
        what = "q_v's last dim is " + std::to_string(qv->head_dim) + ", v's head dim " + std::to_string(m.head_dim);
        break;
    }
    Violation& v = ctx.report(Severity::error,
                              what + ": " + std::string(function_name(ctx.args->call.api)) +
                                  " (FlashAttention-3 mha_fwd) raises " + raised,
                              std::move(evidence), std::string(entry.message));
    ctx.symptom(v, "", raised);
    return;
  }
  if (ctx.batch.pass != CallPass::training) return;
  // flash_attn_with_kvcache is no autograd function, and torch.ops.flash_attn_3.fwd registers
  // no autograd kernel: torch's default autograd fallback (warn) hands the backward undefined
  // gradients, so nothing flows through the attention (the backward's assert never runs)
  if (ctx.args->call.api == Api::flash_attn_3_kvcache) {
    const std::string message = "flash_attn_3::fwd: an autograd kernel was not registered to the Autograd key(s) but we "
                                "are trying to backprop through it";
    Violation& v = ctx.report(Severity::error,
                              "flash_attn_with_kvcache in a training step: it is not an autograd function and "
                              "torch.ops.flash_attn_3.fwd registers no autograd kernel, so torch's autograd fallback "
                              "warns at the backward and passes no gradient through the attention to q, k_cache or v_cache",
                              {{"feature", "flash_attn_with_kvcache"},
                               {"source", "hopper/flash_attn_interface.py flash_attn_with_kvcache; hopper/flash_api.cpp "
                                          "TORCH_LIBRARY_IMPL(flash_attn_3, CUDA); torch/csrc/autograd/"
                                          "autograd_not_implemented_fallback.cpp WarnNotImplemented"}},
                              message);
    ctx.symptom(v, "kvcache_backward", "no error; UserWarning: " + message + "; q, k_cache and v_cache get no gradient "
                                       "from the attention");
    return;
  }
  if (e->attention_chunk && *e->attention_chunk != 0) {
    const std::string message = "FA3 backward does not support attention_chunk";
    Violation& v = ctx.report(Severity::error,
                              "attention_chunk " + std::to_string(*e->attention_chunk) + " in a training step: the forward "
                              "runs, then the backward raises AssertionError: " + message,
                              {{"feature", "attention_chunk"}, {"attention_chunk", *e->attention_chunk},
                               {"source", "hopper/flash_attn_interface.py FlashAttnVarlenFunc.backward"}},
                              message);
    ctx.symptom(v, "chunk_backward", "AssertionError: " + message);
    return;
  }
  // FA3's autograd backward takes no q_v: the kernel recomputes the probabilities from q . k
  // alone against the forward's LSE (which includes q_v . v), and q_v's gradient is None
  if (qv) {
    Violation& v = ctx.report(Severity::error,
                              "q_v in a training step: FA3's backward passes no q_v to the kernel and returns no gradient "
                              "for it, so dq, dk and dv are computed from q . k alone against the forward's LSE, which "
                              "includes q_v . v",
                              {{"feature", "qv"}, {"qv_head_dim", qv->head_dim},
                               {"source", "hopper/flash_attn_interface.py FlashAttnVarlenFunc.backward / FlashAttnFunc.backward"}});
    ctx.symptom(v, "qv_backward");
  }
}

void input_feature(Ctx& ctx) {
  const FlashAttnRules& r = ctx.rules();
  const Model& m = ctx.batch.model;
  const auto& tf = ctx.symptoms.transformers;  // --transformers, else the batch's
  if (torch_signature(ctx)) return;  // the call raises TypeError before anything else runs
  if (m.sliding_window && *m.sliding_window > 0 && !r.window) {
    const int64_t W = *m.sliding_window, longest = longest_key_range(ctx);
    const bool matters = longest > W;
    Violation& v = ctx.report(matters ? Severity::error : Severity::warning,
               "sliding_window " + std::to_string(W) + " needs flash-attn >= 2.3.0 (window_size); with flash_attn " +
                   ctx.fa.label() + " transformers drops the window silently and computes full attention" +
                   (matters ? " over key ranges up to " + std::to_string(longest) + " tokens"
                            : " (no key range in this batch is longer than the window)"),
               {{"feature", "sliding_window"}, {"sliding_window", W}, {"longest_key_range", longest},
                {"needs", "2.3.0"}, {"flash_attn", ctx.fa.label()}});
    if (matters)
      ctx.symptom(v, "dropped", "no error; full attention instead of the " + std::to_string(W) +
                                    "-token window over key ranges up to " + std::to_string(longest) + " tokens");
  }
  if (m.softcap && *m.softcap > 0 && !r.softcap) {
    std::string upstream, what;
    if (tf && *tf >= version_literal("5.23.0")) {
      upstream = "This flash attention implementation does not support `softcap`. Try using `eager` or `flex_attention` instead.";
      what = "transformers " + tf->text + " raises";
    } else if (tf && *tf >= version_literal("4.55.0")) {
      what = "transformers " + tf->text + " drops softcap silently (supports_mapping), so logits are not capped";
    } else {
      upstream = "flash_attn_varlen_func() got an unexpected keyword argument 'softcap'";
      what = tf ? "transformers " + tf->text + " passes softcap anyway and the call raises TypeError"
                : "transformers <= 4.54 passes it anyway (TypeError), 4.55 - 5.17 drop it silently";
    }
    Violation& v = ctx.report(Severity::error,
               "softcap " + nlohmann::json(*m.softcap).dump() + " needs flash-attn >= 2.6.0; flash_attn " + ctx.fa.label() +
                   " has none: " + what,
               {{"feature", "softcap"}, {"softcap", *m.softcap}, {"needs", "2.6.0"}, {"flash_attn", ctx.fa.label()}}, upstream);
    if (upstream.empty()) ctx.symptom(v, "dropped", "no error; the attention logits are not capped");
  }
  if (m.softcap && *m.softcap > 0 && m.dropout > 0 && r.softcap && r.dropout && !r.softcap_with_dropout)
    ctx.report(Severity::error,
               "softcap and dropout " + nlohmann::json(m.dropout).dump() + " together: flash_attn " + ctx.fa.label() +
                   " rejects the combination",
               {{"feature", "softcap+dropout"}, {"softcap", *m.softcap}, {"dropout", m.dropout}, {"flash_attn", ctx.fa.label()}},
               r.host_checks().message(HostCheck::softcap_dropout));
  // an explicit FA3 / FA4 call: the arguments the caller passed against its release's signature
  bool forward_raises = false;
  if (ctx.args)
    if (const std::optional<CallSite> site = call_site(ctx.batch, *ctx.args); site && site->binding.type_error) {
      forward_raises = true;
      const std::string raised = "TypeError: " + *site->binding.type_error;
      Violation& v = ctx.report(Severity::error,
                                site->function + " (" + std::string(site->signature->source) +
                                    ") does not take the call's arguments: " + raised,
                                {{"feature", "signature"}, {"signature", site->signature->source}},
                                *site->binding.type_error);
      ctx.symptom(v, "", raised);
    }
  fa3_call_extras(ctx);
  // The flash_attn/cute copy a flash-attn 2 release bundles (environment.flash_attn_cute; read in
  // 2.8.3, 2.8.3.post1 and 2.8.3.post2, one file set) has no varlen backward:
  // FlashAttnVarlenFunc.backward raises before any kernel, on every architecture (its dense
  // backward runs the SM80 kernel). flash-attn-4 has one from its first wheel on SM100 (4.0.0b3)
  // and from 4.0.0b5 on SM90 (4.0.0b3 and 4.0.0b4 assert "varlen backward is not yet supported
  // on sm90").
  if (const auto& cute = ctx.batch.environment.flash_attn_cute;
      cute && !forward_raises && ctx.args && ctx.args->call.api == Api::flash_attn_4_varlen &&
      ctx.batch.pass == CallPass::training) {
    const std::string message = "Backward pass for FlashAttention with variable length sequences is not implemented yet.";
    Violation& v = ctx.report(Severity::error,
                              "flash_attn.cute.flash_attn_varlen_func in a training step through the flash_attn/cute copy "
                              "bundled in flash-attn " + cute->text + ", which has a varlen forward and no varlen "
                              "backward: FlashAttnVarlenFunc.backward raises NotImplementedError: " + message,
                              {{"feature", "varlen_backward"}, {"flash_attn_cute", cute->text},
                               {"needs", "flash-attn-4 >= 4.0.0b3 on SM100, >= 4.0.0b5 on SM90, installed over the copy"},
                               {"source", "flash-attn " + cute->text +
                                              " flash_attn/cute/interface.py FlashAttnVarlenFunc.backward"}},
                              message);
    ctx.symptom(v, "cute_varlen_backward", "NotImplementedError: " + message);
  }
  if (m.dropout > 0 && !r.dropout)
    ctx.report(Severity::warning,
               "dropout " + nlohmann::json(m.dropout).dump() + " requested but FA" + std::to_string(r.family) +
                   " has no dropout argument: transformers drops it (supports_mapping) or the call raises TypeError",
               {{"feature", "dropout"}, {"dropout", m.dropout}, {"flash_attn", ctx.fa.label()}});
}

// 5 input.int32_range, per pass and release, over the tensors that reach a kernel (a padded
// (B, L) tensor on the unpad route only meets PyTorch's gather, which indexes in 64 bits).
//  - FA2's varlen forward addresses q/k/v/out through 64-bit strides (flash.h index_t): a
//    packed q past 2^31 elements is computed right (measured on an H100 at 1.19 x 2^31). Its LSE
//    offset h x total_q + row is an int.
//  - FA2's backward offsets dq_accum by cu_seqlens_q[b] x H x d_rounded computed in 32 bits
//    (block_info.h q_offset instantiated with int strides in flash_bwd_kernel.h and
//    flash_bwd_preprocess_kernel.h): the segments that start past 2^31 / (H x d_rounded) get a
//    wrong dq, silently. Fixed on main by Dao-AILab/flash-attention#2260, in no 2.x release up to
//    2.8.3. The rules per release (d_rounded, which terms wrap) are fa2::bwd's, the backward
//    emulation's own (contract/fa2_backward.hpp). Before 2.8.0 (Dao-AILab/flash-attention#1500) the tile term (m_block x kBlockM +
//    128 x b) x H x d_rounded was an int product too: an illegal memory access.
//  - The dense kernel (flash_attn_func) on tensors past 2^31 elements: an illegal memory access
//    (Dao-AILab/flash-attention#767).
//  - FA3 (hopper/flash.h: int64 strides) and FA4 use 64-bit offsets: a warning at most.
// Counted, never materialised.
void input_int32_range(Ctx& ctx) {
  const Model& m = ctx.batch.model;
  const bool varlen = ctx.args && ctx.args->path != VarlenPath::dense;
  const FlashAttnRules& rules = ctx.rules();
  auto rows_override = [&](const char* name) -> std::optional<int64_t> {
    const TensorOverride* o = ctx.batch.override_for(name);
    return o && o->rows ? o->rows : std::nullopt;
  };
  struct Tensor {
    std::string name;
    int64_t rows, heads;
  };
  std::vector<Tensor> tensors;
  if (varlen) {
    tensors.push_back({"q", rows_override("q").value_or(ctx.args->total_q), m.num_heads});
    tensors.push_back({"k", rows_override("k").value_or(ctx.args->total_k), m.num_kv_heads});
    tensors.push_back({"v", rows_override("v").value_or(ctx.args->total_k), m.num_kv_heads});
    tensors.push_back({"out", rows_override("out").value_or(ctx.args->total_q), m.num_heads});
  } else if (ctx.batch.batch) {
    // the dense kernel gets the padded (B, L, heads, D) tensors
    const BatchInputs& b = *ctx.batch.batch;
    if (auto rows = checked::mul(b.batch_size, b.query_length)) {
      tensors.push_back({"q (B x Lq rows)", *rows, m.num_heads});
      tensors.push_back({"out (B x Lq rows)", *rows, m.num_heads});
    }
    if (auto rows = checked::mul(b.batch_size, b.kv_length)) {
      tensors.push_back({"k (B x Lk rows)", *rows, m.num_kv_heads});
      tensors.push_back({"v (B x Lk rows)", *rows, m.num_kv_heads});
    }
  }
  nlohmann::json offenders = nlohmann::json::array();
  std::string first;
  for (const auto& t : tensors) {
    auto elements = checked::product({t.rows, t.heads, m.head_dim});
    if (elements && *elements < checked::kInt32Limit) continue;
    offenders.push_back({{"tensor", t.name}, {"rows", t.rows}, {"heads", t.heads}, {"head_dim", m.head_dim},
                         {"elements", checked::to_text(elements)}});
    if (first.empty())
      first = t.name + " has " + checked::to_text(elements) + " elements (" + std::to_string(t.rows) + " rows x " +
              std::to_string(t.heads) + " heads x " + std::to_string(m.head_dim) + ")";
  }
  nlohmann::json ev = {{"limit", checked::kInt32Limit}, {"tensors", offenders}, {"flash_attn", ctx.fa.label()},
                       {"pass", to_string(ctx.batch.pass)}};
  if (rules.family >= 3) {
    if (offenders.empty()) return;
    Violation& v = ctx.report(Severity::warning,
                              first + ", past 2^31: FA" + std::to_string(rules.family) +
                                  " uses 64-bit offsets (other kernels on the path may not)",
                              ev);
    ctx.symptom(v, "offsets_64bit");
    return;
  }
  if (!varlen) {
    if (offenders.empty()) return;
    Violation& v = ctx.report(Severity::error, first + ", past the 2^31 the dense kernel's 32-bit offsets address", ev,
                              "an illegal memory access was encountered");
    ctx.symptom(v, "dense");
    return;
  }
  const VarlenArgs& a = *ctx.args;
  // forward: the LSE offset h x total_q + row (an int)
  if (auto lse = checked::mul(m.num_heads, a.total_q); !lse || *lse >= checked::kInt32Limit) {
    ev["lse_elements"] = checked::to_text(lse);
    Violation& v = ctx.report(Severity::error,
                              "softmax_lse has " + checked::to_text(lse) + " elements (" + std::to_string(m.num_heads) +
                                  " heads x " + std::to_string(a.total_q) + " rows): its int offset wraps",
                              ev, "an illegal memory access was encountered");
    ctx.symptom(v, "dense");
    return;
  }
  // backward: the dq_accum offsets (only when a segment is long or late enough)
  const IntTensor& cu = a.cu_seqlens_q;
  if (!is_vector(cu)) return;
  // the release's backward rules: one definition with the backward's emulation (contract/fa2_backward.hpp)
  fa2::bwd::Release release = fa2::bwd::release_rules(2, 8, 3);  // an unknown release is the newest
  if (const std::optional<Version>& fa = ctx.symptoms.flash_attn; fa && !fa->release.empty()) {
    auto part = [&](size_t i) { return i < fa->release.size() ? static_cast<int>(fa->release[i]) : 0; };
    release = fa2::bwd::release_rules(part(0), part(1), part(2));
  }
  const int64_t d_rounded = fa2::bwd::head_dim_rounded(release, m.head_dim);
  const fa2::bwd::DqAccumShape accum{.total_q = a.total_q, .num_segments = 1, .num_heads = m.num_heads,
                                     .d_rounded = d_rounded, .nsplits = 1};
  const int64_t row_stride = accum.row_stride();  // fp32 elements per dq_accum row
  const int64_t threshold = fa2::bwd::first_wrapping_row(accum);
  int64_t first_late = -1;  // first segment whose start is past the threshold (32-bit offset wraps)
  int64_t tile_overflow = -1;
  for (size_t b = 0; b + 1 < cu.values.size(); ++b) {
    const int64_t start = cu.values[b];
    const auto len = segment_length(cu, b);
    if (!len || *len <= 0) continue;
    if (first_late < 0 && start >= threshold && release.dq_offset != fa2::bwd::DqOffset::int64)
      first_late = static_cast<int64_t>(b);
    // (m_block x kBlockM + 128 x b) x H x d_rounded, with the last row tile of the segment
    auto tile = checked::add(*len - 1, checked::mul(128, static_cast<int64_t>(b)).value_or(INT64_MAX));
    auto product = tile ? checked::mul(*tile, row_stride) : std::nullopt;
    if (tile_overflow < 0 && (!product || *product >= checked::kInt32Limit)) tile_overflow = static_cast<int64_t>(b);
  }
  const bool tile_bug = tile_overflow >= 0 && release.dq_offset == fa2::bwd::DqOffset::int32_sum;
  if (first_late < 0 && !tile_bug) {
    if (offenders.empty()) return;
    Violation& v = ctx.report(Severity::warning,
                              first + ", past 2^31: FA2's varlen forward offsets are 64-bit (computed right), and " +
                                  (release.dq_offset == fa2::bwd::DqOffset::int64
                                       ? std::string("this release's backward offsets dq_accum in 64 bits "
                                                     "(Dao-AILab/flash-attention#2260)")
                                       : std::string("its backward's dq_accum offsets stay below 2^31 for these "
                                                     "segments")),
                              ev);
    ctx.symptom(v, "offsets_64bit");
    return;
  }
  const bool training = ctx.batch.pass == CallPass::training;
  std::string what;
  std::string variant;
  std::vector<RowRange> rows;
  if (tile_bug) {
    variant = "dq_accum_tile";
    ev["segment"] = tile_overflow;
    what = "the backward's dq_accum tile offset (row tile + 128 x segment " + std::to_string(tile_overflow) + ") x " +
           std::to_string(row_stride) + " passes 2^31 in flash_attn " + ctx.fa.label() +
           " (an int product before 2.8.0)";
  } else {
    variant = "dq_accum_offset";
    const int64_t from = cu.values[static_cast<size_t>(first_late)];
    const int64_t to = std::min(cu.values.back(), a.total_q) - 1;
    rows = packed_rows_as_user_sees(a, from, to);
    ev["segment"] = first_late;
    ev["first_row"] = from;
    ev["threshold_row"] = threshold;
    what = "segment " + std::to_string(first_late) + " starts at row " + std::to_string(from) + ", past row " +
           std::to_string(threshold) + " = 2^31 / (" + std::to_string(m.num_heads) + " heads x d_rounded " +
           std::to_string(d_rounded) + "): the backward's 32-bit dq_accum offset wraps for it and every later segment";
  }
  if (!training) {
    Violation& v = ctx.report(Severity::warning,
                              "latent for inference (the forward is right): " + what +
                                  "; a training step (\"pass\": \"training\") would get " +
                                  (tile_bug ? "an illegal memory access" : "a silently wrong dq"),
                              ev);
    ctx.symptom(v, "offsets_64bit", "no error in the forward; the backward of a training step would break");
    return;
  }
  Violation& v = ctx.report(Severity::error, what, ev, tile_bug ? "an illegal memory access was encountered" : "");
  if (tile_bug) {
    ctx.symptom(v, variant);
  } else {
    v.symptom = symptom_for(v.id, variant, ctx.symptoms);
    if (v.symptom) {
      v.symptom->rows = rows;
      v.symptom->message = "no error; dq rows " + rows_text(rows, 4) +
                           " are wrong (the backward's 32-bit dq_accum offset wraps past row " + std::to_string(threshold) +
                           ")";
    }
  }
}

}  // namespace ad::checks
