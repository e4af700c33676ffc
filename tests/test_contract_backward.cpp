// The backward contract (kernels/contract/fa2_backward.hpp): FA2's varlen backward rules per
// release, each case the release and file it reproduces. The CUDA backward kernels compile
// the same header, so these pin what they run too.
#include <catch2/catch.hpp>

#include "contract/fa2_backward.hpp"

using namespace ad;
using namespace ad::fa2;

TEST_CASE("backward contract: release rules (flash_api.cpp mha_varlen_bwd, flash_bwd_kernel.h)", "[contract][backward]") {
  CHECK(bwd::release_rules(2, 5, 8).lse == LseLayout::padded);
  CHECK(bwd::release_rules(2, 6, 0).lse == LseLayout::unpadded);
  CHECK(bwd::release_rules(2, 7, 4).dq_offset == bwd::DqOffset::int32_sum);
  CHECK(bwd::release_rules(2, 8, 0).dq_offset == bwd::DqOffset::int32_start);  // PR#1500: 128ll * bidb
  CHECK(bwd::release_rules(2, 8, 3).dq_offset == bwd::DqOffset::int32_start);  // #2260 is not in 2.8.3
  CHECK(bwd::release_rules(2, 8, 4).dq_offset == bwd::DqOffset::int64);
  // head_size_rounded: round 32 until 2.6.1; <= 192 ? round 32 : 256 in 2.6.2 - 2.7.4; 32 / 64 from 2.8.0
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 5, 0), 200) == 224);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 6, 3), 200) == 256);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 6, 3), 160) == 160);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 8, 3), 160) == 192);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 8, 3), 136) == 192);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 8, 3), 100) == 128);
  CHECK(bwd::head_dim_rounded(bwd::release_rules(2, 8, 3), 60) == 64);  // padded to 64 (multiple of 8), then 64
}

TEST_CASE("backward contract: tiles per head dim (run_mha_bwd_hdim*)", "[contract][backward]") {
  const bwd::Release r = bwd::release_rules(2, 6, 3);
  CHECK(bwd::tile_for(r, 32).block_m == 128);
  CHECK(bwd::tile_for(r, 64).block_n == 128);
  CHECK(bwd::tile_for(r, 96).block_m == 64);
  CHECK(bwd::tile_for(r, 128).block_m == 64);
  CHECK(bwd::tile_for(r, 128).block_n == 128);
  CHECK(bwd::tile_for(r, 160).block_n == 64);
  CHECK(bwd::tile_for(r, 256).block_m == 64);
  CHECK(bwd::tile_for(r, 256).block_n == 64);
}

TEST_CASE("backward contract: host adjustments and grids", "[contract][backward]") {
  const bwd::Release r = bwd::release_rules(2, 6, 3);
  // causal is kept for max_seqlen_q == 1 (unlike the forward), window_right = 0
  bwd::Normalized n = bwd::normalize(r, {.max_seqlen_q = 1, .max_seqlen_k = 300, .num_heads = 8, .num_heads_k = 2,
                                         .head_dim = 128, .num_segments = 3, .causal = true});
  CHECK(n.flags.causal);
  CHECK_FALSE(n.flags.local);
  CHECK(n.ngroups == 4);
  CHECK(n.grid_m == 1);
  CHECK(n.n_blocks == 3);  // ceil(300 / 128)
  CHECK(n.grid_x == 3);
  CHECK(n.nsplits == 1);
  // a window at least max_seqlen_k wide is dropped; a one-sided window gets max_seqlen_k
  n = bwd::normalize(r, {.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .head_dim = 64,
                         .num_segments = 1, .window_left = 10, .window_right = 0});
  CHECK(n.flags.causal);
  n = bwd::normalize(r, {.max_seqlen_q = 10, .max_seqlen_k = 10, .num_heads = 1, .num_heads_k = 1, .head_dim = 64,
                         .num_segments = 1, .window_left = 3, .window_right = -1});
  CHECK(n.flags.local);
  CHECK(n.flags.window_right == 10);
  // deterministic: nsplits = ceil(num_sm / (N x H)) CTAs along x
  n = bwd::normalize(r, {.max_seqlen_q = 10, .max_seqlen_k = 1000, .num_heads = 4, .num_heads_k = 4, .head_dim = 64,
                         .num_segments = 5, .deterministic = true, .arch = GpuArch::sm90});
  CHECK(n.nsplits == 7);  // ceil(132 / 20)
  CHECK(n.grid_x == 7);
  CHECK(bwd::split_of(9, n) == 2);
  // max_seqlen_q == 0: no launch
  CHECK_FALSE(bwd::normalize(r, {.max_seqlen_q = 0, .max_seqlen_k = 5, .num_heads = 1, .num_heads_k = 1,
                                 .head_dim = 64, .num_segments = 1})
                  .launches);
}

TEST_CASE("backward contract: the m blocks of a key block (compute_dq_dk_dv_1colblock)", "[contract][backward]") {
  const Flags dense{false, false, -1, -1, 64, 128};
  bwd::KeyBlockRange k = bwd::key_block_range(0, 200, 300, dense);
  REQUIRE_FALSE(k.exits);
  CHECK(k.m_min == 0);
  CHECK(k.m_max == 4);  // ceil(200 / 64)
  CHECK(k.key_end == 128);
  CHECK(bwd::key_block_range(3, 200, 300, dense).exits);  // 384 >= 300
  CHECK(bwd::key_block_range(2, 200, 300, dense).key_end == 300);
  // causal, bottom-right: key block n starts at m_min = (n kBlockN + len_q - len_k) / kBlockM
  const Flags causal{true, false, -1, 0, 64, 128};
  CHECK(bwd::key_block_range(1, 300, 300, causal).m_min == 2);
  CHECK(bwd::key_block_range(0, 300, 300, causal).m_min == 0);
  // len_q < len_k: the early key blocks see every query row; m_min clamps at 0
  CHECK(bwd::key_block_range(0, 10, 300, causal).m_min == 0);
  // len_q > len_k, causal: the first rows see no key, so m_min skips them
  const Flags causal_small{true, false, -1, 0, 64, 64};
  bwd::KeyBlockRange e = bwd::key_block_range(0, 200, 64, causal_small);
  CHECK(e.m_min == 2);  // (0 + 200 - 64) / 64
  CHECK(e.m_max == 4);
  CHECK_FALSE(e.empty);
  // a sliding window limits m_max from the left window
  const Flags local{false, true, 16, 0, 64, 128};
  bwd::KeyBlockRange w = bwd::key_block_range(0, 1000, 1000, local);
  CHECK(w.m_max == 3);  // ceil((128 + 16) / 64)
  CHECK(w.m_min == 0);
  bwd::KeyBlockRange w2 = bwd::key_block_range(4, 1000, 1000, local);
  CHECK(w2.m_min == 8);  // 512 / 64
  CHECK(w2.m_max == 11);  // ceil((640 + 16) / 64)
  // an empty m range (a window that misses every query row): zeros, no q block
  const Flags right_only{false, true, 0, 0, 64, 64};
  CHECK(bwd::key_block_range(3, 64, 1000, right_only).empty);
}

TEST_CASE("backward contract: dq_accum offsets per release (block_info.h q_offset, PR#1500, PR#2260)",
          "[contract][backward]") {
  // H x d_rounded = 16 x 128 = 2048 elements per row: the start term wraps from row 2^20
  const bwd::DqAccumShape a{.total_q = (int64_t{1} << 20) + 4096, .num_segments = 2, .num_heads = 16, .d_rounded = 128,
                            .nsplits = 1};
  CHECK(bwd::first_wrapping_row(a) == (int64_t{1} << 20));
  const int32_t late = (1 << 20) + 64;  // segment 1 starts past the wrap
  const int64_t want = bwd::dq_accum_offset_intended(a, late, 1, 3, 2, 64, 0);
  CHECK(want == (int64_t(late) + 2 * 64 + 128) * 2048 + 3 * 128);
  // 2.8.x: the start term wraps to a negative int, the tile term is 64-bit
  const int64_t v28 = bwd::dq_accum_offset(bwd::DqOffset::int32_start, bwd::DqKernel::per_tile, a, late, 1, 3, 2, 2, 64, 0);
  CHECK(v28 == want - (int64_t{1} << 32));
  CHECK(v28 < 0);
  // main kernel steps back from m_max - 1: same offset in 2.8.x
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_start, bwd::DqKernel::dq_dk_dv, a, late, 1, 3, 2, 5, 64, 0) == v28);
  // PR#2260: intended
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int64, bwd::DqKernel::dq_dk_dv, a, late, 1, 3, 2, 5, 64, 0) == want);
  // before the wrap every rule agrees
  const int64_t early = bwd::dq_accum_offset_intended(a, 0, 0, 3, 2, 64, 0);
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_sum, bwd::DqKernel::per_tile, a, 0, 0, 3, 2, 2, 64, 0) == early);
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_start, bwd::DqKernel::per_tile, a, 0, 0, 3, 2, 2, 64, 0) == early);
  // before 2.8.0 a long first segment wraps through the tile term alone (PR#1500)
  const int64_t m_far = (int64_t{1} << 20) / 64 + 1;  // row tile past 2^31 / 2048
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_sum, bwd::DqKernel::per_tile, a, 0, 0, 0, m_far, m_far, 64, 0) < 0);
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_start, bwd::DqKernel::per_tile, a, 0, 0, 0, m_far, m_far, 64, 0) ==
        bwd::dq_accum_offset_intended(a, 0, 0, 0, m_far, 64, 0));
  // ... and there dq_dk_dv (stepping back from the wrapped top) disagrees with convert_dQ
  const int64_t main_low = bwd::dq_accum_offset(bwd::DqOffset::int32_sum, bwd::DqKernel::dq_dk_dv, a, 0, 0, 0, 0, m_far, 64, 0);
  CHECK(main_low != bwd::dq_accum_offset(bwd::DqOffset::int32_sum, bwd::DqKernel::per_tile, a, 0, 0, 0, 0, 0, 64, 0));
  // deterministic splits add a 64-bit term in every release
  const bwd::DqAccumShape s{.total_q = 100, .num_segments = 1, .num_heads = 2, .d_rounded = 64, .nsplits = 3};
  CHECK(bwd::dq_accum_offset(bwd::DqOffset::int32_sum, bwd::DqKernel::per_tile, s, 0, 0, 1, 0, 0, 64, 2) ==
        2 * s.split_stride() + 64);
  CHECK(s.elements() == 3 * (100 + 128) * 128);
}

TEST_CASE("backward contract: softmax_d layout (flash_bwd_preprocess_kernel.h)", "[contract][backward]") {
  const bwd::SoftmaxDShape u{.layout = LseLayout::unpadded, .total_q = 300, .num_segments = 2, .num_heads = 4,
                             .max_seqlen_q = 200};
  CHECK(u.elements() == 4 * (300 + 256));
  CHECK(bwd::softmax_d_index(u, 100, 1, 2, 5) == 2 * 556 + 100 + 128 + 5);
  const bwd::SoftmaxDShape pd{.layout = LseLayout::padded, .total_q = 300, .num_segments = 2, .num_heads = 4,
                              .max_seqlen_q = 200};
  CHECK(pd.seqlen_q_rounded() == 256);
  CHECK(pd.elements() == 2 * 4 * 256);
  CHECK(bwd::softmax_d_index(pd, 100, 1, 2, 5) == (1 * 4 + 2) * 256 + 5);
  // head 2 owns [1112, 1668): a segment starting at row 100 (b = 1) that runs past the 300
  // rows reaches head 3's part from its row 328 on
  CHECK(bwd::softmax_d_in_head(u, 2, bwd::softmax_d_index(u, 100, 1, 2, 327)));
  CHECK_FALSE(bwd::softmax_d_in_head(u, 2, bwd::softmax_d_index(u, 100, 1, 2, 328)));
  CHECK(bwd::softmax_d_index(u, 100, 1, 2, 328) == bwd::softmax_d_index(u, 0, 0, 3, 0));
  CHECK_FALSE(bwd::softmax_d_in_head(u, 2, 1111));
  CHECK(bwd::softmax_d_in_head(pd, 2, 0));  // padded: a segment never leaves its stride
}

TEST_CASE("backward contract: the score derivative with softcap", "[contract][backward]") {
  CHECK(bwd::dscore(3.0, 0.125, 0.0) == 0.125);
  const double t = std::tanh(3.0 * 0.125 / 30.0);
  CHECK(bwd::dscore(3.0, 0.125, 30.0) == Approx(0.125 * (1 - t * t)));
  CHECK(bwd::q_tile(2, 100, 64).exits);
  CHECK(bwd::q_tile(1, 100, 64).row_end == 100);
  CHECK(bwd::kv_head(7, 4) == 1);
}
