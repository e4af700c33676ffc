// The wgmma backward's per-step shared-memory tile stores (kernels/sm90a/varlen_attention_bwd_wgmma.cuh)
// take one wavefront per phase and cover their tiles:
// - the dQ tile (WgStep::store_dq, 8-byte stores, 16-lane phases) in both tile layouts: each of
//   a warpgroup's 128 lanes puts each of its column groups once, and the 64 x N tile's floats
//   are each written by exactly one (lane, turn);
// - the dSᵀ tile (WgStep::store_ds, 4-byte stores, one phase a warp): the 8 compute warps write
//   each pair of the [128 keys][64 queries] tile once.
// Host-only: it evaluates the kernels' own address functions (dq_group, dq_pair_at, ds_pair_at,
// the layouts'), no GPU needed. Built and run by tests/check_bwd_smem_stores.py; exit status 1
// naming each failure.
#include <cuda_bf16.h>

#include <cstdio>
#include <set>
#include <vector>

#include "sm90a/varlen_attention_bwd_wgmma.cuh"

namespace {

using ad::kern::bwd::DqChunks;
using ad::kern::bwd::DqSw128;
using ad::kern::bwd::WgStep;

int failures = 0;

// Shared memory has 32 banks of 4 bytes; a phase takes as many wavefronts as the most distinct
// 4-byte words one bank is asked for.
int wavefronts(const std::vector<int>& words) {
  std::set<int> per_bank[32];
  for (int w : words) per_bank[w % 32].insert(w);
  size_t most = 0;
  for (const auto& b : per_bank) most = b.size() > most ? b.size() : most;
  return int(most);
}

// What one tile's stores did: how often each element was written, the most wavefronts a phase
// took; report() fails unless every element was written once and every phase took one.
struct Stores {
  std::vector<int> written;
  int worst = 0;
  explicit Stores(int elements) : written(elements, 0) {}
  void pair(int at) {
    ++written[at];
    ++written[at + 1];
  }
  void phase(const std::vector<int>& words) {
    const int w = wavefronts(words);
    worst = w > worst ? w : worst;
  }
  void report(const char* name, int rows, int cols, const char* elem, const char* phase) {
    int twice = 0, never = 0;
    for (int c : written) twice += c > 1, never += c == 0;
    if (twice || never) {
      std::printf("FAIL %s: %d elements of the tile written more than once, %d never\n", name, twice, never);
      ++failures;
    }
    if (worst != 1) {
      std::printf("FAIL %s: %s takes %d wavefronts (1 holds it)\n", name, phase, worst);
      ++failures;
    }
    std::printf("%s: [%d][%d] %s tile, %d wavefront(s) per %s, every element written once\n", name, rows, cols, elem,
                worst, phase);
  }
};

template <int D>
void check_ds(const char* name) {
  using Step = WgStep<__nv_bfloat16, D>;
  constexpr int BN = Step::BN, BM = Step::BM, KM = Step::KM;
  Stores st(BN * BM);
  for (int warp = 0; warp < 8; ++warp)
    for (int kc = 0; kc < KM; ++kc)
      for (int j = 0; j < 4; ++j) {  // a 4-byte store: the warp's 32 lanes in one phase
        std::vector<int> words;
        for (int lane = 0; lane < 32; ++lane) {
          const int at = Step::ds_pair_at(warp, lane, kc, j);
          if (at < 0 || at + 1 >= BN * BM || at % 2) {
            std::printf("FAIL %s: warp %d lane %d da[%d][%d] at element %d (tile of %d)\n", name, warp, lane, kc, j, at,
                        BN * BM);
            ++failures;
            return;
          }
          words.push_back(at / 2);
          st.pair(at);
        }
        st.phase(words);
      }
  st.report(name, BN, BM, "bf16", "warp's 4-byte store");
}

template <int D, class Layout>
void check(const char* name) {
  using Step = WgStep<__nv_bfloat16, D>;
  constexpr int N = Step::DQN, groups = N / 8;
  Stores st(64 * N);
  for (int warp = 0; warp < 4; ++warp)
    for (int nb = 0; nb < groups; ++nb)
      for (int half = 0; half < 2; ++half)
        for (int phase = 0; phase < 2; ++phase) {  // an 8-byte store: lanes 0-15, then 16-31
          std::vector<int> words;
          for (int lane = 16 * phase; lane < 16 * phase + 16; ++lane) {
            const int at = Step::template dq_pair_at<Layout>(warp, lane, Step::template dq_group<Layout>(lane, nb), half);
            words.push_back(at);
            words.push_back(at + 1);
            if (at < 0 || at + 1 >= 64 * N || at % 2) {
              std::printf("FAIL %s: warp %d lane %d turn %d half %d puts its pair at %d (tile of %d floats)\n", name,
                          warp, lane, nb, half, at, 64 * N);
              ++failures;
              return;
            }
            st.pair(at);
          }
          st.phase(words);
        }
  for (int lane = 0; lane < 32; ++lane) {
    std::set<int> gs;
    for (int nb = 0; nb < groups; ++nb) gs.insert(Step::template dq_group<Layout>(lane, nb));
    if (int(gs.size()) != groups || *gs.begin() != 0 || *gs.rbegin() != groups - 1) {
      std::printf("FAIL %s: lane %d does not store each of its %d column groups once\n", name, lane, groups);
      ++failures;
    }
  }
  st.report(name, 64, N, "fp32", "16-lane phase of an 8-byte store");
}

}  // namespace

int main() {
  check<64, DqChunks<32>>("DqChunks<32> (wgmma kernel, d64)");
  check<128, DqChunks<64>>("DqChunks<64> (wgmma kernel, d128)");
  check<64, DqSw128<32>>("DqSw128<32> (warp-specialised kernel, d64)");
  check<128, DqSw128<64>>("DqSw128<64> (warp-specialised kernel, d128)");
  check_ds<64>("dSᵀ tile (d64)");
  check_ds<128>("dSᵀ tile (d128)");
  return failures ? 1 : 0;
}
