// The intended sequences: the ground truth for semantic checks (batch-format.md `intent`).
//
// Derivation when the batch file gives none, in this order:
//  1. a 2-D mask (for a 4-D mask, the 2-D mask it was built from): each maximal run of equal
//     non-zero values in a row is one sequence (docs/spec/batch-format.md). When
//     position ids of the same (B, S) shape are present too, a run is further split where the
//     position ids restart (a position that is not the previous one plus one), so a packed
//     row with an all-ones mask still yields its packed sequences.
//  2. position ids: per row, a sequence starts at `position_origin` or wherever the position
//     does not increase by one (for 3-D mRoPE ids, the first axis). Intent is in key/value
//     coordinates (a row has Lk tokens): when the position ids cover only the Lq < Lk newest
//     tokens (decode, chunked prefill), a run whose first query sits at key slot Lk - Lq + j
//     with position p began p - position_origin slots earlier (clamped to the row start).
//  3. explicit cu_seqlens_q: one sequence per segment of positive length, in row 0.
#include <algorithm>
#include <string>

#include "batch/batch.hpp"

namespace ad {

namespace {

// Position ids as (rows, width) rows that line up with a (B, S) grid, or nullptr.
const int64_t* aligned_positions(const PositionIds& p, int64_t B, int64_t S) {
  const IntTensor& t = p.tensor;
  if (t.dim(-1) != S) return nullptr;
  if (t.rank() == 1) return B == 1 ? t.values.data() : nullptr;
  if (t.rank() == 2) return t.dim(0) == B ? t.values.data() : nullptr;
  if (t.rank() == 3) return t.dim(1) == B ? t.values.data() : nullptr;  // first (temporal) axis
  return nullptr;
}

bool restarts(const int64_t* pos, int64_t c, int64_t origin) {
  return pos[c] == origin || pos[c] != pos[c - 1] + 1;
}

}  // namespace

Intent derive_intent(const Batch& batch) {
  Intent in;
  const int64_t origin = batch.model.position_origin;
  if (batch.batch && batch.batch->attention_mask) {
    const Mask& m = *batch.batch->attention_mask;
    const IntTensor& t = m.from ? *m.from : m.tensor;
    if (t.rank() == 2 || t.rank() == 1) {
      int64_t B = t.rank() == 2 ? t.dim(0) : 1, S = t.dim(-1);
      const int64_t* pos = batch.batch->position_ids ? aligned_positions(*batch.batch->position_ids, B, S) : nullptr;
      in.source = IntentSource::mask;
      for (int64_t r = 0; r < B; ++r) {
        const int64_t* row = t.values.data() + r * S;
        const int64_t* prow = pos ? pos + r * S : nullptr;
        int64_t c = 0;
        while (c < S) {
          if (row[c] == 0) {
            ++c;
            continue;
          }
          int64_t start = c++;
          while (c < S && row[c] == row[start] && !(prow && restarts(prow, c, origin))) ++c;
          in.sequences.push_back({r, start, c - start});
        }
      }
      return in;
    }
  }
  if (batch.batch && batch.batch->position_ids) {
    const IntTensor& t = batch.batch->position_ids->tensor;
    int64_t S = t.dim(-1);
    int64_t B = t.rank() == 1 ? 1 : t.dim(-2);
    in.source = IntentSource::position_ids;
    const int64_t Lk = batch.batch->kv_length;
    const int64_t shift = Lk > S ? Lk - S : 0;  // key slot of the first query slot
    // counted first: up to one sequence per token (2^25 of them), so the list is allocated
    // once instead of grown by doubling (which briefly holds one and a half copies)
    size_t count = 0;
    for (int64_t r = 0; r < B; ++r) {
      const int64_t* row = t.values.data() + r * S;
      for (int64_t c = 1; c <= S; ++c) count += c == S || restarts(row, c, origin);
    }
    in.sequences.reserve(count);
    for (int64_t r = 0; r < B; ++r) {
      const int64_t* row = t.values.data() + r * S;  // rank 3: first axis
      int64_t start = 0;
      for (int64_t c = 1; c <= S; ++c) {
        if (c == S || restarts(row, c, origin)) {
          int64_t begin = shift + start, end = shift + c;
          if (shift > 0) begin = std::max<int64_t>(0, begin - std::max<int64_t>(0, row[start] - origin));
          in.sequences.push_back({r, begin, end - begin});
          start = c;
        }
      }
    }
    return in;
  }
  if (batch.varlen && batch.varlen->cu_seqlens_q.rank() == 1) {
    const auto& cu = batch.varlen->cu_seqlens_q.values;
    in.source = IntentSource::cu_seqlens_q;
    // FA3 / FA4 compute only the first seqused_q[b] rows of a segment: a caller that passes it
    // means those rows (the rest is padding); a count outside [0, length] keeps the segment
    const std::optional<std::vector<int64_t>>& used = batch.varlen->seqused_q;
    auto family = [&] {
      if (batch.varlen->api) return flash_attn_family(*batch.varlen->api);
      const std::optional<Version> fa = kernel_release(batch);
      return fa && !fa->release.empty() ? static_cast<int>(fa->release.front()) : 2;
    };
    const bool takes_used = used && used->size() + 1 == cu.size() && family() >= 3;
    for (size_t i = 1; i < cu.size(); ++i) {
      if (!(cu[i] > cu[i - 1] && cu[i - 1] >= 0)) continue;
      int64_t length = cu[i] - cu[i - 1];
      if (takes_used && (*used)[i - 1] >= 0 && (*used)[i - 1] <= length) length = (*used)[i - 1];
      if (length > 0) in.sequences.push_back({0, cu[i - 1], length});
    }
    return in;
  }
  return in;
}

// A given intent must fit the rows it talks about: row < B, start + length <= row width.
void validate_intent(const Batch& batch, const std::string& file, const std::string& path) {
  int64_t rows = 1, width = -1;
  if (batch.batch) {
    rows = batch.batch->batch_size;
    width = batch.batch->kv_length;
    if (batch.batch->attention_mask) {
      const Mask& m = *batch.batch->attention_mask;
      width = (m.from ? *m.from : m.tensor).dim(-1);
    } else if (batch.batch->position_ids) {
      width = std::max(batch.batch->kv_length, batch.batch->position_ids->tensor.dim(-1));
      if (batch.batch->position_ids->tensor.rank() >= 2) rows = batch.batch->position_ids->tensor.dim(-2);
    }
  } else if (batch.varlen) {
    width = batch.varlen->total_q;
  }
  const auto& seqs = batch.intent.sequences;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& s = seqs[i];
    std::string p = path + "/" + std::to_string(i);
    if (s.row >= rows)
      throw InputError(file, p + "/row", "a row below " + std::to_string(rows), std::to_string(s.row));
    if (width >= 0 && s.start + s.length > width)
      throw InputError(file, p, "start + length within the row width " + std::to_string(width),
                       std::to_string(s.start) + " + " + std::to_string(s.length));
  }
}

}  // namespace ad
