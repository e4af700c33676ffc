// The execution contract (kernels/contract/): the FA2 and rotary rules, the launch-order key
// and the access record that the CPU emulation and the CUDA kernels both compile. CI has no
// GPU, so these tests are what pins the rules the kernels run: each drift fix against an
// upstream release is one case here, with the release and file it reproduces.
#include <catch2/catch.hpp>

#include "contract/access_record.hpp"
#include "contract/fa2_forward.hpp"
#include "contract/launch_order.hpp"
#include "contract/rotary.hpp"

using namespace ad;

TEST_CASE("contract: FA2 tile sizes per head dim (flash_fwd_launch_template.h)", "[contract]") {
  using fa2::GpuArch;
  CHECK(fa2::tile_for(32, false, GpuArch::sm90).block_m == 128);
  CHECK(fa2::tile_for(64, false, GpuArch::sm90).block_n == 128);
  CHECK(fa2::tile_for(40, false, GpuArch::sm90).head_dim_rounded == 64);
  CHECK(fa2::tile_for(128, false, GpuArch::sm90).block_n == 64);
  CHECK(fa2::tile_for(160, false, GpuArch::sm90).block_n == 32);
  CHECK(fa2::tile_for(256, false, GpuArch::sm90).block_m == 64);
  CHECK(fa2::tile_for(256, false, GpuArch::sm80).block_m == 128);
  CHECK(fa2::tile_for(200, false, GpuArch::sm90).head_dim_rounded == 256);
}

TEST_CASE("contract: FA2 tile exits, bottom-right causal limits and unsigned row offsets", "[contract]") {
  const fa2::Flags causal{true, false, -1, 0, 128, 64};
  // a tile past len_q exits; a negative length computes nothing
  CHECK(fa2::tile_range(1, 128, 10, causal).exits);
  CHECK(fa2::tile_range(0, -5, 10, causal).exits);
  // len_k < len_q: the first rows see no key (the CTA still runs for the later rows)
  fa2::TileRange t = fa2::tile_range(0, 20, 5, causal);
  REQUIRE_FALSE(t.exits);
  CHECK(fa2::key_limits(0, 20, 5, causal, t).hi == fa2::key_limits(0, 20, 5, causal, t).lo);
  CHECK(fa2::key_limits(15, 20, 5, causal, t).hi == 1);  // row 15 sees key 0 only
  CHECK(fa2::key_limits(19, 20, 5, causal, t).hi == 5);
  // every row of a CTA beyond the keys: the CTA writes 0 and +inf without reading keys
  CHECK(fa2::tile_range(0, 300, 10, causal).empty);
  // sliding window (left 3, right 0), inclusive
  const fa2::Flags local{false, true, 3, 0, 128, 64};
  t = fa2::tile_range(0, 10, 10, local);
  const fa2::KeyLimits kl = fa2::key_limits(6, 10, 10, local, t);
  CHECK(kl.lo == 3);
  CHECK(kl.hi == 7);
  // negative starts become huge rows; the int LSE offset wraps back
  CHECK(fa2::row_offset(-5) == 4294967291ll);
  const fa2::LseShape unpadded{fa2::LseLayout::unpadded, 100, 4, 0};
  CHECK(fa2::lse_index(unpadded, false, -5, 0, 0, 0, 0) == -5);
  CHECK(fa2::lse_index(unpadded, false, 10, 1, 2, 2, 3) == 10 + 2 * 100 + 3);
  const fa2::LseShape padded{fa2::LseLayout::padded, 100, 4, 16};
  CHECK(fa2::lse_index(padded, false, 10, 1, 2, 2, 3) == (1 * 4 + 2) * 16 + 3);
  CHECK(fa2::lse_index(unpadded, true, 0, 7, 1, 5, 0) == 5 * 100 + 7);  // swapped: (H, N)
}

// The mask of a key tile the kernels skip must hide nothing: block_needs_mask is false only
// when every row of the tile sees every key of the block.
TEST_CASE("contract: a key block left unmasked hides no key from any of its rows", "[contract]") {
  for (const fa2::Flags& f : {fa2::Flags{true, false, -1, 0, 128, 64}, fa2::Flags{false, true, 40, 7, 128, 64},
                              fa2::Flags{false, false, -1, -1, 128, 64}})
    for (int32_t len_q : {1, 77, 300})
      for (int32_t len_k : {5, 128, 333})
        for (int64_t row0 = 0; row0 < len_q; row0 += 128)
          for (int64_t n0 = 0; n0 < len_k + 64; n0 += 64) {
            if (fa2::block_needs_mask(n0, 64, row0, 128, len_q, len_k, f)) continue;
            for (int64_t i = row0; i < row0 + 128; ++i) {
              const fa2::KeyLimits k = fa2::row_keys(i, len_q, len_k, f);
              INFO("len_q " << len_q << " len_k " << len_k << " row " << i << " block " << n0);
              REQUIRE(k.lo <= n0);
              REQUIRE(n0 + 64 <= k.hi);
            }
          }
}

// Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp mha_varlen_fwd, v2.5.0 through
// v2.8.3: "if (max_seqlen_q == 1) is_causal = false; if (is_causal) window_size_right = 0;",
// then seqlenq_ngroups_swapped is decided on the windows *as passed*, and only afterwards
// "if (window_size_left >= max_seqlen_k) window_size_left = -1" (same for the right). The
// kernels' copy of this normalisation clamped first, so a window wider than the keys turned
// into "no window" and enabled the swap that FA2 does not take.
TEST_CASE("contract: FA2 decides the single-query swap before dropping a window wider than the keys", "[contract]") {
  fa2::Call c;
  c.max_seqlen_q = 1;
  c.max_seqlen_k = 100;
  c.num_heads = 8;
  c.num_heads_k = 2;
  c.head_dim = 64;
  c.window_left = c.window_right = 4096;  // >= max_seqlen_k: unlimited after the clamp, but passed as a window
  const fa2::Normalized n = fa2::normalize(c);
  CHECK_FALSE(n.swapped);
  CHECK(n.max_seqlen_q == 1);
  CHECK(n.num_heads == 8);
  // the clamp still happens: both sides unlimited, neither causal nor local
  CHECK(n.window_left == -1);
  CHECK(n.window_right == -1);
  CHECK_FALSE(n.causal);
  CHECK_FALSE(n.local);
  // without a window the swap is taken, and the kernel sees Hk heads of ngroups rows
  c.window_left = c.window_right = -1;
  const fa2::Normalized s = fa2::normalize(c);
  CHECK(s.swapped);
  CHECK(s.ngroups == 4);
  CHECK(s.max_seqlen_q == 4);
  CHECK(s.num_heads == 2);
  // causal with max_seqlen_q == 1 is dropped first, so it does not block the swap
  c.causal = true;
  CHECK(fa2::normalize(c).swapped);
  // a one-sided window gets max_seqlen_k on its open side (set_params_fprop)
  c = fa2::Call{};
  c.max_seqlen_q = c.max_seqlen_k = 50;
  c.num_heads = c.num_heads_k = 4;
  c.head_dim = 64;
  c.window_left = 8;
  const fa2::Normalized w = fa2::normalize(c);
  CHECK(w.local);
  CHECK(w.window_left == 8);
  CHECK(w.window_right == 50);
}

// Dao-AILab/flash-attention flash_attn/ops/triton/rotary.py apply_rotary, BLOCK_M:
//   v2.1.2-v2.6.3 "4 if interleaved else (8 if rotary_dim <= 64 else 4)"
//   v2.7.0-v2.7.4 "4 if interleaved else (8 if rotary_dim <= 128 else 4)"
//   v2.8.0-v2.8.3 "8 if rotary_dim <= 128 else 4"
// No release uses 2: the kernels' copy ("2 if interleaved else 4 if rotary_dim <= 128 else 2")
// was stale, and the GPU test checked it. The CUDA rotary kernel now takes BLOCK_M from here.
TEST_CASE("contract: flash_attn's rotary BLOCK_M per release", "[contract]") {
  CHECK(rope::flash_attn_block_m(64, false, 6) == 8);
  CHECK(rope::flash_attn_block_m(128, false, 6) == 4);
  CHECK(rope::flash_attn_block_m(64, true, 6) == 4);
  CHECK(rope::flash_attn_block_m(128, false, 7) == 8);
  CHECK(rope::flash_attn_block_m(256, false, 7) == 4);
  CHECK(rope::flash_attn_block_m(128, true, 7) == 4);
  CHECK(rope::flash_attn_block_m(128, true, 8) == 8);
  CHECK(rope::flash_attn_block_m(256, true, 8) == 4);
  for (int minor = 1; minor <= 8; ++minor)
    for (int64_t dim : {16, 32, 64, 96, 128, 160, 256})
      for (bool il : {false, true}) {
        const int bm = rope::flash_attn_block_m(dim, il, minor);
        CHECK((bm == 4 || bm == 8));
      }
  // the grid: cdiv(max_seqlen, BLOCK_M) programs; rows past them are never visited
  CHECK(rope::grid_m(60, 8) == 8);
  CHECK(rope::rows_visited(100, 8, 8) == 64);
  CHECK(rope::rows_visited(-3, 8, 8) == 0);
  // fla's BT for 132 multiprocessors
  CHECK(rope::fla_block_t(12) == 1);
  CHECK(rope::fla_block_t(1000) == 8);
  CHECK(rope::fla_block_t(1 << 20) == 128);
}

TEST_CASE("contract: the launch-order key orders programs, then access classes, then rows", "[contract]") {
  // FA2's grid (m, b, h): heads outermost
  const uint64_t p0 = order::grid_linear(5, 1, 0, 8, 3), p1 = order::grid_linear(0, 2, 0, 8, 3),
                 p2 = order::grid_linear(0, 0, 1, 8, 3);
  CHECK(p0 < p1);
  CHECK(p1 < p2);
  const uint64_t q = order::key(p0, order::kRead, 100), k = order::key(p0, order::kKeyRead, 0),
                 v = order::key(p0, order::kKeyRead, int64_t(order::kValueBit)), o = order::key(p0, order::kOutWrite, 0),
                 l = order::key(p0, order::kLseWrite, 0);
  CHECK(q < k);
  CHECK(k < v);
  CHECK(v < o);
  CHECK(o < l);
  CHECK(l < order::key(p1, order::kRead, 0));
  CHECK(order::program_of(o) == p0);
  CHECK(order::class_of(o) == order::kOutWrite);
  CHECK(order::sub_of(order::key(p0, order::kRead, int64_t(1) << 40)) == order::kSubMax);  // saturates
  CHECK(order::rotary_sub(5, 3) == (int64_t{5} << 16 | 3));
}

TEST_CASE("contract: an access record keeps the count and the access with the smallest key", "[contract]") {
  AccessRecord a, b;
  Access x;
  x.buffer = Buffer::q;
  x.kind = AccessKind::read;
  x.index = 40;
  a.note(order::key(3, order::kRead, 0), x, 2);
  x.index = 7;
  a.note(order::key(5, order::kRead, 0), x);
  CHECK(a.count == 3);
  CHECK(a.first.index == 40);  // the smaller key, not the smaller index
  CHECK(a.min_index == 7);
  x.index = 90;
  x.buffer = Buffer::out;
  b.note(order::key(1, order::kOutWrite, 0), x, 4);
  a.merge(b);
  CHECK(a.count == 7);
  CHECK(a.first.buffer == Buffer::out);
  CHECK(a.order == order::key(1, order::kOutWrite, 0));
  AccessRecord empty;
  CHECK_FALSE(empty.has_first());
  a.merge(empty);
  CHECK(a.count == 7);
}
