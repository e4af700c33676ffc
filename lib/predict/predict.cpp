// The combination rule and the caching-allocator placement model (the outcome vocabulary:
// vocab/outcome.cpp).
#include "predict/predict.hpp"

#include <algorithm>
#include <array>

namespace ad {

namespace {

// Loud outcomes at one moment: a host raise comes before any launch, a device assert stops
// the kernel that trips it, a fault is reported at the next synchronisation.
int loud_rank(Outcome o) {
  switch (o) {
    case Outcome::raises: return 0;
    case Outcome::device_assert: return 1;
    case Outcome::illegal_address: return 2;
    case Outcome::hang: return 3;  // nothing after it happens
    default: return 4;
  }
}

// Silent outcomes, most severe first.
int silent_rank(Outcome o) {
  switch (o) {
    case Outcome::wrong_output: return 0;
    case Outcome::wrong_gradient: return 1;
    case Outcome::out_of_bounds: return 2;
    default: return 3;
  }
}

}  // namespace



Prediction combine(std::span<const Finding> findings, CallPass pass) {
  const Finding* loud = nullptr;
  const Finding* silent = nullptr;
  auto loud_key = [](const Finding& f) {
    return std::make_tuple(static_cast<int>(f.symptom->at), loud_rank(f.symptom->outcome), f.order);
  };
  auto silent_key = [](const Finding& f) { return std::make_tuple(silent_rank(f.symptom->outcome), f.order); };
  for (const Finding& f : findings) {
    if (!f.symptom) continue;
    if (f.symptom->pass == Pass::backward && pass != CallPass::training) continue;
    if (is_loud(f.symptom->outcome)) {
      if (!loud || loud_key(f) < loud_key(*loud)) loud = &f;
    } else if (f.symptom->outcome != Outcome::ok) {
      if (!silent || silent_key(f) < silent_key(*silent)) silent = &f;
    }
  }
  const Finding* chosen = loud ? loud : silent;
  Prediction p;
  if (chosen) {
    p.symptom = *chosen->symptom;
    p.invariant = std::string(chosen->invariant);
    return p;
  }
  p.symptom.outcome = Outcome::ok;
  p.symptom.pass = pass == CallPass::training ? Pass::backward : Pass::forward;
  p.symptom.at = pass == CallPass::training ? Moment::backward : Moment::attention;
  p.symptom.message = pass == CallPass::training ? "no error; every intended output and gradient row is right"
                                                 : "no error; every intended output row is right";
  p.symptom.basis = "model";
  return p;
}

// c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x, default configuration): requests are
// rounded to 512 bytes (round_size); up to 1 MiB they come from 2 MiB segments, below 10 MiB
// from 20 MiB segments, larger ones get a segment of their own rounded to 2 MiB
// (get_allocation_size).
AllocatorPlacement caching_allocator_placement(int64_t bytes) {
  constexpr int64_t kMinBlockSize = 512, kSmallSize = 1 << 20, kSmallBuffer = 2 << 20, kLargeBuffer = 20 << 20,
                    kMinLargeAlloc = 10 << 20, kRoundLarge = 2 << 20;
  AllocatorPlacement p;
  if (bytes < 0) bytes = 0;
  p.block_bytes = bytes < kMinBlockSize ? kMinBlockSize : (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  if (p.block_bytes <= kSmallSize) p.segment_bytes = kSmallBuffer;
  else if (p.block_bytes < kMinLargeAlloc) p.segment_bytes = kLargeBuffer;
  else p.segment_bytes = (p.block_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
  return p;
}

}  // namespace ad
