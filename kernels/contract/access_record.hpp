// The record a checked stage keeps of the accesses it refused (performed nowhere: the
// out-of-bounds access is counted, never made), one layout for the CPU emulation and the
// CUDA kernels.
//
// Host (the CPU twins): `note()` every refused access with its launch-order key
// (contract/launch_order.hpp); the record keeps the count, the smallest index, and the
// details of the access with the smallest key, so the report is the same whatever the
// thread scheduling. Records of workers combine with `merge()`.
//
// Device (kernels/device_common.cuh record_violation): one record per launch, in device
// memory, reset to an empty record before it. Every refused access adds to `count` and lowers
// `min_index` and `order` atomically; the first arrival (not necessarily the smallest key)
// fills `first`. A kernel that may run twice is relaunched in detail mode (`detail_record`:
// only the access whose key equals `target_order` fills `first`), so both backends name the
// same first access.
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"
#include "contract/launch_order.hpp"
#include "contract/vocabulary.hpp"

namespace ad {

// One access: what it touched and where it came from (-1: does not apply).
struct Access {
  Buffer buffer = Buffer::none;
  AccessKind kind = AccessKind::none;
  Unit unit = Unit::elements;       // what index and bound count
  Region region = Region::tensor;   // the extent it left
  int64_t index = 0;                // attempted element (or row)
  int64_t bound = 0;                // the extent's size in the same unit
  int64_t block[3] = {-1, -1, -1};  // the program: (m block, segment, head), (program, batch, head) or (position, -, -)
  int64_t segment = -1;             // cu_seqlens segment
  int64_t row = -1;                 // packed row (or source position) concerned
  int64_t head = -1;
  int64_t tile = -1;                // attention: the m block (q/out/lse) or key tile (k/v) of the kernel
};

struct AccessRecord {
  uint64_t count = 0;                  // refused accesses
  uint64_t order = order::kNone;       // key of `first` (device, counting: the smallest key seen)
  int64_t min_index = INT64_MAX;       // smallest attempted index
  Access first;                        // see the file comment
  int32_t thread = -1;                 // device: threadIdx.x of `first`
  int32_t detail_mode = 0;             // device: 1 = only the access keyed target_order fills `first`
  uint64_t target_order = order::kNone;

  AD_HD bool has_first() const { return first.kind != AccessKind::none; }

  // Host: `n` refused accesses, the first of them `a` at key `key`.
  void note(uint64_t key, const Access& a, uint64_t n = 1) {
    count += n;
    if (a.index < min_index) min_index = a.index;
    if (has_first() && !(key < order)) return;
    order = key;
    first = a;
  }
  void merge(const AccessRecord& o) {
    if (!o.has_first()) {
      count += o.count;
      return;
    }
    note(o.order, o.first, o.count);
    if (o.min_index < min_index) min_index = o.min_index;
  }
};

// A record set up to collect the details of the access with key `key` (detail mode).
inline AccessRecord detail_record(uint64_t key) {
  AccessRecord r;
  r.detail_mode = 1;
  r.target_order = key;
  return r;
}

}  // namespace ad
