// attn_doctor.ops: what the host reads of one checked launch (python/native.cpp), and the small
// kernel that writes it (python/ops_readout.cu).
//
// A slot lives in pinned, mapped host memory. The readout kernel runs on the caller's stream
// right after the checked launch(es): it folds the launch's row-write counters into four
// numbers per counter set, copies the launch's AccessRecord (device memory) into the slot,
// resets the device record to an empty one for the slot's next launch, makes all of it visible
// (a system-scope fence), then sets `state`. The host learns that a slot landed by reading
// `state`: no event, no synchronisation.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "contract/access_record.hpp"

namespace ad::ops {

constexpr int32_t kSlotPending = -2;  // written by the host before the launch
constexpr int32_t kSlotLanded = 1;    // written by the readout kernel, after everything else

// One counter set's summary: rows no launch wrote, the first of them, rows written more than
// once (by more than one segment), the first of them; first = -1 when there is none.
struct RowSummary {
  int64_t unwritten = 0, first_unwritten = -1, overwritten = 0, first_overwritten = -1;
};

struct Slot {
  AccessRecord access;
  RowSummary rows[2];  // forward: output rows; backward: dq rows, dk/dv rows
  int32_t state = kSlotPending;
  int32_t reserved = 0;
};

// Enqueues the readout of `record` on `stream`: counters0 / counters1 (uint32 per row, or
// null) are summarised into slot->rows, the record copied into slot->access, slot->state set
// to kSlotLanded, and the record reset to `empty`. `slot` is the device address of a mapped
// host slot. Returns the launch's error (cudaSuccess when it was enqueued).
cudaError_t launch_readout(AccessRecord* record, const uint32_t* counters0, int64_t rows0, const uint32_t* counters1,
                           int64_t rows1, Slot* slot, const AccessRecord& empty, cudaStream_t stream);

}  // namespace ad::ops
