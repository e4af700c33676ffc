// make_exec_plan(): from the batch and the conversion to the one description of the call a
// backend executes. All policy lives here: the frames the tensors live in, what the
// libraries check (and raise) on the host before launching, FA2's host-side adjustments of
// the kernel flags, tile sizes, the intended sequences for the reference, the compute budget
// (sampling) and the memory bound.
#include "exec/plan/plan.hpp"

#include "check/call_site.hpp"
#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"
#include "contract/rotary.hpp"
#include "util/checked_math.hpp"
#include "util/text.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

namespace ad {

std::vector<StageRecord> skipped_stages(const std::string& why, bool training) {
  std::vector<StageRecord> out;
  for (size_t i = 0; i < stage_count(training); ++i)
    out.push_back(StageRecord{kDynamicStages[i], StageStatus::skipped, 0.0, why});
  return out;
}

namespace {

constexpr int64_t kInt32Max = 2147483647;

std::string human_bytes(int64_t b) {
  char buf[64];
  // two decimals: an amount just over the 4 GiB budget must not read as the budget itself
  if (b >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(int64_t{1} << 30));
  else if (b >= (int64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  else std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(b));
  return buf;
}

ElemType elem_type_of(DType t) {
  switch (t) {
    case DType::bf16: return ElemType::bf16;
    case DType::fp16: return ElemType::fp16;
    default: return ElemType::fp32;
  }
}

std::vector<int32_t> int32_view(const IntTensor& t) {
  std::vector<int32_t> v(t.values.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(t.values[i])));
  return v;
}

HostRaise raise(std::string where, std::string type, std::string message) {
  return HostRaise{std::move(where), std::move(type), std::move(message)};
}

// The row width the intent's (row, start, length) are written in.
int64_t intent_width(const Batch& b) {
  if (!b.batch) return -1;
  if (b.batch->attention_mask) {
    const Mask& m = *b.batch->attention_mask;
    const IntTensor& t = m.from ? *m.from : m.tensor;
    return t.dim(-1);
  }
  // position ids: the intent is in key coordinates, also when the ids cover only the newest
  // Lq < Lk tokens (lib/batch/intent.cpp)
  if (b.batch->position_ids) return std::max(b.batch->kv_length, b.batch->position_ids->tensor.dim(-1));
  return b.batch->kv_length;
}

// FA3's page table of an explicit call (nullptr: none, or not an FA3 call).
const PageTable* paged_table(const Batch& batch, const VarlenArgs& a) {
  if (a.path != VarlenPath::explicit_varlen || !batch.varlen || flash_attn_family(a.call.api) != 3) return nullptr;
  return batch.varlen->page_table ? &*batch.varlen->page_table : nullptr;
}

// ---------------------------------------------------------------------------------------
// attention: mha_varlen_fwd's host side (flash_api.cpp v2.6.3): the family's host checks in their
// order, then FA2's adjustments of the kernel flags.

void plan_attention(ExecPlan& p, const Batch& batch, const VarlenArgs& a, bool dense) {
  AttentionPlan& at = p.attention;
  const std::string where = dense ? "flash_attn_func > mha_fwd" : "flash_attn_varlen_func > mha_varlen_fwd";
  at.num_heads = p.num_heads;
  at.num_kv_heads = p.num_kv_heads;
  at.head_dim = p.head_dim;
  at.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  at.softcap = a.call.softcap && *a.call.softcap > 0 ? static_cast<float>(*a.call.softcap) : 0.f;
  const bool dropout = a.call.dropout > 0;
  at.tile = fa2::tile_for(static_cast<int>(std::min<int64_t>(p.head_dim, 256)), dropout, at.arch);

  auto fail = [&](std::string type, std::string message) {
    if (!at.raises) at.raises = raise(where, std::move(type), std::move(message));
  };
  // Python binds the arguments before anything runs: an argument the release does not take
  // raises TypeError (check/call_site.hpp; explicit FA3 / FA4 calls)
  if (const std::optional<CallSite> site = call_site(batch, a); site && site->binding.type_error)
    fail("TypeError", *site->binding.type_error);

  at.cu_seqlens_q = int32_view(a.cu_seqlens_q);
  at.cu_seqlens_k = int32_view(a.cu_seqlens_k);
  if (a.seqused_k) {
    std::vector<int32_t> s;
    for (int64_t v : *a.seqused_k) s.push_back(static_cast<int32_t>(v));
    at.seqused_k = s;
  }
  // FA3 / FA4 take seqused_q; flash-attn 2 and torch's varlen_attn have no such parameter
  // (lib/vocab/signature: a TypeError before anything runs)
  at.family = flash_attn_family(p.api) >= 3 ? flash_attn_family(p.api) : 2;
  if (a.seqused_q && at.family >= 3) {
    std::vector<int32_t> s;
    for (int64_t v : *a.seqused_q) s.push_back(static_cast<int32_t>(v));
    at.seqused_q = s;
  }
  at.total_q = a.total_q;
  at.total_k = a.total_k;
  const int64_t batch_size = static_cast<int64_t>(a.cu_seqlens_q.values.size()) - 1;  // numel - 1
  at.num_segments = std::max<int64_t>(batch_size, 0);

  // FA3's page table, q_v and attention_chunk (explicit calls; batch-format.md varlen.page_table, varlen.qv)
  const ExplicitVarlen* ev = a.path == VarlenPath::explicit_varlen && batch.varlen ? &*batch.varlen : nullptr;
  const PageTable* paged = ev && ev->page_table ? &*ev->page_table : nullptr;
  const QvArg* qv = ev && ev->qv ? &*ev->qv : nullptr;
  const int64_t batch_size_k = paged ? paged->rows : a.cu_seqlens_k.rank() >= 1 ? a.cu_seqlens_k.dim(0) - 1 : batch_size;
  int64_t max_q = a.max_seqlen_q.value, max_k = a.max_seqlen_k.value;
  const fa2::Normalized n = fa2::normalize({.max_seqlen_q = max_q,
                                            .max_seqlen_k = max_k,
                                            .num_heads = p.num_heads,
                                            .num_heads_k = p.num_kv_heads,
                                            .head_dim = p.head_dim,
                                            .causal = a.call.causal,
                                            .window_left = a.call.window_left,
                                            .window_right = a.call.window_right,
                                            .dropout = dropout,
                                            .family = at.family,
                                            .fa4_literal_windows =
                                                at.family == 4 && p.flash_attn_release >= version_literal("4.0.0b30"),
                                            .attention_chunk = at.family == 3 && ev && ev->attention_chunk ? *ev->attention_chunk : 0});

  // The release family's host checks, in its order (vocab/host_checks.cpp): the first that
  // fails raises. Not evaluated here: q/k/v dtypes (the stages run other dtypes as if accepted,
  // and say so), softcap with dropout (dropout is not executed) and the head-dim alignment (FA2
  // pads); input.dtype, input.feature and input.head_dim report them.
  auto off_cuda = [&](const char* t) {
    const TensorOverride* o = batch.override_for(t);
    return o && o->device && o->device->rfind("cuda", 0) != 0;
  };
  // torch's varlen_attn: an argument its release does not take is Python's TypeError, before
  // any check (docs/spec/torch-varlen-attn.md)
  if (p.api == Api::torch_varlen_attn)
    if (auto sig = torch_signature_error(batch))
      at.raises = raise("torch.nn.attention.varlen.varlen_attn", sig->exception, sig->message);
  // torch's varlen_attn: its release's rules and messages (PyTorch's bundled FA2 behind it)
  const FlashAttnRules& rules =
      p.api == Api::torch_varlen_attn ? *resolve_torch_varlen(batch.environment.torch).rules
      : batch.environment.flash_attn_cute && p.flash_attn_release == *batch.environment.flash_attn_cute
          ? *resolve_flash_attn_cute(p.flash_attn_release).rules
          : *resolve_flash_attn(p.flash_attn_release).rules;
  auto failing = [&](HostCheck c) {
    switch (c) {
      case HostCheck::page_table_dtype: return paged && paged->dtype != DType::int32;
      case HostCheck::batch_size_k: return batch_size != batch_size_k;
      case HostCheck::qv_head_dim: return qv && p.head_dim > 64;
      // fp8_e4m3, the other dtype FA3 runs (q's own dtype check is left to input.dtype)
      case HostCheck::qv_q_dtype: return qv && batch.model.dtype == DType::fp8_e4m3;
      case HostCheck::qv_arch:
        return qv && batch.environment.gpu_arch && batch.environment.gpu_arch->compute_capability() != 90;
      case HostCheck::qv_dtype: return qv && qv->dtype && *qv->dtype != batch.model.dtype;
      case HostCheck::qv_shape: return qv && qv->head_dim != p.head_dim;
      case HostCheck::cu_seqlens_q_dtype: return a.cu_seqlens_q.dtype != DType::int32;
      case HostCheck::cu_seqlens_k_dtype: return a.cu_seqlens_k.dtype != DType::int32;
      case HostCheck::cu_seqlens_q_device: return off_cuda("cu_seqlens_q");
      case HostCheck::cu_seqlens_k_device: return off_cuda("cu_seqlens_k");
      case HostCheck::batch_size_positive: return batch_size <= 0;
      case HostCheck::head_dim_max: return p.head_dim > rules.max_head_dim;
      case HostCheck::heads_divide: return p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0;
      case HostCheck::kv_heads_equal: return p.num_kv_heads != p.num_heads;
      case HostCheck::cu_seqlens_q_shape: return a.cu_seqlens_q.rank() != 1;
      case HostCheck::cu_seqlens_k_shape: return a.cu_seqlens_k.rank() != 1 || a.cu_seqlens_k.numel() != batch_size + 1;
      case HostCheck::seqused_k_shape: return at.seqused_k && static_cast<int64_t>(at.seqused_k->size()) != batch_size;
      case HostCheck::seqused_q_shape: return at.seqused_q && static_cast<int64_t>(at.seqused_q->size()) != batch_size;
      case HostCheck::q_dtype:
      case HostCheck::k_dtype:
      case HostCheck::v_dtype:
      case HostCheck::softcap_dropout:
      case HostCheck::head_dim_aligned: return false;
    }
    return false;
  };
  // After the dtype and device checks: the arguments reach the C++ function (a max_seqlen past a
  // C int fails pybind11's conversion) and mha_varlen_fwd reshapes q for the swapped path.
  bool converted = false;
  auto convert_arguments = [&] {
    converted = true;
    if (max_q > kInt32Max || max_q < -kInt32Max - 1 || max_k > kInt32Max || max_k < -kInt32Max - 1)
      fail("TypeError", "mha_varlen_fwd(): incompatible function arguments (max_seqlen does not fit a C int)");
    if (n.swapped && !at.raises) {
      // seqlenq_ngroups_swapped: q (total_q, H, D) reshaped to (batch, Hk, ngroups, D)
      if (at.total_q != batch_size || batch_size <= 0)
        fail("RuntimeError", "shape '" + shape_text({batch_size, p.num_kv_heads, n.ngroups, p.head_dim}, ShapeStyle::torch_list) +
                                 "' is invalid for input of size " + std::to_string(at.total_q * p.num_heads * p.head_dim));
    }
  };
  const HostCheckTable& host = rules.host_checks();
  for (const HostCheckEntry& e : host.entries) {
    if (!host.applies(e, dense)) continue;
    const bool before_conversion = e.check == HostCheck::q_dtype || e.check == HostCheck::k_dtype ||
                                   e.check == HostCheck::v_dtype || e.check == HostCheck::cu_seqlens_q_dtype ||
                                   e.check == HostCheck::cu_seqlens_k_dtype || e.check == HostCheck::cu_seqlens_q_device ||
                                   e.check == HostCheck::cu_seqlens_k_device || e.check == HostCheck::softcap_dropout;
    if (!converted && !before_conversion) convert_arguments();
    if (failing(e.check)) fail(std::string(e.type), std::string(e.message));
  }
  if (!converted) convert_arguments();
  set_attention_grid(at, n, max_k);
  at.unpadded_lse = true;
  if (p.flash_attn_release < version_literal("2.6.0")) at.unpadded_lse = false;
  at.lse_elements = at.unpadded_lse ? p.num_heads * std::max<int64_t>(at.total_q, 0)
                                    : at.num_segments * p.num_heads * std::max<int64_t>(max_q, 0);
  at.zero_fill = max_k <= 0;
  if (!at.raises && !at.zero_fill) {
    // cudaLaunchKernel: grid.x in [1, 2^31 - 1], grid.y and grid.z in [1, 65535]
    if (at.grid_m <= 0 || at.grid_m > kInt32Max || at.grid_b > 65535 || at.grid_h > 65535)
      fail("RuntimeError", "CUDA error: invalid configuration argument (grid " + std::to_string(at.grid_m) + " x " +
                               std::to_string(at.grid_b) + " x " + std::to_string(at.grid_h) + ")");
  }
  // FA3's paged KV and q_v (hopper/paged_kv.h; hopper/flash_attn_interface.py: with q_v the
  // default softmax_scale is (head_dim + head_dim_v) ** -0.5, and each score adds q_v . v_j)
  if (at.family == 3) {
    if (const PageTable* t = paged_table(batch, a); t && t->values)
      at.paged = PagedPlan{*t->values, t->pages_per_seq, t->page_size, t->num_pages};
    if (qv) {
      at.qv = true;
      at.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim + qv->head_dim)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// backward: mha_varlen_bwd for a training batch (contract/fa2_backward.hpp)

fa2::bwd::Release backward_release(const Version& v) {
  if (v.release.empty()) return fa2::bwd::release_rules(2, 6, 3);
  auto part = [&](size_t i) { return i < v.release.size() ? static_cast<int>(v.release[i]) : 0; };
  return fa2::bwd::release_rules(part(0), part(1), part(2));
}

void plan_backward(ExecPlan& p, const Batch& batch, const VarlenArgs& a) {
  BackwardPlan& bw = p.backward;
  bw.enabled = batch.pass == CallPass::training;
  if (!bw.enabled) return;
  const AttentionPlan& at = p.attention;
  bw.release = backward_release(p.flash_attn_release);
  bw.deterministic = batch.model.deterministic;
  // the backward receives max_seqlen_q as passed (the forward's swapped path is its own)
  plan_backward_kernel(p, std::clamp<int64_t>(a.max_seqlen_q.value, -kInt32Max - 1, kInt32Max), a.call.causal,
                       a.call.window_left, a.call.window_right);
  // the output's, measured against the scale of each gradient row's terms (gradient_reference)
  bw.tolerance = p.reference.tolerance;
  if (at.raises) bw.skip_reason = "the forward raises: no backward runs";
  else if (at.family == 3 && batch.varlen && batch.varlen->attention_chunk && *batch.varlen->attention_chunk != 0)
    bw.skip_reason = "the backward raises AssertionError: FA3 backward does not support attention_chunk "
                     "(hopper/flash_attn_interface.py, FlashAttnVarlenFunc.backward)";
  else if (batch.environment.flash_attn_cute && p.api == Api::flash_attn_4_varlen)
    bw.skip_reason = "the backward raises NotImplementedError: the flash_attn/cute copy in flash-attn " +
                     batch.environment.flash_attn_cute->text + " has no varlen backward (FlashAttnVarlenFunc.backward)";
  else if (at.seqused_q)
    bw.skip_reason = "not run: FA3 / FA4 honour seqused_q in the backward too (Dao-AILab/flash-attention PR#1182, "
                     "PR#2167); the checked backward addresses FA2's segments";
  else if (at.paged)
    bw.skip_reason = "not run: FA3 has no backward for a paged call: flash_attn_with_kvcache is not an autograd function "
                     "and torch.ops.flash_attn_3.fwd registers no autograd kernel (hopper/flash_attn_interface.py, "
                     "hopper/flash_api.cpp TORCH_LIBRARY_IMPL, v2.8.3); torch's autograd fallback warns \"an autograd "
                     "kernel was not registered\" when a backward reaches it";
  else if (at.qv)
    bw.skip_reason = "not run: FA3's backward takes no q_v: FlashAttnVarlenFunc.backward passes none to the kernel and "
                     "returns no gradient for it (hopper/flash_attn_interface.py, v2.8.3), so the kernel recomputes the "
                     "probabilities from q . k alone against the forward's LSE; the checked backward does not model that";
}

// ---------------------------------------------------------------------------------------
// rotary: the configured implementation's host checks and kernel geometry.

void plan_rotary(ExecPlan& p, const Batch& batch, const VarlenArgs& a, const std::vector<int64_t>& q_src_index,
                 const std::vector<int64_t>& k_src_index, int64_t Lq, int64_t Lk) {
  RotaryPlan& r = p.rotary;
  const Rotary& cfg = *batch.rotary;
  if (cfg.dim <= 0) return;
  r.enabled = true;
  r.contract = cfg.implementation == "fla" ? RotaryContract::fla
               : cfg.implementation == "hf" ? RotaryContract::hf
                                            : RotaryContract::flash_attn;
  r.dim = cfg.dim;
  r.half = (cfg.dim + 1) / 2;  // inv_freq = arange(0, dim, 2): ceil(dim / 2) columns
  r.interleaved = cfg.interleaved;
  r.base = cfg.base;
  const bool has_cu = a.path != VarlenPath::dense && a.cu_seqlens_q.numel() >= 2;
  r.varlen = r.contract != RotaryContract::hf && cfg.varlen.value_or(has_cu) && has_cu;
  const int64_t D = p.head_dim;
  const int64_t rotary_dim = 2 * r.half;
  // sequences the offsets index: cu_seqlens segments in varlen, else the batch rows
  const int64_t N = r.varlen ? a.cu_seqlens_q.numel() - 1 : (batch.batch ? batch.batch->batch_size : 1);

  // offsets
  int64_t scalar_offset = 0;
  if (cfg.seqlen_offset_per_sequence) {
    r.offsets_per_sequence = true;
    r.offsets_q = cfg.seqlen_offset;
  } else {
    scalar_offset = cfg.seqlen_offset.empty() ? 0 : cfg.seqlen_offset.front();
    r.offsets_q = {scalar_offset};
  }
  const bool same_segments = a.cu_seqlens_q.values == a.cu_seqlens_k.values && a.total_q == a.total_k;
  // Keys that come from a cache were rotated at their own positions when they were written:
  // the packed keys take positions from 0 unless q and k are the same packing.
  r.offsets_k = same_segments ? r.offsets_q : std::vector<int64_t>(r.offsets_per_sequence ? std::max<int64_t>(N, 0) : 1, 0);

  const std::string impl = to_string(r.contract);
  auto fail = [&](std::string where, std::string type, std::string msg) {
    if (!r.raises) r.raises = raise(std::move(where), std::move(type), std::move(msg));
  };

  if (r.varlen) {
    r.cu_q = int32_view(a.cu_seqlens_q);
    r.cu_k = int32_view(a.cu_seqlens_k);
    r.max_seqlen_q = a.max_seqlen_q.value;
    r.max_seqlen_k = a.max_seqlen_k.value;
  }
  int64_t max_offset = 0;
  for (int64_t o : r.offsets_q) max_offset = std::max(max_offset, o);

  if (r.contract == RotaryContract::flash_attn) {
    // flash_attn.layers.rotary.RotaryEmbedding grows its table to max_seqlen (varlen) or to
    // seqlen + seqlen_offset (int offset) before calling apply_rotary.
    // non-varlen: x is (B, S, H, D), or (1, T, H, D) for packed tensors without a batch block
    const int64_t padded_len = Lq > 0 || Lk > 0 ? std::max(Lq, Lk) : std::max(a.total_q, a.total_k);
    const int64_t seqlen = r.varlen ? std::max(r.max_seqlen_q, r.max_seqlen_k) : padded_len;
    r.table_rows = cfg.table_length ? *cfg.table_length : (r.varlen ? seqlen : seqlen + (r.offsets_per_sequence ? 0 : scalar_offset));
    r.inplace = true;
    int fa_minor = 6;
    if (const Version& v = p.flash_attn_release; v.release.size() >= 2 && v.release[0] == 2)
      fa_minor = static_cast<int>(v.release[1]);
    r.block_rows = rope::flash_attn_block_m(rotary_dim, r.interleaved, fa_minor);
    const std::string where = "flash_attn.layers.rotary > apply_rotary";
    if (rotary_dim > D) fail(where, "AssertionError", "rotary_dim must be <= headdim");
    else if (D > 256) fail(where, "AssertionError", "Only support headdim <= 256");
    else if (r.table_rows < seqlen) fail(where, "AssertionError", "seqlen_ro must be >= seqlen");
    else if (r.offsets_per_sequence && static_cast<int64_t>(r.offsets_q.size()) != N)
      fail(where, "AssertionError", "seqlen_offsets.shape == (batch,)");
    else if (!r.offsets_per_sequence && scalar_offset + seqlen > r.table_rows)
      fail(where, "AssertionError", "seqlen_offsets + seqlen <= seqlen_ro");
    if (r.varlen && (a.max_seqlen_q.value <= 0))
      fail(where, "AssertionError", "If cu_seqlens is passed in, then max_seqlen must be passed");
  } else if (r.contract == RotaryContract::fla) {
    // fla.modules.rotary: in varlen x is [1, T, H, D] with T the packed rows; the table grows
    // to cover T + offset. The kernel bounds columns by R = dim / 2, never by D.
    const int64_t T = r.varlen || (Lq <= 0 && Lk <= 0) ? std::max(a.total_q, a.total_k) : std::max(Lq, Lk);
    r.table_rows = cfg.table_length ? *cfg.table_length : T + max_offset;
    r.inplace = false;
    r.block_rows = rope::fla_block_t(T);
    const std::string where = "fla.modules.rotary > rotary_embedding_fwdbwd";
    const FlaRotaryTableAssert tr =
        fla_rotary_table_assert(batch.environment.fla, r.varlen, T, std::max(r.max_seqlen_q, r.max_seqlen_k), r.table_rows);
    if (D > 256) fail(where, "AssertionError", "Only support D <= 256");
    else if (tr.fails)
      fail(where, "AssertionError", tr.message);
    else if (r.offsets_per_sequence && static_cast<int64_t>(r.offsets_q.size()) != N)
      fail(where, "AssertionError", "seqlen_offsets.shape == (N,)");
    else if (!r.offsets_per_sequence && scalar_offset + tr.T > r.table_rows)
      fail(where, "AssertionError", "seqlen_offsets + T <= TR");
  } else {
    // transformers' apply_rotary_pos_emb: q * cos + rotate_half(q) * sin with cos/sin of the
    // rotary width; a width other than the head dim fails to broadcast.
    r.inplace = false;
    if (rotary_dim > D)
      fail("transformers apply_rotary_pos_emb", "RuntimeError",
           "The size of tensor a (" + std::to_string(D) + ") must match the size of tensor b (" +
               std::to_string(rotary_dim) + ") at non-singleton dimension 3");
  }

  if (!r.varlen) {
    // Positions per packed row: the position ids the framework held (gathered like q/k), or
    // the column in the padded row (+ the scalar offset).
    const PositionIds* pos = batch.batch && batch.batch->position_ids ? &*batch.batch->position_ids : nullptr;
    // Padded rows: the position ids of the row (its last L columns), else the column in the
    // key frame (queries are the last Lq of Lk columns) plus the scalar offset.
    auto position_of = [&](int64_t src_row, int64_t L, int64_t shift) -> int64_t {
      if (src_row < 0) return 0;
      if (L <= 0) return src_row + scalar_offset;
      const int64_t r0 = src_row / L, c = src_row % L;
      // per-sequence offsets index the batch rows (flash_attn apply_rotary: seqlen_offsets
      // of shape (batch,); FLA: negative offsets for left padding)
      const int64_t row_offset = !r.offsets_per_sequence ? scalar_offset
                                 : r0 < static_cast<int64_t>(r.offsets_q.size()) ? r.offsets_q[static_cast<size_t>(r0)]
                                                                                  : 0;
      if (pos) {
        const IntTensor& t = pos->tensor;
        const int64_t S = t.dim(-1);
        const int64_t col = c + (S - L);
        const int64_t idx = (t.rank() == 1 ? 0 : r0 * S) + col;
        if (col >= 0 && col < S && idx >= 0 && idx < t.numel()) return t.values[static_cast<size_t>(idx)];
      }
      return c + shift + row_offset;
    };
    r.positions_q.resize(q_src_index.size());
    for (size_t i = 0; i < q_src_index.size(); ++i) r.positions_q[i] = position_of(q_src_index[i], Lq, std::max<int64_t>(Lk - Lq, 0));
    r.positions_k.resize(k_src_index.size());
    for (size_t i = 0; i < k_src_index.size(); ++i) r.positions_k[i] = position_of(k_src_index[i], Lk, 0);
    if (a.path == VarlenPath::mask && batch.batch) {
      const int64_t B = batch.batch->batch_size;
      auto dropped = [&](const std::vector<int64_t>& gathered, int64_t L, int64_t shift,
                         std::vector<std::pair<int64_t, int64_t>>& out) {
        if (L <= 0 || B > (int64_t{1} << 24) / std::max<int64_t>(L, 1)) return;  // bounded: padded rows only
        std::vector<uint8_t> kept(static_cast<size_t>(B * L), 0);
        for (int64_t g : gathered)
          if (g >= 0 && g < B * L) kept[static_cast<size_t>(g)] = 1;
        for (int64_t row = 0; row < B * L; ++row)
          if (!kept[static_cast<size_t>(row)]) out.emplace_back(row, position_of(row, L, shift));
      };
      dropped(q_src_index, Lq, std::max<int64_t>(Lk - Lq, 0), r.dropped_rows_q);
      dropped(k_src_index, Lk, 0, r.dropped_rows_k);
    }
  }
  if (r.contract == RotaryContract::fla && rotary_dim > D)
    r.note = "fla bounds the rotation by dim/2 = " + std::to_string(r.half) + " columns, not by head_dim " +
             std::to_string(D) + ": each head's rotation runs into the next heads";
}

// ---------------------------------------------------------------------------------------
// reference: the intended sequences mapped into the source and final frames.

// For each intended sequence, the first cu_seqlens_q segment b with cu[b] <= start < cu[b + 1]
// (-1: none). cu_seqlens need not be monotonic here, so instead of a search per sequence (which
// made 10^5 sequences quadratic) the starts are sorted once and each segment, in order, takes
// the starts not yet placed that fall inside it: a union-find skips the placed ones.
std::vector<int64_t> first_segment_of_starts(const std::vector<IntendedSequence>& seqs, const std::vector<int64_t>& cu) {
  const size_t n = seqs.size();
  std::vector<int64_t> out(n, -1);
  std::vector<std::pair<int64_t, size_t>> starts(n);
  for (size_t i = 0; i < n; ++i) starts[i] = {seqs[i].start, i};
  std::sort(starts.begin(), starts.end());
  std::vector<size_t> next(n + 1);  // next[k]: the first unplaced start at or after k (path-halved)
  for (size_t k = 0; k <= n; ++k) next[k] = k;
  auto find = [&](size_t k) {
    while (next[k] != k) k = next[k] = next[next[k]];
    return k;
  };
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    if (cu[b + 1] <= cu[b]) continue;
    auto lo = std::lower_bound(starts.begin(), starts.end(), std::make_pair(cu[b], size_t{0}));
    for (size_t k = find(static_cast<size_t>(lo - starts.begin())); k < n && starts[k].first < cu[b + 1]; k = find(k)) {
      out[starts[k].second] = static_cast<int64_t>(b);
      next[k] = k + 1;
    }
  }
  return out;
}

// Whether keys [0, count) of a paged sequence (table row `seq`) all lie in pages of the pool.
bool paged_keys_in_pool(const PagedPlan& pg, int64_t seq, int64_t count) {
  const int64_t pages = pg.page_size > 0 ? (count + pg.page_size - 1) / pg.page_size : 0;
  if (seq < 0 || pages > pg.pages_per_seq) return false;
  for (int64_t i = 0; i < pages; ++i) {
    const size_t e = static_cast<size_t>(seq * pg.pages_per_seq + i);
    if (e >= pg.table.size() || pg.table[e] < 0 || pg.table[e] >= pg.num_pages) return false;
  }
  return true;
}

void plan_reference(ExecPlan& p, const Batch& batch, const VarlenArgs& a, int64_t B, int64_t Lq, int64_t Lk) {
  ReferencePlan& ref = p.reference;
  const auto& seqs = batch.intent.sequences;
  if (seqs.empty()) {
    ref.skip_reason = "the batch has no intended sequences (no mask, position ids, cu_seqlens_q or intent)";
    return;
  }
  ref.enabled = true;
  const KernelCall meant = kernel_call_for(batch.model);
  ref.causal = meant.causal;
  ref.window_left = meant.window_left;
  ref.window_right = meant.window_right;
  // a chunked call (FA3's attention_chunk) is the model's chunked attention: no model key says so
  if (flash_attn_family(a.call.api) == 3 && a.path == VarlenPath::explicit_varlen && batch.varlen &&
      batch.varlen->attention_chunk)
    ref.attention_chunk = *batch.varlen->attention_chunk;
  ref.softcap = meant.softcap && *meant.softcap > 0 ? *meant.softcap : 0.0;
  ref.softmax_scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  // FA3's q_v: the model's scores add q_v . v_j, with FA3's default scale (plan_attention)
  if (p.attention.qv) {
    ref.qv = true;
    ref.softmax_scale = static_cast<double>(p.attention.softmax_scale);
  }
  if (p.attention.paged) {
    ref.paged = p.attention.paged;
    ref.paged_seqlen_k = p.attention.paged->pages_per_seq * p.attention.paged->page_size;
  }
  ref.tolerance = num::tolerance_for(p.elem);
  if (p.rotary.enabled) {
    ref.rotary = true;
    ref.rotary_dim = std::min<int64_t>(2 * p.rotary.half, p.head_dim) / 2 * 2;
    ref.rotary_interleaved = p.rotary.interleaved;
    ref.rotary_base = p.rotary.base;
    // the dim the model meant: the one passed when it fits the head, else the head dim
    ref.rotary_freq_dim = 2 * p.rotary.half <= p.head_dim ? p.rotary.dim : ref.rotary_dim;
  }
  const bool padded_frame = a.path != VarlenPath::explicit_varlen;
  const int64_t W = intent_width(batch);
  int64_t packed_q = 0, packed_k = 0;  // explicit path with a batch block: concatenation order
  const auto& cq = a.cu_seqlens_q.values;
  const auto& ck = a.cu_seqlens_k.values;
  const bool same_packing = cq == ck && a.total_q == a.total_k;
  std::vector<int64_t> segment_of;  // filled on first use (q and k packed differently)
  for (size_t i = 0; i < seqs.size(); ++i) {
    const IntendedSequence& s = seqs[i];
    RefSequence r;
    r.index = static_cast<int64_t>(i);
    r.row = s.row;
    r.start = s.start;
    r.length = s.length;
    if (batch.batch && W >= 0) {
      // key frame columns: the intent's frame is right-aligned with the keys (a mask wider than
      // the keys covers tokens no longer in the cache; a narrower one was cut to the last keys)
      int64_t k0 = s.start - (W - Lk), k1 = s.start + s.length - (W - Lk);
      k0 = std::max<int64_t>(k0, 0);
      k1 = std::min<int64_t>(k1, Lk);
      if (k1 <= k0) continue;
      // queries are the last Lq key columns
      const int64_t q0 = std::max<int64_t>(k0 - (Lk - Lq), 0), q1 = std::min<int64_t>(k1 - (Lk - Lq), Lq);
      r.k_count = k1 - k0;
      r.q_count = std::max<int64_t>(q1 - q0, 0);
      r.q_key_first = q0 + (Lk - Lq) - k0;
      if (padded_frame) {
        r.k_src_first = s.row * Lk + k0;
        r.q_src_first = s.row * Lq + q0;
        r.q_final_first = r.q_src_first;
      } else {
        r.k_src_first = packed_k;
        r.q_src_first = packed_q;
        r.q_final_first = packed_q;
        r.q_packed_first = packed_q;
        packed_k += r.k_count;
        packed_q += r.q_count;
      }
    } else {
      // packed rows as the intent (or cu_seqlens_q) says
      r.q_src_first = s.start;
      r.q_count = s.length;
      r.q_final_first = s.start;
      r.q_packed_first = s.start;
      if (same_packing) {
        r.k_src_first = s.start;
        r.k_count = s.length;
        r.q_key_first = 0;
      } else {
        // q and k packed differently (decoding, cross attention): the keys of the cu_seqlens_q
        // segment the sequence lies in, queries aligned with its last keys.
        if (segment_of.empty()) segment_of = first_segment_of_starts(seqs, cq);
        const int64_t seg = segment_of[i];
        if (seg < 0 || static_cast<size_t>(seg + 1) >= ck.size()) continue;
        const int64_t kb = ck[static_cast<size_t>(seg)], ke = ck[static_cast<size_t>(seg) + 1];
        if (ke <= kb) continue;
        r.k_src_first = kb;
        r.k_count = ke - kb;
        // FA2's seqused_k: only the first seqused_k[b] keys of the segment are used, and the
        // causal diagonal aligns with them (flash_api.cpp mha_varlen_fwd, block_info.h)
        if (a.seqused_k && static_cast<size_t>(seg) < a.seqused_k->size())
          r.k_count = std::clamp<int64_t>((*a.seqused_k)[static_cast<size_t>(seg)], 0, r.k_count);
        if (r.k_count <= 0) continue;
        const int64_t qlen = cq[static_cast<size_t>(seg) + 1] - cq[static_cast<size_t>(seg)];
        r.q_key_first = r.k_count - qlen + (s.start - cq[static_cast<size_t>(seg)]);
      }
    }
    if (ref.paged) {
      // a paged sequence: its keys are the pages of its own row of the table, all inside the
      // pool (the loader's cu_seqlens_k holds its logical block). One whose keys name a page
      // outside the pool has no intended value to compare with (the stages record the reads).
      if (!paged_keys_in_pool(*ref.paged, r.k_src_first / std::max<int64_t>(ref.paged_seqlen_k, 1), r.k_count)) {
        ++ref.paged_outside_pool;
        continue;
      }
      if (r.q_count <= 0 || r.k_count <= 0) continue;
      const int64_t qshift = std::max<int64_t>({0, -r.q_src_first, -r.q_final_first});
      r.q_src_first += qshift;
      r.q_final_first += qshift;
      r.q_key_first += qshift;
      if (r.q_packed_first >= 0) r.q_packed_first += qshift;
      r.q_count = std::min({r.q_count - qshift, p.rows_q_src - r.q_src_first, p.rows_final - r.q_final_first});
      if (r.q_count <= 0) continue;
      ref.sequences.push_back(r);
      ref.rows_total += r.q_count;
      continue;
    }
    // clip to the rows that exist (a cu_seqlens that overruns its tensor still leaves the
    // rows before the end to compare)
    const int64_t kshift = std::max<int64_t>(0, -r.k_src_first);
    r.k_src_first += kshift;
    r.k_count = std::min(r.k_count - kshift, p.rows_k_src - r.k_src_first);
    r.q_key_first -= kshift;
    const int64_t qshift = std::max<int64_t>({0, -r.q_src_first, -r.q_final_first});
    r.q_src_first += qshift;
    r.q_final_first += qshift;
    r.q_key_first += qshift;
    if (r.q_packed_first >= 0) r.q_packed_first += qshift;
    r.q_count = std::min({r.q_count - qshift, p.rows_q_src - r.q_src_first, p.rows_final - r.q_final_first});
    if (r.q_count <= 0 || r.k_count <= 0) continue;
    ref.sequences.push_back(r);
    ref.rows_total += r.q_count;
  }
  (void)B;
  if (!same_packing && !padded_frame && !batch.batch)
    p.notes.push_back("reference: q and k are packed differently; each intended sequence attends to the keys of its cu_seqlens_k segment");
  if (ref.paged_outside_pool > 0)
    p.notes.push_back("reference: " + std::to_string(ref.paged_outside_pool) +
                      " sequence(s) whose page_table row names a page outside the pool are not compared");
  if (ref.sequences.empty()) {
    ref.enabled = false;
    ref.skip_reason = ref.paged_outside_pool > 0
                          ? "every intended sequence's page_table row names a page outside the pool: no intended keys"
                          : "no intended sequence maps onto the tensors the call received";
  }
}

// Multiply-adds of the attention forward over all rows (QK and PV) for a segment.
int64_t attention_macs(int64_t len_q, int64_t len_k, bool causal, int64_t wl, int64_t wr, int64_t H, int64_t D) {
  if (len_q <= 0 || len_k <= 0) return 0;
  double keys;
  if (causal) keys = std::max(0.0, double(len_k) - double(len_q - 1) / 2.0);
  else keys = double(len_k);
  if (wl >= 0) keys = std::min(keys, double(wl + 1 + std::max<int64_t>(wr, 0)));
  const double macs = double(len_q) * keys * double(H) * double(D) * 2.0;
  return macs > 4e18 ? int64_t{4000000000000000000} : static_cast<int64_t>(macs);
}

// first, last and evenly spaced rows of [first, first + count)
void sample_range(std::vector<uint8_t>& flags, int64_t first, int64_t count, int64_t want) {
  if (count <= 0) return;
  auto set = [&](int64_t r) {
    if (r >= 0 && r < static_cast<int64_t>(flags.size())) flags[static_cast<size_t>(r)] = 1;
  };
  set(first);
  set(first + count - 1);
  want = std::min(want, count);
  if (want > 2) {
    const double step = double(count - 1) / double(want - 1);
    for (int64_t i = 1; i + 1 < want; ++i) set(first + static_cast<int64_t>(std::llround(step * double(i))));
  }
}

// ---------------------------------------------------------------------------------------
// make_exec_plan's steps, in its order.

// The model and the options: seed, budget, workers, dtype, heads, the kernel contract's release.
void plan_model(ExecPlan& p, const Batch& batch, const ExecOptions& options) {
  p.seed = options.seed;
  p.budget = options.budget;
  const unsigned hw = std::thread::hardware_concurrency();
  p.threads = options.threads > 0 ? options.threads : static_cast<int>(std::clamp(hw, 1u, 64u));
  p.dtype = batch.model.dtype;
  p.elem = elem_type_of(p.dtype);
  p.num_heads = batch.model.num_heads;
  p.num_kv_heads = batch.model.num_kv_heads > 0 ? batch.model.num_kv_heads : batch.model.num_heads;
  p.head_dim = batch.model.head_dim;
  {
    std::optional<Version> fa = options.flash_attn ? options.flash_attn : kernel_release(batch);
    p.flash_attn_release = fa ? *fa : version_literal("2.6.3");
    p.torch_release = batch.environment.torch;
    // a `dispatch` block alone (diffusers, xformers) describes no flash-attn call to execute
    const bool dispatch_only = batch.dispatch && !batch.varlen && !batch.batch;
    if (!fa && !dispatch_only)
      p.notes.push_back("flash-attn release not given: the dynamic stages follow the 2.6.3 kernel contract");
  }
}

// Whether there is a call the dynamic stages can run: a replayed or given varlen call, in a
// floating dtype, with heads; false (and skip_reason) when not.
bool plan_call(ExecPlan& p, const VarlenArgs* a, const Batch& batch) {
  if (!a) {
    p.skip_reason = "no call to execute: the batch has no varlen block and no conversion was replayed";
    return false;
  }
  p.path = a->path;
  p.function = a->path == VarlenPath::dense ? "flash_attn_func" : "flash_attn_varlen_func";
  p.api = a->call.api;
  if (p.api == Api::torch_varlen_attn) {
    // not flash-attn's call: torch's varlen_attn over PyTorch's bundled FA2, whatever flash-attn
    // release the environment has installed
    p.flash_attn_release = version_literal("2.6.3");
    std::erase(p.notes, std::string("flash-attn release not given: the dynamic stages follow the 2.6.3 kernel contract"));
    const ResolvedFlashAttn torch = resolve_torch_varlen(p.torch_release);
    // 2.14.0 on may select cuDNN (check/flash_attn_rules.hpp torch_backend); its kernel is not
    // modelled: the stages still run FA2's contract
    const TorchBackend backend = torch_backend(batch);
    const std::string runs = backend.cudnn    ? backend.why + ", whose kernel is not modelled"
                             : !backend.known ? "PyTorch's bundled FA2, or cuDNN: " + backend.why
                                              : std::string("PyTorch's bundled FA2");
    p.notes.push_back("torch.varlen_attn (" + torch.label() + "): " + runs + "; the dynamic stages follow the "
                      "flash-attn 2.6.3 kernel contract" + (torch.note.empty() ? "" : "; " + torch.note));
  }
  if (p.dtype == DType::fp8_e4m3) {
    p.skip_reason = "fp8 inputs are not emulated (an FA3-only dtype)";
    return false;
  }
  if (!is_floating(p.dtype)) {
    p.skip_reason = "q/k/v dtype " + to_string(p.dtype) + " is not a floating dtype";
    return false;
  }
  if (p.num_heads <= 0 || p.head_dim <= 0 || p.num_kv_heads <= 0) {
    p.skip_reason = "the model has no heads or no head dim";
    return false;
  }
  // FA3's paged KV: the checked CPU twin reads k / v through the page table
  // (contract/fa3_paged.hpp) when the batch gives its values; q_v's score term runs everywhere
  if (a->path == VarlenPath::explicit_varlen && batch.varlen && flash_attn_family(a->call.api) == 3 &&
      batch.varlen->page_table) {
    if (!batch.varlen->page_table->values) {
      p.skip_reason = "page_table (FA3 paged KV) given by its shape only: the checked kernels need the table's values to "
                      "address K/V; the call is judged by its host checks and the page_table invariants";
      return false;
    }
    if (batch.rotary) {
      p.skip_reason = "page_table (FA3 paged KV) with a rotary: flash_attn_with_kvcache rotates the appended k only, "
                      "which is not modelled; the call is judged by its host checks and the page_table invariants";
      return false;
    }
    if (batch.batch) {
      p.skip_reason = "page_table (FA3 paged KV) beside a batch block: the pool's rows are not the batch's; the call is "
                      "judged by its host checks and the page_table invariants";
      return false;
    }
  }
  if (p.dtype == DType::fp32 || p.dtype == DType::fp64)
    p.notes.push_back("flash-attn rejects " + to_string(p.dtype) + " inputs (input.dtype); executed as if it accepted them");
  return true;
}

// The frames the tensors live in: the rows of the source tensors, the packed rows the kernel
// receives and the final rows the caller gets, worked out from the path. `args` are the
// arguments as the kernel receives them (the dense path is executed as varlen over the padded
// rows); `sz` remembers an overflow for the memory step.
struct Frames {
  VarlenArgs args;
  std::vector<int64_t> q_src_index, k_src_index;  // source row of each packed row (-1: none)
  checked::Sizes sz;
  bool have_batch = false;
  int64_t B = 1, Lq = 0, Lk = 0;
};

// The mask path: _upad_input's gathers by the indices of the mask (q by the key indices when
// Lq == Lk), and pad_input's scatter back into (B, Lq).
void frames_mask(ExecPlan& p, const VarlenArgs* a, Frames& fr) {
  VarlenArgs& args = fr.args;
  checked::Sizes& sz = fr.sz;
  const int64_t B = fr.B, Lq = fr.Lq, Lk = fr.Lk;
  std::vector<int64_t>& q_src_index = fr.q_src_index;
  std::vector<int64_t>& k_src_index = fr.k_src_index;
  GatherPlan& gk = p.unpad.k;
  GatherPlan& gq = p.unpad.q;
  p.rows_k_src = a->gather_rows_k > 0 ? a->gather_rows_k : sz.mul(B, Lk);
  p.rows_q_src = a->gather_rows_q > 0 ? a->gather_rows_q : sz.mul(B, Lq);
  if (a->indices_k) {
    gk.enabled = true;
    gk.indices = a->indices_k->values;
    gk.src_rows = p.rows_k_src;
    gk.dst_rows = static_cast<int64_t>(gk.indices.size());
  }
  // Lq == Lk gathers q with the key indices; when the release fails in the key gather it
  // never reaches the query gather
  const IntTensor* iq = a->indices_q               ? &*a->indices_q
                        : (Lq == Lk && a->indices_k && !a->failure) ? &*a->indices_k
                                                                    : nullptr;
  if (iq) {
    gq.enabled = true;
    gq.indices = iq->values;
    gq.src_rows = p.rows_q_src;
    gq.dst_rows = static_cast<int64_t>(gq.indices.size());
  }
  args.total_k = gk.enabled ? gk.dst_rows : p.rows_k_src;
  args.total_q = gq.enabled ? gq.dst_rows : p.rows_q_src;
  p.rows_final = sz.mul(B, Lq);
  if (gq.enabled) {
    p.pad.enabled = true;
    p.pad.indices = gq.indices;
    p.pad.dst_rows = p.rows_final;
  }
  q_src_index = gq.enabled ? gq.indices : std::vector<int64_t>();
  k_src_index = gk.enabled ? gk.indices : std::vector<int64_t>();
}

// The position_ids, kwargs and dense paths: the packed tensors are views of the padded ones
// (dense: one segment per row of the padded (B, L) tensors).
void frames_padded(ExecPlan& p, const VarlenArgs* a, Frames& fr) {
  VarlenArgs& args = fr.args;
  checked::Sizes& sz = fr.sz;
  const int64_t B = fr.B, Lq = fr.Lq, Lk = fr.Lk;
  p.rows_q_src = sz.mul(B, Lq);
  p.rows_k_src = sz.mul(B, Lk);
  // the replay may say the kernel got fewer keys than the batch holds (a sliding-window
  // cache cut to its last W keys)
  if (a->path == VarlenPath::dense && a->total_k > 0) p.rows_k_src = a->total_k;
  if (a->path == VarlenPath::dense && a->total_q > 0) p.rows_q_src = a->total_q;
  const int64_t Lq_d = B > 0 ? p.rows_q_src / B : Lq, Lk_d = B > 0 ? p.rows_k_src / B : Lk;
  if (a->path == VarlenPath::dense) {
    std::vector<int64_t> cq, ck;
    for (int64_t b = 0; b <= B; ++b) {
      cq.push_back(b * Lq_d);
      ck.push_back(b * Lk_d);
    }
    args.cu_seqlens_q = IntTensor{{B + 1}, cq, DType::int32};
    args.cu_seqlens_k = IntTensor{{B + 1}, ck, DType::int32};
    args.max_seqlen_q = {Lq_d, false, DType::int64};
    args.max_seqlen_k = {Lk_d, false, DType::int64};
    args.total_q = p.rows_q_src;
    args.total_k = p.rows_k_src;
    p.notes.push_back("dense path: flash_attn_func over the padded (B, L) tensors, executed as one segment per row");
    if (a->total_k <= 0)
      p.notes.push_back("the conversion does not say how many keys the dense call received: assumed kv_length = " +
                        std::to_string(Lk) + " per row");
  } else {
    if (args.total_q <= 0) args.total_q = p.rows_q_src;
    if (args.total_k <= 0) args.total_k = p.rows_k_src;
    // the packed tensors are views of the padded ones
    p.rows_q_src = args.total_q;
    p.rows_k_src = args.total_k;
  }
  p.rows_final = args.total_q;
}

// An explicit varlen call: the packed tensors are the source and the final frame. A paged
// FA3 call's k / v are the pool: num_pages * page_size rows.
void frames_explicit(ExecPlan& p, const Batch& batch, Frames& fr) {
  VarlenArgs& args = fr.args;
  if (const PageTable* t = paged_table(batch, args); t && t->values) args.total_k = t->num_pages * t->page_size;
  p.rows_q_src = std::max<int64_t>(args.total_q, 0);
  p.rows_k_src = std::max<int64_t>(args.total_k, 0);
  args.total_q = p.rows_q_src;
  args.total_k = p.rows_k_src;
  p.rows_final = p.rows_q_src;
}

// The frames of the call's path; false (and skip_reason) when the path needs a batch block the
// batch does not have. Packed rows not gathered are their own source rows.
bool plan_frames(ExecPlan& p, const Batch& batch, const VarlenArgs* a, Frames& fr) {
  const bool have_batch = batch.batch.has_value();
  const int64_t B = have_batch ? batch.batch->batch_size : 1;
  const int64_t Lq = have_batch ? batch.batch->query_length : 0;
  const int64_t Lk = have_batch ? batch.batch->kv_length : 0;
  fr.have_batch = have_batch;
  fr.B = B;
  fr.Lq = Lq;
  fr.Lk = Lk;
  p.batch_size = have_batch ? B : 0;
  p.query_length = Lq;
  p.kv_length = Lk;

  fr.args = *a;  // the dense path is executed as varlen over the padded rows
  switch (a->path) {
    case VarlenPath::mask:
      if (!have_batch) {
        p.skip_reason = "mask path without a batch block";
        return false;
      }
      frames_mask(p, a, fr);
      break;
    case VarlenPath::position_ids:
    case VarlenPath::kwargs:
    case VarlenPath::dense:
      if (!have_batch) {
        p.skip_reason = "no batch block to take the tensor shapes from";
        return false;
      }
      frames_padded(p, a, fr);
      break;
    case VarlenPath::explicit_varlen:
      frames_explicit(p, batch, fr);
      break;
  }
  VarlenArgs& args = fr.args;
  std::vector<int64_t>& q_src_index = fr.q_src_index;
  std::vector<int64_t>& k_src_index = fr.k_src_index;
  if (q_src_index.empty() && !p.unpad.q.enabled) {
    q_src_index.resize(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(args.total_q, int64_t{1} << 31))));
    std::iota(q_src_index.begin(), q_src_index.end(), 0);
  }
  // (a paged call has no rotary, the index's only reader: its pool may hold up to 2^62 rows)
  if (k_src_index.empty() && !p.unpad.k.enabled && !paged_table(batch, args)) {
    k_src_index.resize(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(args.total_k, int64_t{1} << 31))));
    std::iota(k_src_index.begin(), k_src_index.end(), 0);
  }
  return true;
}

// The padded frame the kernel's tensors come from, (B, Lq) and (B, Lk): the replay may have cut
// the keys (a sliding-window cache), which the reference then aligns with the last keys.
struct PaddedFrame {
  int64_t Lq, Lk;
};
PaddedFrame padded_frame(ExecPlan& p, const VarlenArgs* a, const Frames& fr) {
  const bool have_batch = fr.have_batch;
  const int64_t B = fr.B, Lq = fr.Lq, Lk = fr.Lk;
  int64_t Lq_f = Lq, Lk_f = Lk;
  if (have_batch && B > 0 && a->path != VarlenPath::explicit_varlen) {
    if (p.rows_q_src % B == 0) Lq_f = p.rows_q_src / B;
    if (p.rows_k_src % B == 0) Lk_f = p.rows_k_src / B;
    if (Lk_f != Lk) p.notes.push_back("the kernel receives " + std::to_string(Lk_f) + (Lk_f == 1 ? " key" : " keys") + " per row (the batch holds " +
                                      std::to_string(Lk) + "): the reference aligns the intent with the last keys");
  }
  return {Lq_f, Lk_f};
}

// The longest intended sequence's keys: the reference's per-worker buffers hold them.
int64_t longest_reference_keys(const ExecPlan& p) {
  int64_t longest = 0;
  for (const RefSequence& r : p.reference.sequences) longest = std::max(longest, r.k_count);
  return longest;
}

// The fp32 elements of every buffer the dynamic stages allocate (the CPU backend's storage).
int64_t buffer_elements(const ExecPlan& p, const VarlenArgs& args, checked::Sizes& m) {
  const int64_t H = p.num_heads, Hk = p.num_kv_heads, D = p.head_dim;
  int64_t el = 0;
  el = m.add(el, m.mul(p.rows_q_src, H, D));
  el = m.add(el, m.mul(2, m.mul(p.rows_k_src, Hk, D)));
  if (p.attention.qv) el = m.add(el, m.mul(p.rows_q_src, H, D));  // q_v
  if (p.unpad.q.enabled) el = m.add(el, m.mul(std::max<int64_t>(args.total_q, 0), H, D));
  if (p.unpad.k.enabled) el = m.add(el, m.mul(2, m.mul(std::max<int64_t>(args.total_k, 0), Hk, D)));
  if (p.rotary.enabled) {
    el = m.add(el, m.mul(std::max<int64_t>(args.total_q, 0), H, D));
    el = m.add(el, m.mul(std::max<int64_t>(args.total_k, 0), Hk, D));
    el = m.add(el, m.mul(2, m.mul(std::max<int64_t>(p.rotary.table_rows, 0), p.rotary.half)));
  }
  el = m.add(el, m.mul(std::max<int64_t>(args.total_q, 0), H, D));
  el = m.add(el, std::max<int64_t>(p.attention.lse_elements, 0));
  if (p.pad.enabled) el = m.add(el, m.mul(p.rows_final, H, D));
  const int64_t longest = longest_reference_keys(p);
  if (p.reference.enabled) {
    if (p.reference.rotary) {
      el = m.add(el, m.mul(p.rows_q_src, H, D));
      el = m.add(el, m.mul(p.rows_k_src, Hk, D));
    }
    el = m.add(el, m.mul(longest, D, p.threads));  // transposed keys per worker
  }
  if (p.backward.enabled) {
    // dO, dq, dk/dv(_expanded), the fp32 accumulator and softmax_d, the source-frame gradients
    const int64_t tq = std::max<int64_t>(args.total_q, 0), tk = std::max<int64_t>(args.total_k, 0);
    el = m.add(el, m.mul(2, m.mul(tq, H, D)));
    el = m.add(el, m.mul(2, m.mul(tk, H, D)));
    el = m.add(el, m.mul(2, m.mul(tk, Hk, D)));
    el = m.add(el, p.backward.dq_accum.elements());
    el = m.add(el, p.backward.softmax_d.elements());
    el = m.add(el, m.mul(p.rows_q_src, H, D));
    el = m.add(el, m.mul(2, m.mul(p.rows_k_src, Hk, D)));
  }
  return el;
}

// The host memory of the dynamic stages: the buffers, the masks and samples, the index copies,
// and the process around them.
int64_t host_bytes(const ExecPlan& p, const Frames& fr, int64_t el, checked::Sizes& m) {
  const VarlenArgs& args = fr.args;
  const std::vector<int64_t>& q_src_index = fr.q_src_index;
  const std::vector<int64_t>& k_src_index = fr.k_src_index;
  const int64_t longest = longest_reference_keys(p);
  int64_t bytes = m.mul(el, 4);
  bytes = m.add(bytes, m.mul(std::max<int64_t>(args.total_q, 0), 10));       // coverage, samples
  bytes = m.add(bytes, m.mul(std::max<int64_t>(p.rows_final, 0), 2));
  bytes = m.add(bytes, m.mul(longest, 8 * 2, p.threads));                    // reference scores
  bytes = m.add(bytes, m.mul(static_cast<int64_t>(q_src_index.size() + k_src_index.size()), 8));
  // The plan's own index copies (gathers and the pad scatter), and the process around the
  // buffers: the binary, the loaded batch and the static stages' results, each worker's stack.
  // Measured peak RSS (/usr/bin/time -v, 2 workers) against this sum: 542 / 629 MB (64k packed
  // tokens, H 8, D 64), 2150 / 2266 MB (256k), 4025 / 4175 MB (480k), 4159 / 4312 MB (496k:
  // over 4 GiB, checked statically), 1351 / 1424 MB (a 4 x 32768 mask, H 8 / 2), 1857 / 1936 MB
  // (50 segments of 1000, H 32 / 4, D 128), 1678 / 1987 MB (a 64k training step). Without these
  // two terms the sum fell short of the real peak by up to 15 MB.
  bytes = m.add(bytes, m.mul(static_cast<int64_t>(p.unpad.q.indices.size() + p.unpad.k.indices.size() +
                                                  p.pad.indices.size()),
                             8));
  constexpr int64_t kProcessBaseline = int64_t{64} << 20, kThreadStack = int64_t{8} << 20;
  bytes = m.add(bytes, m.add(kProcessBaseline, m.mul(p.threads, kThreadStack)));
  return bytes;
}

// memory: the dynamic stages run only within the memory budget; false (and skip_reason) when
// the sizes overflow or need more.
bool plan_memory(ExecPlan& p, const Frames& fr, const ExecOptions& options) {
  checked::Sizes m;
  const int64_t el = buffer_elements(p, fr.args, m);
  const int64_t bytes = host_bytes(p, fr, el, m);
  const checked::Sizes& sz = fr.sz;
  p.memory.elements = el;
  p.memory.bytes = bytes;
  if (m.overflow || sz.overflow) {
    p.skip_reason = "the tensors this call implies are too large to count (sizes overflow 64 bits)";
    return false;
  }
  if (bytes > options.memory_budget_bytes) {
    p.skip_reason = "the dynamic stages need about " + human_bytes(bytes) + " of host memory, over the budget of " +
                    human_bytes(options.memory_budget_bytes) + "; the batch was checked statically only";
    return false;
  }
  return true;
}

// The multiply-adds of attention and the reference (a training step's backward included): the
// rows the stages compute, those the grid covers inside q, against the keys inside k.
int64_t plan_cost(const ExecPlan& p) {
  const AttentionPlan& at = p.attention;
  int64_t cost = 0;
  const auto& cq = at.cu_seqlens_q;
  const auto& ck = at.cu_seqlens_k;
  for (int64_t b = 0; b < at.num_segments && static_cast<size_t>(b + 1) < cq.size(); ++b) {
    const int64_t lq = at.swapped ? 1 : fa2::wrap_sub(cq[static_cast<size_t>(b) + 1], cq[static_cast<size_t>(b)]);
    const int64_t lk_cu = static_cast<size_t>(b + 1) < ck.size() ? fa2::wrap_sub(ck[static_cast<size_t>(b) + 1], ck[static_cast<size_t>(b)]) : 0;
    // the rows the stages compute: those the grid covers, inside q, against the keys inside k
    // (the rest is counted or folded at once: clip.cpp, zero_blocks_step)
    const int64_t q_inside = at.swapped ? lq : std::max<int64_t>(0, at.total_q - fa2::row_offset(cq[static_cast<size_t>(b)]));
    const int64_t rows = std::min({lq, std::max<int64_t>(at.grid_m, 0) * at.tile.block_m, q_inside});
    int64_t k_inside = static_cast<size_t>(b + 1) < ck.size()
                           ? std::max<int64_t>(0, at.total_k - fa2::row_offset(ck[static_cast<size_t>(b)]))
                           : 0;
    int64_t lk = lk_cu;
    if (at.paged) {
      // keys through the table: those before its end are read one by one (the rest fold at once)
      k_inside = fa3::first_key_past_table(at.paged->view(), b);
      if (at.seqused_k && static_cast<size_t>(b) < at.seqused_k->size()) lk = (*at.seqused_k)[static_cast<size_t>(b)];
    }
    cost = std::min<int64_t>(cost + attention_macs(rows, std::min(lk, k_inside), at.flags.causal,
                                                   at.flags.local ? at.flags.window_left : -1,
                                                   at.flags.window_right, p.num_heads, p.head_dim),
                             int64_t{1} << 62);
  }
  for (const RefSequence& r : p.reference.sequences)
    cost = std::min<int64_t>(cost + attention_macs(r.q_count, r.k_count, p.reference.causal, p.reference.window_left,
                                                   p.reference.window_right, p.num_heads, p.head_dim),
                             int64_t{1} << 62);
  // a training step: the backward does about two and a half times the forward's work, its
  // reference about twice the forward reference's
  if (p.backward.enabled) cost = std::min<int64_t>(cost / 2 * 7, int64_t{1} << 62);
  return cost;
}

// A fraction f of each kernel segment's rows into the attention's sample (at least its first
// and last rows).
void sample_segments(AttentionPlan& atm, int64_t total_q, double f) {
  const auto& cq = atm.cu_seqlens_q;
  for (int64_t b = 0; b < atm.num_segments && static_cast<size_t>(b + 1) < cq.size(); ++b) {
    int64_t first = atm.swapped ? b : fa2::row_offset(cq[static_cast<size_t>(b)]);
    int64_t len = atm.swapped ? 1 : fa2::wrap_sub(cq[static_cast<size_t>(b) + 1], cq[static_cast<size_t>(b)]);
    if (len <= 0 || first >= total_q) continue;
    len = std::min(len, total_q - first);
    sample_range(atm.sample, first, len, std::max<int64_t>(2, static_cast<int64_t>(std::ceil(f * double(len)))));
  }
}

// The intended sequences' rows into the reference's sample; returns the stride of the
// sequences that keep their first and last rows (1: every sequence).
size_t sample_sequences(ExecPlan& p, double f) {
  // Each intended sequence's first and last rows while the budget's rows hold them; with
  // more sequences than that (100,000 one-token sequences inside one kernel segment, whose
  // every row costs the whole segment) only every `stride`-th sequence keeps its two rows,
  // so the sample stays within the budget instead of growing to every row.
  const auto& seqs = p.reference.sequences;
  int64_t intended_rows = 0;
  for (const RefSequence& r : seqs) intended_rows += std::max<int64_t>(r.q_count, 0);
  const int64_t budget_rows = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(f * double(intended_rows))));
  const size_t stride = std::max<size_t>(1, static_cast<size_t>(checked::ceil_div(2 * static_cast<int64_t>(seqs.size()), budget_rows)));
  int64_t seen = 0;  // rows of the sequences before this one: the sample spreads f of them evenly
  for (size_t i = 0; i < seqs.size(); ++i) {
    const RefSequence& r = seqs[i];
    const int64_t len = std::max<int64_t>(r.q_count, 0);
    int64_t want = stride == 1 ? static_cast<int64_t>(std::ceil(f * double(len)))
                               : static_cast<int64_t>(std::floor(f * double(seen + len))) -
                                     static_cast<int64_t>(std::floor(f * double(seen)));
    seen += len;
    if (i % stride == 0) want = std::max<int64_t>(2, want);
    if (want > 0) sample_range(p.reference.sample, r.q_final_first, r.q_count, want);
  }
  return stride;
}

// The packed rows meant to hold the reference's sampled rows join the attention's sample; then
// both samples are counted.
void sample_reference_rows_packed(ExecPlan& p, int64_t total_q) {
  AttentionPlan& atm = p.attention;
  // the packed row meant to hold each final row (the pad path)
  std::vector<int64_t> packed_of_final;
  if (p.pad.enabled) {
    packed_of_final.assign(static_cast<size_t>(std::max<int64_t>(p.rows_final, 0)), -1);
    for (size_t i = 0; i < p.pad.indices.size(); ++i) {
      const int64_t t = p.pad.indices[i];
      if (t >= 0 && t < p.rows_final && packed_of_final[static_cast<size_t>(t)] < 0)
        packed_of_final[static_cast<size_t>(t)] = static_cast<int64_t>(i);
    }
  }
  for (size_t fr = 0; fr < p.reference.sample.size(); ++fr) {
    if (!p.reference.sample[fr]) continue;
    const int64_t pk = p.pad.enabled ? packed_of_final[fr] : static_cast<int64_t>(fr);
    if (pk >= 0 && pk < total_q) atm.sample[static_cast<size_t>(pk)] = 1;
  }
  atm.rows_sampled = std::count(atm.sample.begin(), atm.sample.end(), uint8_t{1});
  p.reference.rows_sampled = 0;
  for (const RefSequence& r : p.reference.sequences)
    for (int64_t i = 0; i < r.q_count; ++i) p.reference.rows_sampled += p.reference.sample[static_cast<size_t>(r.q_final_first + i)];
}

// budget: above --budget multiply-adds (and without --full) the attention and reference stages
// compute a sample of rows.
void plan_budget(ExecPlan& p, const ExecOptions& options) {
  const int64_t cost = plan_cost(p);
  // A page table can name far more keys than its pool holds (every entry the same page, a
  // large cache_seqlens): sampling cuts rows, never keys. Past 8x the budget for the two rows
  // of each segment a sample keeps, the dynamic stages are not run (--full runs them).
  if (p.attention.paged && !options.full && options.budget > 0) {
    const AttentionPlan& at = p.attention;
    double floor = 0;
    for (int64_t b = 0; b < at.num_segments && static_cast<size_t>(b + 1) < at.cu_seqlens_q.size(); ++b) {
      const int64_t lq = fa2::wrap_sub(at.cu_seqlens_q[static_cast<size_t>(b) + 1], at.cu_seqlens_q[static_cast<size_t>(b)]);
      const int64_t lk = at.seqused_k && static_cast<size_t>(b) < at.seqused_k->size()
                             ? (*at.seqused_k)[static_cast<size_t>(b)]
                             : int64_t{at.max_seqlen_k};
      const int64_t keys = std::min<int64_t>(std::max<int64_t>(lk, 0), fa3::first_key_past_table(at.paged->view(), b));
      floor += double(std::clamp<int64_t>(lq, 0, 2)) * double(keys) * double(p.num_heads) * double(p.head_dim) * 4.0;
    }
    if (floor > 8.0 * double(options.budget)) {
      p.skip_reason = "page_table (FA3 paged KV): the keys its table names need about " +
                      std::to_string(static_cast<int64_t>(floor)) + " multiply-adds for two rows of each sequence, over 8x --budget " +
                      std::to_string(options.budget) + "; the call is judged by its host checks and the page_table invariants "
                      "(--full runs it)";
      return;
    }
  }
  p.cost = cost;
  const int64_t total_q = std::max<int64_t>(p.attention.total_q, 0);
  if (!options.full && cost > options.budget && options.budget > 0) {
    p.sampled = true;
    const double f = double(options.budget) / double(cost);
    p.attention.sample.assign(static_cast<size_t>(total_q), 0);
    p.reference.sample.assign(static_cast<size_t>(std::max<int64_t>(p.rows_final, 0)), 0);
    sample_segments(p.attention, total_q, f);
    const size_t stride = sample_sequences(p, f);
    sample_reference_rows_packed(p, total_q);
    p.notes.push_back("budget: attention and reference need about " + std::to_string(cost) +
                      " multiply-adds, over --budget " + std::to_string(options.budget) + "; checked a sample of " +
                      std::to_string(p.reference.rows_sampled) + " of " + std::to_string(p.reference.rows_total) +
                      " intended query rows (" +
                      (stride == 1 ? std::string("each sequence's") : "every " + std::to_string(stride) + "th sequence's") +
                      " first and last rows included; --full checks all)");
  } else {
    p.attention.rows_sampled = total_q;
    p.reference.rows_sampled = p.reference.rows_total;
  }
}

// The backward of a phantom segment is not run (why: below).
void skip_backward_past_phantom(ExecPlan& p) {
  // The backward walks every key block of a segment against every query tile of it: for a
  // segment running far past the tensors (cu_seqlens [0, 4, 7, 1000012] on 12 rows) that walk
  // is quadratic in rows that do not exist, all of them out of bounds, which the forward's
  // records already report. Past more rows than the tensors hold, it is not run (the stage says so).
  if (p.backward.enabled && p.backward.skip_reason.empty() && !p.attention.cu_seqlens_q.empty()) {
    const int64_t end = *std::max_element(p.attention.cu_seqlens_q.begin(), p.attention.cu_seqlens_q.end());
    const int64_t past = end - p.attention.total_q;
    if (past > std::max<int64_t>(p.attention.total_q, 4096))
      p.backward.skip_reason = "not run: cu_seqlens_q runs " + std::to_string(past) + " rows past the " +
                               std::to_string(p.attention.total_q) +
                               " rows of q (a phantom segment); the backward would walk each of its key blocks "
                               "against each of its query tiles, all past the buffers, which the forward's records "
                               "already report";
  }
}

}  // namespace

void set_attention_grid(AttentionPlan& at, const fa2::Normalized& n, int64_t max_k) {
  at.swapped = n.swapped;
  at.ngroups = n.ngroups;
  at.flags = {.causal = n.causal,
              .local = n.local,
              .window_left = static_cast<int32_t>(n.window_left),
              .window_right = static_cast<int32_t>(n.window_right),
              .block_m = at.tile.block_m,
              .block_n = at.tile.block_n,
              .chunk = static_cast<int32_t>(std::min<int64_t>(n.attention_chunk, kInt32Max))};
  // swapped: the kernel sees Hk heads, ngroups rows per "sequence", no cu_seqlens_q
  at.max_seqlen_q = static_cast<int32_t>(n.max_seqlen_q);
  at.grid_h = n.num_heads;
  at.max_seqlen_k = static_cast<int32_t>(max_k);
  at.grid_b = at.num_segments;
  at.grid_m = (static_cast<int64_t>(at.max_seqlen_q) + at.tile.block_m - 1) / at.tile.block_m;
}

void plan_backward_kernel(ExecPlan& p, int64_t max_q, bool causal, int64_t window_left, int64_t window_right) {
  BackwardPlan& bw = p.backward;
  const AttentionPlan& at = p.attention;
  bw.kernel = fa2::bwd::normalize(bw.release, {.max_seqlen_q = max_q,
                                               .max_seqlen_k = at.max_seqlen_k,
                                               .num_heads = p.num_heads,
                                               .num_heads_k = p.num_kv_heads,
                                               .head_dim = p.head_dim,
                                               .num_segments = at.num_segments,
                                               .causal = causal,
                                               .window_left = window_left,
                                               .window_right = window_right,
                                               .deterministic = bw.deterministic,
                                               .arch = at.arch});
  bw.dq_accum = {.total_q = std::max<int64_t>(at.total_q, 0),
                 .num_segments = at.num_segments,
                 .num_heads = p.num_heads,
                 .d_rounded = bw.kernel.tile.head_dim_rounded,
                 .nsplits = bw.kernel.nsplits};
  bw.softmax_d = {.layout = bw.release.lse,
                  .total_q = std::max<int64_t>(at.total_q, 0),
                  .num_segments = at.num_segments,
                  .num_heads = p.num_heads,
                  .max_seqlen_q = std::max<int64_t>(max_q, 0)};
}

std::vector<uint8_t> AttentionPlan::rows_past_seqused_q() const {
  std::vector<uint8_t> past;
  if (!seqused_q || swapped) return past;
  const int64_t rows = std::max<int64_t>(total_q, 0);
  past.assign(static_cast<size_t>(rows), 0);
  for (int64_t b = 0; b < num_segments && b < static_cast<int64_t>(seqused_q->size()); ++b) {
    const int64_t start = cu_seqlens_q[static_cast<size_t>(b)], end = cu_seqlens_q[static_cast<size_t>(b + 1)];
    const int64_t used = std::max<int64_t>((*seqused_q)[static_cast<size_t>(b)], 0);
    for (int64_t r = std::max<int64_t>(start + used, 0); r < std::min(end, rows); ++r) past[static_cast<size_t>(r)] = 1;
  }
  return past;
}

ExecPlan make_exec_plan(const Batch& batch, const Conversion& conversion, const ExecOptions& options) {
  ExecPlan p;
  plan_model(p, batch, options);
  const VarlenArgs* a = conversion.effective();
  if (!plan_call(p, a, batch)) return p;
  Frames fr;
  if (!plan_frames(p, batch, a, fr)) return p;
  if (a->failure) {
    p.conversion_failure = raise(a->failure->where, a->failure->type, a->failure->message);
    p.fails_at = Stage::unpad;
  }

  plan_attention(p, batch, fr.args, a->path == VarlenPath::dense);
  const PaddedFrame padded = padded_frame(p, a, fr);
  if (batch.rotary) plan_rotary(p, batch, fr.args, fr.q_src_index, fr.k_src_index, padded.Lq, padded.Lk);
  plan_reference(p, batch, fr.args, fr.B, padded.Lq, padded.Lk);
  plan_backward(p, batch, fr.args);

  if (!plan_memory(p, fr, options)) return p;
  plan_budget(p, options);
  p.attention.past_rows = attention_tiles_past_rows(p);
  if (std::string n = clipped_note(p); !n.empty()) p.notes.push_back(std::move(n));
  skip_backward_past_phantom(p);
  return p;
}

}  // namespace ad
