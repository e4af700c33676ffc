// The device violation record: where a checked kernel writes the access it refused.
//
// One record per launch, zeroed before it (`empty_record()`), read back after the launch's
// synchronisation. Every refused access bumps `count`, lowers `min_index` and lowers
// `min_order`, its launch-order key (CTA linear index, then the access within the CTA: the
// order the CPU twin uses, exec/access.hpp), and the first violating thread (an atomic
// counter decides) fills the detail fields. Because arrival order on a GPU is not launch
// order, the backend can relaunch an idempotent kernel in detail mode (`target_order` =
// the first run's `min_order`): then only the access with that key writes the details, and
// the report names the same first access on every run and on both backends. Plain C++
// layout shared by host and device.
#pragma once

#include <cstdint>
#include <limits>

namespace ad::kern {

// The buffer an access belonged to.
enum class Buffer : int32_t {
  none = 0,
  q, k, v, out, lse, row_writes,     // attention
  gather_src, gather_dst,            // unpad (index_first_axis)
  scatter_src, scatter_dst,          // pad (pad_input)
  rotary_x, rotary_head,             // rotary: the tensor, and the head the row belongs to
  rotary_table,
};

enum class Access : int32_t { read = 1, write = 2 };

inline const char* to_string(Buffer b) {
  switch (b) {
    case Buffer::q: return "q";
    case Buffer::k: return "k";
    case Buffer::v: return "v";
    case Buffer::out: return "out";
    case Buffer::lse: return "softmax_lse";
    case Buffer::row_writes: return "row_writes";
    case Buffer::gather_src: return "gather source";
    case Buffer::gather_dst: return "gather destination";
    case Buffer::scatter_src: return "scatter source";
    case Buffer::scatter_dst: return "scatter destination";
    case Buffer::rotary_x: return "rotary tensor";
    case Buffer::rotary_head: return "rotary head";
    case Buffer::rotary_table: return "rotary cos/sin table";
    default: return "none";
  }
}
inline const char* to_string(Access a) { return a == Access::write ? "write" : "read"; }

struct ViolationRecord {
  uint32_t count;          // violating accesses observed (each refused)
  int32_t buffer;          // Buffer of the first one
  int32_t access;          // Access of the first one
  int32_t thread;          // threadIdx.x of the first one
  int32_t block[3];        // blockIdx of the first one
  int32_t pad_;
  int64_t index;           // offending index (row or element, see the kernel)
  int64_t bound;           // the buffer's size in the same unit
  int64_t min_index;       // smallest offending index over all violations
  // Context of the first one (-1 where it does not apply).
  int64_t segment;         // batch entry b
  int64_t row;             // row within the segment (query or key row)
  int64_t head;            // head
  int64_t tile;            // m tile (attention), key tile, or column
  uint64_t min_order;      // smallest launch-order key over all violations
  uint64_t target_order;   // detail mode: the key whose access fills the details
  int32_t detail_mode;     // 0: count + first arrival fills details; 1: only target_order
  int32_t pad2_;
};

inline ViolationRecord empty_record() {
  ViolationRecord r{};
  r.min_index = std::numeric_limits<int64_t>::max();
  r.min_order = std::numeric_limits<uint64_t>::max();
  r.segment = r.row = r.head = r.tile = -1;
  return r;
}
// The same record set up to collect the details of the access with key `order`.
inline ViolationRecord detail_record(uint64_t order) {
  ViolationRecord r = empty_record();
  r.detail_mode = 1;
  r.target_order = order;
  return r;
}

}  // namespace ad::kern
