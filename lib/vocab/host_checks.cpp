// The host-check tables (vocab/host_checks.hpp). Each table was read from the tagged release in
// Dao-AILab/flash-attention, in the order the function checks; `source` names release and file.
// FA2's order (mha_varlen_fwd and mha_fwd) is the same from v2.0.0 through v2.8.3 for the checks
// listed; softcap (and so its check) exists from v2.6.0.
#include "vocab/host_checks.hpp"

#include <array>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>

namespace ad {

namespace {

using C = HostCheck;
using S = HostScope;

constexpr std::string_view kRuntime = "RuntimeError";
constexpr std::string_view kAssertion = "AssertionError";

// ---- FA1: v1.0.9 csrc/flash_attn/fmha_api.cpp mha_fwd (flash_attn_unpadded_func). TORCH_CHECK
// without a message: torch says "Expected <condition> to be true, but got false."
constexpr std::string_view kFa1 = "v1.0.9 csrc/flash_attn/fmha_api.cpp mha_fwd";
constexpr std::string_view kFa1HeadDim = "Expected (head_size % 8 == 0) && (head_size <= 128) to be true, but got false.";
constexpr HostCheckEntry kFa1Entries[] = {
    {C::q_dtype, S::both, "q_dtype == torch::kFloat16 || ((is_sm8x || is_sm90) && q_dtype == torch::kBFloat16)", kRuntime,
     "Expected q_dtype == torch::kFloat16 || ((is_sm8x || is_sm90) && q_dtype == torch::kBFloat16) to be true, but got false.",
     kFa1},
    {C::k_dtype, S::both, "k.dtype() == q_dtype", kRuntime, "Expected k.dtype() == q_dtype to be true, but got false.", kFa1},
    {C::v_dtype, S::both, "v.dtype() == q_dtype", kRuntime, "Expected v.dtype() == q_dtype to be true, but got false.", kFa1},
    {C::cu_seqlens_q_dtype, S::both, "cu_seqlens_q.dtype() == torch::kInt32", kRuntime,
     "Expected cu_seqlens_q.dtype() == torch::kInt32 to be true, but got false.", kFa1},
    {C::cu_seqlens_k_dtype, S::both, "cu_seqlens_k.dtype() == torch::kInt32", kRuntime,
     "Expected cu_seqlens_k.dtype() == torch::kInt32 to be true, but got false.", kFa1},
    {C::cu_seqlens_q_device, S::both, "cu_seqlens_q.is_cuda()", kRuntime,
     "Expected cu_seqlens_q.is_cuda() to be true, but got false.", kFa1},
    {C::cu_seqlens_k_device, S::both, "cu_seqlens_k.is_cuda()", kRuntime,
     "Expected cu_seqlens_k.is_cuda() to be true, but got false.", kFa1},
    {C::batch_size_positive, S::both, "batch_size > 0", kRuntime, "Expected batch_size > 0 to be true, but got false.", kFa1},
    // one TORCH_CHECK for both conditions
    {C::head_dim_aligned, S::both, "head_size % 8 == 0", kRuntime, kFa1HeadDim, kFa1},
    {C::head_dim_max, S::both, "head_size <= 128", kRuntime, kFa1HeadDim, kFa1},
    {C::kv_heads_equal, S::both, "CHECK_SHAPE(k, total_k, num_heads, head_size)", kRuntime,
     "k must have shape (total_k, num_heads, head_size)", kFa1},
    {C::cu_seqlens_q_shape, S::both, "CHECK_SHAPE(cu_seqlens_q, batch_size + 1)", kRuntime,
     "cu_seqlens_q must have shape (batch_size + 1)", kFa1},
    {C::cu_seqlens_k_shape, S::both, "CHECK_SHAPE(cu_seqlens_k, batch_size + 1)", kRuntime,
     "cu_seqlens_k must have shape (batch_size + 1)", kFa1},
};

// ---- FA2: v2.6.3 csrc/flash_attn/flash_api.cpp, mha_varlen_fwd (flash_attn_varlen_func) and
// mha_fwd (flash_attn_func). The two differ only in where softcap with dropout is refused.
constexpr std::string_view kFa2Varlen = "v2.6.3 csrc/flash_attn/flash_api.cpp mha_varlen_fwd";
constexpr std::string_view kFa2Both = "v2.6.3 csrc/flash_attn/flash_api.cpp mha_varlen_fwd, mha_fwd";
constexpr std::string_view kFa2Dense = "v2.6.3 csrc/flash_attn/flash_api.cpp mha_fwd";
constexpr std::string_view kSoftcapDropout = "Softcapping does not support dropout for now";
constexpr HostCheckEntry kFa2Entries[] = {
    {C::q_dtype, S::both, "q_dtype == torch::kFloat16 || q_dtype == torch::kBFloat16", kRuntime,
     "FlashAttention only support fp16 and bf16 data type", kFa2Both},
    {C::k_dtype, S::both, "k.dtype() == q_dtype", kRuntime, "query and key must have the same dtype", kFa2Both},
    {C::v_dtype, S::both, "v.dtype() == q_dtype", kRuntime, "query and value must have the same dtype", kFa2Both},
    {C::cu_seqlens_q_dtype, S::varlen, "cu_seqlens_q.dtype() == torch::kInt32", kRuntime,
     "cu_seqlens_q must have dtype int32", kFa2Varlen},
    {C::cu_seqlens_k_dtype, S::varlen, "cu_seqlens_k.dtype() == torch::kInt32", kRuntime,
     "cu_seqlens_k must have dtype int32", kFa2Varlen},
    {C::cu_seqlens_q_device, S::varlen, "CHECK_DEVICE(cu_seqlens_q)", kRuntime, "cu_seqlens_q must be on CUDA", kFa2Varlen},
    {C::cu_seqlens_k_device, S::varlen, "CHECK_DEVICE(cu_seqlens_k)", kRuntime, "cu_seqlens_k must be on CUDA", kFa2Varlen},
    {C::softcap_dropout, S::varlen, "softcap <= 0.f || p_dropout == 0.f", kRuntime, kSoftcapDropout, kFa2Varlen},
    // mha_varlen_fwd reshapes q for seqlenq_ngroups_swapped here, before the checks below
    {C::batch_size_positive, S::both, "batch_size > 0", kRuntime, "batch size must be positive", kFa2Both},
    {C::head_dim_max, S::both, "head_size_og <= 256", kRuntime,
     "FlashAttention forward only supports head dimension at most 256", kFa2Both},
    {C::heads_divide, S::both, "num_heads % num_heads_k == 0", kRuntime,
     "Number of heads in key/value must divide number of heads in query", kFa2Both},
    {C::softcap_dropout, S::dense, "softcap <= 0.f || p_dropout == 0.f", kRuntime, kSoftcapDropout, kFa2Dense},
    {C::cu_seqlens_q_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_q, batch_size + 1)", kRuntime,
     "cu_seqlens_q must have shape (batch_size + 1)", kFa2Varlen},
    {C::cu_seqlens_k_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_k, batch_size + 1)", kRuntime,
     "cu_seqlens_k must have shape (batch_size + 1)", kFa2Varlen},
    {C::seqused_k_shape, S::varlen, "CHECK_SHAPE(seqused_k, batch_size)", kRuntime, "seqused_k must have shape (batch_size)",
     kFa2Varlen},
};

// ---- FA3: v2.8.3 hopper/flash_api.cpp mha_fwd (flash_attn_interface, varlen when cu_seqlens
// are given). Device before dtype for each cu_seqlens; the head-dim alignment last.
constexpr std::string_view kFa3 = "v2.8.3 hopper/flash_api.cpp mha_fwd";
constexpr HostCheckEntry kFa3Entries[] = {
    {C::q_dtype, S::both, "q_type == Half || q_type == BFloat16 || q_type == Float8_e4m3fn", kRuntime,
     "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type", kFa3},
    {C::k_dtype, S::both, "k.scalar_type() == q_type", kRuntime, "query and key must have the same dtype", kFa3},
    {C::v_dtype, S::both, "v.scalar_type() == q_type", kRuntime, "query and value must have the same dtype", kFa3},
    // a page table (flash_attn_with_kvcache): its device, then its dtype
    {C::page_table_dtype, S::both, "page_table.dtype() == torch::kInt32", kRuntime, "page_table must have dtype torch.int32",
     kFa3},
    {C::cu_seqlens_q_device, S::varlen, "CHECK_DEVICE(cu_seqlens_q)", kRuntime, "cu_seqlens_q must be on CUDA", kFa3},
    {C::cu_seqlens_q_dtype, S::varlen, "cu_seqlens_q.dtype() == torch::kInt32", kRuntime,
     "cu_seqlens_q must have dtype torch.int32", kFa3},
    {C::cu_seqlens_k_device, S::varlen, "CHECK_DEVICE(cu_seqlens_k)", kRuntime, "cu_seqlens_k must be on CUDA", kFa3},
    {C::cu_seqlens_k_dtype, S::varlen, "cu_seqlens_k.dtype() == torch::kInt32", kRuntime,
     "cu_seqlens_k must have dtype torch.int32", kFa3},
    // batch_size_k: page_table.size(0) with a page table, else cu_seqlens_k.size(0) - 1 (varlen)
    {C::batch_size_k, S::both, "batch_size == batch_size_k", kRuntime, "batch_size must be equal to batch_size_k", kFa3},
    {C::head_dim_max, S::both, "head_size <= max_headdim (256)", kRuntime,
     "FlashAttention forward only supports head dimension at most 256", kFa3},
    {C::heads_divide, S::both, "num_heads % num_heads_k == 0", kRuntime,
     "Number of heads in key/value must divide number of heads in query", kFa3},
    {C::cu_seqlens_q_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_q, batch_size + 1)", kRuntime,
     "cu_seqlens_q must have shape (batch_size + 1)", kFa3},
    {C::cu_seqlens_k_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_k, batch_size + 1)", kRuntime,
     "cu_seqlens_k must have shape (batch_size + 1)", kFa3},
    // seqused_q (hopper/ since Dao-AILab/flash-attention PR#1182): its dtype, device and
    // contiguity come before its shape; the shape is what a batch file can get wrong
    {C::seqused_q_shape, S::varlen, "CHECK_SHAPE(seqused_q, batch_size)", kRuntime, "seqused_q must have shape (batch_size)",
     kFa3},
    {C::seqused_k_shape, S::varlen, "CHECK_SHAPE(seqused_k, batch_size)", kRuntime, "seqused_k must have shape (batch_size)",
     kFa3},
    // alignment = 16 for fp8_e4m3, 8 otherwise; the message names it (the 16-bit case here)
    {C::head_dim_aligned, S::both, "head_size % alignment == 0", kRuntime, "head_size should be a multiple of 8", kFa3},
    // q_v (Dao-AILab/flash-attention since 2025-02, "Support Qv"), after the output and the
    // scheduler metadata; the hopper/ 3.0.0 release adds "q_v is only supported for hdim_v >= 256."
    // after the shape (not modelled: one rule set for both)
    {C::qv_head_dim, S::both, "head_size <= 64", kRuntime, "q_v is only supported for head_size <= 64", kFa3},
    {C::qv_q_dtype, S::both, "q_type == Half || q_type == BFloat16", kRuntime,
     "q_v is only supported for fp16 and bf16 data type", kFa3},
    {C::qv_arch, S::both, "params.arch == 90", kRuntime, "q_v is only supported for Hopper GPUs", kFa3},
    {C::qv_dtype, S::both, "q_v.dtype() == q_type", kRuntime, "q_v must have the same dtype as query", kFa3},
    {C::qv_shape, S::varlen, "CHECK_SHAPE(q_v, total_q, num_heads, head_size_v)", kRuntime,
     "q_v must have shape (total_q, num_heads, head_size_v)", kFa3},
};

// ---- FA4: flash_attn/cute/interface.py _flash_attn_fwd, Python asserts: shapes first, then
// dtypes, devices, heads, head dim. One assert covers q/k/v dtypes, one all index dtypes, one
// all devices.
constexpr std::string_view kFa4 = "fa4-v4.0.0.beta0 flash_attn/cute/interface.py _flash_attn_fwd";
constexpr std::string_view kFa4Fp8 = "fa4-v4.0.0.beta10 flash_attn/cute/interface.py _flash_attn_fwd";
// beta10 validates the head dim in _validate_head_dims with a message naming the GPU arch; the
// rule set keeps beta0's messages for it
constexpr std::string_view kFa4Fp8HeadDim =
    "fa4-v4.0.0.beta0 flash_attn/cute/interface.py _flash_attn_fwd (beta10: _validate_head_dims, per arch)";
constexpr std::string_view kFa4SameDtype = "inputs must have the same dtype";
constexpr std::string_view kFa4IndexDtype = "cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k must be int32";
constexpr std::string_view kFa4Device = "inputs must be on CUDA device";

constexpr std::string_view kFa4CuKShape = "cu_seqlens_k must have shape (batch_size + 1,)";
constexpr std::string_view kFa4CuQShape = "cu_seqlens_q must have shape (batch_size + 1,)";
constexpr std::string_view kFa4SequsedShape = "seqused_k must have shape (batch_size,)";
constexpr std::string_view kFa4SequsedQShape = "seqused_q must have shape (batch_size,)";  // 4.0.0b4 - b36
constexpr std::string_view kFa4Heads = "num_head must be divisible by num_head_kv";
constexpr std::string_view kFa4HeadDimMax = "head_dim must be less than or equal to 256";
constexpr std::string_view kFa4HeadDimAligned = "head_dim must be divisible by 8";  // 16 // element_size: 8 for 16-bit

constexpr HostCheckEntry kFa4Entries[] = {
    {C::cu_seqlens_k_shape, S::varlen, "cu_seqlens_k.shape == (batch_size + 1,)", kAssertion, kFa4CuKShape, kFa4},
    {C::cu_seqlens_q_shape, S::varlen, "cu_seqlens_q.shape == (batch_size + 1,)", kAssertion, kFa4CuQShape, kFa4},
    {C::seqused_q_shape, S::varlen, "seqused_q.shape == (batch_size,)", kAssertion, kFa4SequsedQShape, kFa4},
    {C::seqused_k_shape, S::varlen, "seqused_k.shape == (batch_size,)", kAssertion, kFa4SequsedShape, kFa4},
    {C::q_dtype, S::both, "q.dtype in [torch.float16, torch.bfloat16]", kAssertion,
     "inputs must be float16 or bfloat16", kFa4},
    {C::k_dtype, S::both, "q.dtype == k.dtype == v.dtype", kAssertion, kFa4SameDtype, kFa4},
    {C::v_dtype, S::both, "q.dtype == k.dtype == v.dtype", kAssertion, kFa4SameDtype, kFa4},
    {C::cu_seqlens_q_dtype, S::varlen, "t.dtype == torch.int32", kAssertion, kFa4IndexDtype, kFa4},
    {C::cu_seqlens_k_dtype, S::varlen, "t.dtype == torch.int32", kAssertion, kFa4IndexDtype, kFa4},
    {C::cu_seqlens_q_device, S::varlen, "t.is_cuda", kAssertion, kFa4Device, kFa4},
    {C::cu_seqlens_k_device, S::varlen, "t.is_cuda", kAssertion, kFa4Device, kFa4},
    {C::heads_divide, S::both, "num_head % num_head_kv == 0", kAssertion, kFa4Heads, kFa4},
    {C::head_dim_max, S::both, "head_dim <= 256", kAssertion, kFa4HeadDimMax, kFa4},
    {C::head_dim_aligned, S::both, "head_dim % alignment == 0", kAssertion, kFa4HeadDimAligned, kFa4},
};
// beta10 adds fp8 inputs and names itself the source; the order and the other messages are
// beta0's (its head-dim messages kept, kFa4Fp8HeadDim says why).
constexpr auto kFa4Fp8Entries = [] {
  std::array<HostCheckEntry, std::size(kFa4Entries)> e{};
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = kFa4Entries[i];
    e[i].source = kFa4Fp8;
    if (e[i].check == C::q_dtype) {
      e[i].condition = "q.dtype in [float16, bfloat16, float8_e4m3fn, float8_e5m2]";
      e[i].message = "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2";
    }
    if (e[i].check == C::head_dim_max || e[i].check == C::head_dim_aligned) e[i].source = kFa4Fp8HeadDim;
  }
  return e;
}();

// ---- torch.nn.attention.varlen.varlen_attn (torch 2.10, 2.11): the op goes to
// aten::_flash_attention_forward, PyTorch's bundled FA2. The dispatcher's device check on the
// CUDA kernel's arguments comes first (message measured with torch 2.11.0 on an H100, cum_seq_q
// on the CPU: tests/oracle/cases/oracle-torch-varlen-cu-on-cpu.json), then mha_varlen_fwd in
// aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp: FA2's messages, with the
// head-dim alignment checked (not padded) after the heads.
constexpr std::string_view kTorch = "torch 2.11.0 aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp mha_varlen_fwd";
constexpr std::string_view kTorchDispatch = "torch 2.11.0 dispatcher, wrapper_CUDA___flash_attention_forward (measured)";
constexpr HostCheckEntry kTorchEntries[] = {
    {C::cu_seqlens_q_device, S::varlen, "cum_seq_q on q's device", kRuntime,
     "Expected all tensors to be on the same device, but got cum_seq_q is on cpu, different from other tensors on "
     "cuda:0 (when checking argument in method wrapper_CUDA___flash_attention_forward)",
     kTorchDispatch},
    {C::cu_seqlens_k_device, S::varlen, "cum_seq_k on q's device", kRuntime,
     "Expected all tensors to be on the same device, but got cum_seq_k is on cpu, different from other tensors on "
     "cuda:0 (when checking argument in method wrapper_CUDA___flash_attention_forward)",
     kTorchDispatch},
    {C::q_dtype, S::both, "q_dtype == at::kHalf || q_dtype == at::kBFloat16", kRuntime,
     "FlashAttention only support fp16 and bf16 data type", kTorch},
    {C::k_dtype, S::both, "k.dtype() == q_dtype", kRuntime, "query and key must have the same dtype", kTorch},
    {C::v_dtype, S::both, "v.dtype() == q_dtype", kRuntime, "query and value must have the same dtype", kTorch},
    {C::cu_seqlens_q_dtype, S::varlen, "cu_seqlens_q.dtype() == at::kInt", kRuntime, "cu_seqlens_q must have dtype int32",
     kTorch},
    {C::cu_seqlens_k_dtype, S::varlen, "cu_seqlens_k.dtype() == at::kInt", kRuntime, "cu_seqlens_k must have dtype int32",
     kTorch},
    {C::batch_size_positive, S::both, "batch_size > 0", kRuntime, "batch size must be positive", kTorch},
    {C::head_dim_max, S::both, "head_size_og <= 256", kRuntime,
     "FlashAttention forward only supports head dimension at most 256", kTorch},
    {C::heads_divide, S::both, "num_heads % num_heads_k == 0", kRuntime,
     "Number of heads in key/value must divide number of heads in query", kTorch},
    {C::head_dim_aligned, S::both, "head_size_og % 8 == 0", kRuntime,
     "head_size must be a multiple of 8, this is ensured by padding!", kTorch},
    {C::cu_seqlens_q_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_q, batch_size + 1)", kRuntime,
     "cu_seqlens_q must have shape (batch_size + 1)", kTorch},
    {C::cu_seqlens_k_shape, S::varlen, "CHECK_SHAPE(cu_seqlens_k, batch_size + 1)", kRuntime,
     "cu_seqlens_k must have shape (batch_size + 1)", kTorch},
};

const std::array<HostCheckTable, 6> kTables = {{
    {"fa1", kFa1, kFa1Entries},
    {"fa2", "v2.6.3 csrc/flash_attn/flash_api.cpp (same order v2.0.0 - v2.8.3)", kFa2Entries},
    {"fa3", kFa3, kFa3Entries},
    {"fa4", kFa4, kFa4Entries},
    {"fa4-fp8", kFa4Fp8, kFa4Fp8Entries},
    {"torch-varlen", "torch 2.11.0 torch.nn.attention.varlen.varlen_attn -> aten::_flash_attention_forward (2.10.0: same path)",
     kTorchEntries},
}};

}  // namespace

std::string_view HostCheckEntry::raised() const {
  // "type: message", kept for the program's lifetime (a deque never moves its elements)
  static std::mutex mutex;
  static std::deque<std::pair<const HostCheckEntry*, std::string>> texts;
  std::lock_guard lock(mutex);
  for (const auto& [entry, text] : texts)
    if (entry == this) return text;
  texts.emplace_back(this, std::string(type) + ": " + std::string(message));
  return texts.back().second;
}

const HostCheckEntry* HostCheckTable::find(HostCheck c, HostScope scope) const {
  for (const HostCheckEntry& e : entries)
    if (e.check == c && (e.scope == HostScope::both || scope == HostScope::both || e.scope == scope)) return &e;
  return nullptr;
}

const HostCheckEntry* HostCheckTable::first_of(std::initializer_list<HostCheck> failing, HostScope scope) const {
  for (const HostCheckEntry& e : entries) {
    if (!(e.scope == HostScope::both || scope == HostScope::both || e.scope == scope)) continue;
    for (HostCheck c : failing)
      if (e.check == c) return &e;
  }
  return nullptr;
}

std::string_view HostCheckTable::message(HostCheck c, HostScope scope) const {
  const HostCheckEntry* e = find(c, scope);
  return e ? e->message : std::string_view{};
}

const HostCheckTable& host_checks(std::string_view name) {
  for (const HostCheckTable& t : kTables)
    if (t.name == name) return t;
  throw std::logic_error("no host-check table " + std::string(name));
}

std::span<const HostCheckTable> host_check_tables() { return kTables; }

FlaRotaryTableAssert fla_rotary_table_assert(const std::optional<Version>& fla, bool varlen, int64_t rows,
                                             int64_t max_seqlen, int64_t table_rows) {
  const auto before = [&](const char* release) { return fla && *fla < version_literal(release); };
  FlaRotaryTableAssert a;
  a.T = varlen && before("0.2.0") ? max_seqlen : rows;
  a.makes = !varlen || before("0.6.0");
  a.fails = a.makes && a.T > table_rows;
  if (a.fails)
    a.message = before("0.3.0") ? std::string("TR must be >= T")
                                : "TR must be >= T, got " + std::to_string(table_rows) + " and " + std::to_string(a.T);
  return a;
}

}  // namespace ad
