// The record a checked kernel keeps of its out-of-bounds accesses: the first one (in launch
// order, so the report is deterministic whatever the scheduling) with its context, and the
// count of all. The access itself is not performed. Shared by the CPU backend and its CUDA
// twin (which fills the same fields from its device-side record).
#pragma once

#include <array>
#include <cstdint>

#include "exec/plan.hpp"

namespace ad {

enum class AccessKind : uint8_t { read, write };
inline const char* to_string(AccessKind k) { return k == AccessKind::read ? "read" : "write"; }

// Launch-order key: (program/CTA linear index, access number within it).
struct AccessOrder {
  uint64_t block = ~uint64_t{0};
  uint64_t seq = 0;
  bool operator<(const AccessOrder& o) const { return block != o.block ? block < o.block : seq < o.seq; }
};

struct AccessRecord {
  int64_t count = 0;
  bool has_first = false;
  AccessOrder order;
  AccessKind kind = AccessKind::read;
  ExecBuffer buffer = ExecBuffer::q;
  int64_t index = 0;                 // element (or row, see `unit_rows`) index attempted
  int64_t bound = 0;                 // the buffer's size in the same unit
  bool unit_rows = false;            // index/bound count rows (gathers, row loads) not elements
  std::array<int64_t, 3> block{-1, -1, -1};  // (m_block, bidb, bidh) or (program, batch, head)
  int64_t row = -1;                  // packed row (or source position) concerned
  int64_t segment = -1;              // cu_seqlens segment
  int64_t head = -1;

  void note(AccessOrder o, AccessKind k, ExecBuffer b, int64_t idx, int64_t bnd, bool rows,
            std::array<int64_t, 3> blk, int64_t r, int64_t seg, int64_t h, int64_t n = 1) {
    count += n;
    if (has_first && !(o < order)) return;
    has_first = true;
    order = o;
    kind = k;
    buffer = b;
    index = idx;
    bound = bnd;
    unit_rows = rows;
    block = blk;
    row = r;
    segment = seg;
    head = h;
  }
  void merge(const AccessRecord& other) {
    if (!other.has_first) {
      count += other.count;
      return;
    }
    const int64_t n = other.count;
    note(other.order, other.kind, other.buffer, other.index, other.bound, other.unit_rows, other.block, other.row,
         other.segment, other.head, n);
  }
};

}  // namespace ad
