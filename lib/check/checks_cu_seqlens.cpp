// The cu_seqlens / max_seqlen contract of flash_attn_varlen_func (FA2 csrc/flash_attn/
// flash_api.cpp `mha_varlen_fwd`: CHECK_DEVICE, dtype int32, CHECK_SHAPE(cu_seqlens_q,
// batch_size + 1)); the values themselves are never checked by the kernel, which is why
// each value invariant here names what the kernel does instead.
#include <algorithm>

#include "check/static_checks.hpp"

namespace ad::checks {
namespace {

std::string tensor_name(bool q) { return q ? "cu_seqlens_q" : "cu_seqlens_k"; }

}  // namespace

void cu_seqlens(Ctx& ctx) {
  const VarlenArgs* a = ctx.args;
  if (!a || a->path == VarlenPath::dense) return;
  const bool fa2 = true;  // severity of a 0-d tensor max_seqlen: FA2 accepts it (host sync)

  // 15 cu_seqlens.dtype
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (cu.dtype != DType::int32)
      ctx.out.push_back(make_violation("cu_seqlens.dtype", Severity::error,
                                       tensor_name(q) + " has dtype " + to_string(cu.dtype) + "; the kernel requires int32",
                                       {{"tensor", tensor_name(q)}, {"dtype", to_string(cu.dtype)}, {"expected", "int32"}}));
  }
  // 16 cu_seqlens.device
  {
    std::string q_device = ctx.batch.environment.device;
    if (auto* o = ctx.batch.override_for("q"); o && o->device) q_device = *o->device;
    for (bool q : {true, false}) {
      auto* o = ctx.batch.override_for(tensor_name(q));
      if (o && o->device && *o->device != q_device)
        ctx.out.push_back(make_violation("cu_seqlens.device", Severity::error,
                                         tensor_name(q) + " is on " + *o->device + " but q is on " + q_device,
                                         {{"tensor", tensor_name(q)}, {"device", *o->device}, {"q_device", q_device}}));
    }
  }
  // 17 cu_seqlens.shape
  const IntTensor& cq = a->cu_seqlens_q;
  const IntTensor& ck = a->cu_seqlens_k;
  bool shape_ok = true;
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? cq : ck;
    if (cu.rank() != 1 || cu.numel() < 2) {
      shape_ok = false;
      ctx.out.push_back(make_violation(
          "cu_seqlens.shape", Severity::error,
          tensor_name(q) + " has shape " + nlohmann::json(cu.shape).dump() + "; it must be 1-D with batch_size + 1 >= 2 entries",
          {{"tensor", tensor_name(q)}, {"shape", cu.shape}}));
    }
  }
  if (shape_ok && cq.numel() != ck.numel()) {
    shape_ok = false;
    ctx.out.push_back(make_violation("cu_seqlens.shape", Severity::error,
                                     "cu_seqlens_q has " + std::to_string(cq.numel()) + " entries but cu_seqlens_k has " +
                                         std::to_string(ck.numel()) + "; both must be batch_size + 1",
                                     {{"len_q", cq.numel()}, {"len_k", ck.numel()}}));
  }
  if (!shape_ok) return;  // value checks need 1-D tensors

  // 18 cu_seqlens.start, 19 monotonic, 20 total
  for (bool q : {true, false}) {
    const IntTensor& cu = q ? cq : ck;
    if (!q && a->cu_seqlens_k.values == a->cu_seqlens_q.values && a->total_k == a->total_q) break;
    const auto& v = cu.values;
    if (v.front() != 0)
      ctx.out.push_back(make_violation("cu_seqlens.start", Severity::error,
                                       tensor_name(q) + "[0] is " + std::to_string(v.front()) + ", not 0" +
                                           (v.front() < 0 ? " (a negative start becomes a huge unsigned row offset)"
                                                          : " (rows before it are never written)"),
                                       {{"tensor", tensor_name(q)}, {"first", v.front()}}));
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] < v[i - 1]) {
        ctx.out.push_back(make_violation("cu_seqlens.monotonic", Severity::error,
                                         tensor_name(q) + " decreases at segment " + std::to_string(i - 1) + ": " +
                                             std::to_string(v[i - 1]) + " -> " + std::to_string(v[i]),
                                         {{"tensor", tensor_name(q)}, {"segment", i - 1}, {"from", v[i - 1]}, {"to", v[i]}}));
        break;
      }
    int64_t rows = q ? a->total_q : a->total_k;
    if (v.back() != rows)
      ctx.out.push_back(make_violation(
          "cu_seqlens.total", Severity::error,
          tensor_name(q) + "[-1] is " + std::to_string(v.back()) + " but " + (q ? "q" : "k/v") + " has " +
              std::to_string(rows) + " rows" +
              (v.back() > rows ? " (the kernel reads and writes past the tensor)" : " (tail rows are never written)"),
          {{"tensor", tensor_name(q)}, {"last", v.back()}, {"rows", rows}}));
  }

  // 21 max_seqlen.type
  for (bool q : {true, false}) {
    const MaxSeqlen& m = q ? a->max_seqlen_q : a->max_seqlen_k;
    std::string name = q ? "max_seqlen_q" : "max_seqlen_k";
    if (m.value <= 0)
      ctx.out.push_back(make_violation("max_seqlen.type", Severity::error, name + " is " + std::to_string(m.value) + "; it must be > 0",
                                       {{"argument", name}, {"value", m.value}}));
    else if (m.is_tensor)
      ctx.out.push_back(make_violation("max_seqlen.type", fa2 ? Severity::warning : Severity::error,
                                       name + " is a 0-d tensor; FA2 accepts it at the cost of a host sync (graph break under torch.compile)",
                                       {{"argument", name}, {"value", m.value}, {"is_tensor", true}}));
  }
  // 22 max_seqlen.covers
  for (bool q : {true, false}) {
    const auto& v = (q ? cq : ck).values;
    int64_t longest = 0;
    size_t where = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] - v[i - 1] > longest) {
        longest = v[i] - v[i - 1];
        where = i - 1;
      }
    int64_t m = (q ? a->max_seqlen_q : a->max_seqlen_k).value;
    if (m > 0 && longest > m)
      ctx.out.push_back(make_violation(
          "max_seqlen.covers", Severity::error,
          std::string(q ? "max_seqlen_q" : "max_seqlen_k") + " is " + std::to_string(m) + " but segment " +
              std::to_string(where) + " has " + std::to_string(longest) + (q ? " queries" : " keys"),
          {{"argument", q ? "max_seqlen_q" : "max_seqlen_k"}, {"value", m}, {"segment", where}, {"length", longest}}));
  }
}

}  // namespace ad::checks
