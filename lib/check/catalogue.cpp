// The invariant catalogue: one table, in the order that decides "first"
// (../shared/spec/invariants.md). Statements and "when broken" follow the spec; explanations,
// fixes and references come from the public reports in ../shared/references.md.
#include <algorithm>
#include <stdexcept>

#include "batch/json_node.hpp"
#include "check/check.hpp"

namespace ad {

std::string to_string(InvariantGroup g) {
  switch (g) {
    case InvariantGroup::input: return "input";
    case InvariantGroup::conversion: return "conversion";
    case InvariantGroup::rotary: return "rotary";
    case InvariantGroup::dynamic: return "dynamic";
    case InvariantGroup::launch: return "launch";
  }
  return "?";
}

namespace {

using G = InvariantGroup;

const std::vector<Invariant>& table() {
  static const std::vector<Invariant> t = {
      {1, "input.dtype", G::input, "input", "q/k/v share one dtype the kernel supports (fp16/bf16; fp8 only FA3)",
       "raises \"only support fp16 and bf16\"", "", "", {}, "FlashAttention only support fp16 and bf16 data type"},
      {2, "input.head_dim", G::input, "input", "head_dim within the release's limits (<= 256; multiple of 8 before 2.7 pads in Python)",
       "raises, or pads silently", "", "", {}, "FlashAttention forward only supports head dimension at most 256"},
      {3, "input.gqa", G::input, "input", "num_heads % num_kv_heads == 0", "raises", "", "", {},
       "Number of heads in key/value must divide number of heads in query"},
      {4, "input.feature", G::input, "input",
       "every requested feature exists in the release (softcap >= 2.6.0, window >= 2.3.0) and combinations are allowed (no softcap with dropout)",
       "raises, or transformers silently drops the feature", "", "", {}, ""},
      {5, "input.int32_range", G::input, "input", "every tensor's element count and row offset < 2^31",
       "illegal memory access on 32-bit index paths", "", "", {}, "an illegal memory access was encountered"},
      {6, "mask.rank", G::conversion, "conversion", "the mask reaching the unpad path is 2-D (B, S)",
       "4-D mask: indices enumerate mask entries, cu_seqlens gets rank 3 -> \"index out of bounds\" gather assert or \"cu_seqlens_q must have shape (batch_size + 1)\"",
       "", "", {}, "cu_seqlens_q must have shape (batch_size + 1)"},
      {7, "mask.binary", G::conversion, "conversion", "mask values are 0/1",
       "segment-id masks: sum != number of nonzero -> cu_seqlens total != indices count", "", "", {}, ""},
      {8, "mask.kv_length", G::conversion, "conversion", "mask width == key/value length",
       "indices past B*Lk -> gather assert (the Gemma-2 sliding-window and FLA decoding crashes), or silently wrong keys",
       "", "", {}, "index out of bounds"},
      {9, "mask.padding_side", G::conversion, "conversion",
       "when Lq is not 1 or Lk the mask is left-padded (the mask[:, -Lq:] slice assumes it)", "silently wrong query rows",
       "", "", {}, ""},
      {10, "position_ids.rank", G::conversion, "conversion",
       "position ids reaching packing detection are (B, S) (or (S) with B == 1)",
       "3-D mRoPE ids read as packing -> cu_seqlens = [0, S, 2S, 3S] -> illegal memory access", "", "", {},
       "an illegal memory access was encountered"},
      {11, "position_ids.origin", G::conversion, "conversion",
       "every intended sequence starts at position_origin and boundaries are detected at that value",
       "boundaries missed or invented -> merged or split sequences", "", "", {}, ""},
      {12, "position_ids.consecutive", G::conversion, "conversion",
       "within an intended sequence positions increase by exactly 1; padding does not restart at the origin",
       "each padded 0 opens a length-1 segment (thousands of segments, grid overflow)", "", "", {}, ""},
      {13, "route.packed_to_dense", G::conversion, "conversion",
       "a row holding several intended sequences reaches a path with varlen metadata",
       "silent cross-contamination between packed sequences", "", "", {}, ""},
      {14, "route.partial_kwargs", G::conversion, "conversion",
       "explicit varlen kwargs are given all together and are not overridden by a mask",
       "silent fallback to the dense kernel", "", "", {}, ""},
      {15, "cu_seqlens.dtype", G::conversion, "conversion", "int32", "raises \"cu_seqlens_q must have dtype int32\"", "",
       "", {}, "cu_seqlens_q must have dtype int32"},
      {16, "cu_seqlens.device", G::conversion, "conversion", "on the same device as q",
       "raises (PyTorch device check) or, across GPUs, illegal memory access", "", "", {}, "cu_seqlens_q must be on CUDA"},
      {17, "cu_seqlens.shape", G::conversion, "conversion", "1-D, length N + 1 >= 2, and q and k have the same N",
       "raises \"cu_seqlens_q must have shape (batch_size + 1)\"", "", "", {},
       "cu_seqlens_q must have shape (batch_size + 1)"},
      {18, "cu_seqlens.start", G::conversion, "conversion", "cu[0] == 0",
       "negative start -> huge offset -> illegal memory access; positive start -> leading rows never written", "", "",
       {}, "an illegal memory access was encountered"},
      {19, "cu_seqlens.monotonic", G::conversion, "conversion", "non-decreasing",
       "negative lengths: rows left unwritten (garbage), overlapping segments written twice", "", "", {}, ""},
      {20, "cu_seqlens.total", G::conversion, "conversion", "cu_q[-1] == rows of q and cu_k[-1] == rows of k/v",
       "overshoot: reads/writes past the tensors (illegal memory access or corruption of neighbours); undershoot: tail rows uninitialised, NaN gradients",
       "", "", {}, "an illegal memory access was encountered"},
      {21, "max_seqlen.type", G::conversion, "conversion", "max_seqlen is a host integer > 0",
       "0-d tensor: host sync, compile graph break, FA4 DSL error", "", "", {}, ""},
      {22, "max_seqlen.covers", G::conversion, "conversion",
       "max_seqlen_q >= every q segment length and max_seqlen_k >= every k segment length",
       "q: rows past it never computed (silent garbage); k: keys dropped in split-KV/paged/backward", "", "", {}, ""},
      {23, "max_seqlen.single_query", G::conversion, "conversion",
       "if max_seqlen_q == 1 and H > Hk, every segment has exactly one query",
       "reshape error, or tokens silently assigned to the wrong sequence", "", "", {}, "shape '[3, 3, 3, 64]' is invalid"},
      {24, "cu_seqlens.segments", G::conversion, "conversion",
       "the segments are exactly the intended sequences (none merged, none split, none shifted)",
       "silent cross-contamination or truncated context", "", "", {}, ""},
      {25, "cu_seqlens.grid", G::conversion, "conversion", "the launch grid the segment count implies fits the kernel's grid limits",
       "\"invalid argument\" launch failure", "", "", {}, "Triton Error [CUDA]: invalid argument"},
      {26, "indices.range", G::conversion, "conversion", "every unpad index lies in [0, rows) of the tensor it gathers from",
       "\"index out of bounds\" device assert in the gather", "", "", {}, "index out of bounds"},
      {27, "indices.count", G::conversion, "conversion", "number of unpad indices == cu_seqlens[-1]",
       "packed tensor and cu_seqlens disagree -> overrun or unwritten rows", "", "", {}, ""},
      {28, "rotary.dim", G::rotary, "rotary",
       "rotary dim <= head_dim (the value passed is the per-head width, not the model width)",
       "reads/writes past each head -> illegal memory access at the tensor end, silent cross-head corruption elsewhere",
       "", "", {}, "an illegal memory access was encountered"},
      {29, "rotary.even", G::rotary, "rotary", "rotary dim is even (multiple of 16 where the fused kv-cache path requires it)",
       "reads past the head", "", "", {}, ""},
      {30, "rotary.layout", G::rotary, "rotary",
       "the tensor layout is one the kernel supports; with cu_seqlens the batch dimension is 1",
       "wrong strides -> illegal memory access", "", "", {}, ""},
      {31, "rotary.table", G::rotary, "rotary",
       "the cos/sin table covers every position used (max position + 1 rows, in varlen the packed length for FLA)",
       "positions past the table silently left unrotated, or out-of-bounds table reads", "", "", {}, "TR must be >= T"},
      {32, "rotary.positions", G::rotary, "rotary",
       "in packed input each sequence's positions restart (cu_seqlens or per-sequence offsets reach the rotary kernel)",
       "silently wrong rotation for every sequence but the first", "", "", {}, ""},
      {33, "unpad.gather", G::dynamic, "unpad", "every gather index in bounds",
       "first offending index, its bound, the thread that read it", "", "", {}, "index out of bounds"},
      {34, "rotary.access", G::dynamic, "rotary", "every rotary read/write within its head and tensor",
       "first offending element", "", "", {}, "an illegal memory access was encountered"},
      {35, "attention.access", G::dynamic, "attention", "every q/k/v/out/lse access within its tensor",
       "first offending row, segment, tile", "", "", {}, "an illegal memory access was encountered"},
      {36, "attention.coverage", G::dynamic, "attention",
       "every output row of every segment written exactly once; nothing outside them written",
       "rows left unwritten (poison survives) or written twice", "", "", {}, ""},
      {37, "pad.scatter", G::dynamic, "pad", "every scatter index in bounds", "first offending index", "", "", {}, ""},
      {38, "result.finite", G::dynamic, "result",
       "outputs contain no NaN/Inf (except the defined +inf LSE of an empty row)", "first non-finite element", "", "", {},
       ""},
      {39, "result.reference", G::dynamic, "result",
       "output equals attention computed directly over the intended sequences, within tolerance",
       "worst row, its error, the sequence it belongs to", "", "", {}, ""},
      {40, "launch.autotune_keys", G::launch, "launch",
       "every autotune key names a kernel parameter that has a value when the key is built; with Triton <= 3.1 keys are looked up by position among the valued parameters",
       "IndexError: list index out of range in the autotuner, or a wrong cache key", "", "", {},
       "IndexError: list index out of range"},
  };
  return t;
}

}  // namespace

std::span<const Invariant> catalogue() { return table(); }

const Invariant* find_invariant(std::string_view id) {
  for (const auto& inv : table())
    if (inv.id == id) return &inv;
  return nullptr;
}

std::string closest_invariant_id(std::string_view id) {
  size_t best = static_cast<size_t>(-1);
  std::string out;
  for (const auto& inv : table()) {
    // distance to the whole id, or to its part after the dot (users type "kv_length")
    std::string_view tail = inv.id.substr(inv.id.find('.') + 1);
    size_t d = std::min(edit_distance(id, inv.id), edit_distance(id, tail));
    if (d < best) {
      best = d;
      out = std::string(inv.id);
    }
  }
  return out;
}

Violation make_violation(std::string_view id, Severity severity, std::string message, nlohmann::json evidence) {
  const Invariant* inv = find_invariant(id);
  if (!inv) throw std::logic_error("unknown invariant id: " + std::string(id));
  Violation v;
  v.id = std::string(inv->id);
  v.stage = std::string(inv->stage);
  v.severity = severity;
  v.message = std::move(message);
  v.evidence = std::move(evidence);
  v.explanation = std::string(inv->explanation.empty() ? inv->when_broken : inv->explanation);
  v.fix = std::string(inv->fix);
  for (auto r : inv->references) v.references.emplace_back(r);
  v.order = inv->number;
  return v;
}

}  // namespace ad
