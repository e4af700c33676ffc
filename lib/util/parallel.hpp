// A parallel loop over [0, n) on a handful of worker threads: the CPU twins, the references
// and the stage driver (seeded inputs, the cos/sin table) share it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace ad {

// Runs f(item, worker) for item in [0, n) on `threads` workers (dynamic, in chunks of
// `grain`); the calling thread is worker 0.
template <class F>
void parallel_for(int threads, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int workers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), (n + grain - 1) / grain));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  auto body = [&](int w) {
    for (;;) {
      const int64_t b = next.fetch_add(grain);
      if (b >= n) return;
      const int64_t e = std::min(n, b + grain);
      for (int64_t i = b; i < e; ++i) f(i, w);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) pool.emplace_back(body, w);
  body(0);
  for (auto& t : pool) t.join();
}

}  // namespace ad
