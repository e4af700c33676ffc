// Rotary embedding, varlen aware, in place, with the two contracts of
// docs/spec/execution.md (see RotaryContract in kernel_params.hpp):
//
//   x (rows, H, D); pair c of a head (c < rotary_dim / 2) is columns (c, c + rotary_dim / 2)
//   (GPT-NeoX) or (2c, 2c + 1) (interleaved, GPT-J); position = row in segment + offset;
//   out_a = a cos - b sin, out_b = a sin + b cos, in fp32.
//
// flash_attn (flash_attn/ops/triton/rotary.py): segment starts are int32 and signed (a
// negative start addresses memory before the tensor), rows past ceil(max_seqlen / BLOCK_M)
// * BLOCK_M are never visited, and a position past the table is rotated by the identity.
// fla (fla/modules/rotary.py before the rotary-dim check, fla-org/flash-linear-attention
// #180): the columns are bounded by the rotary dim only, so `dim = hidden_size` walks each
// head's rotation into the following heads and the last one past the tensor.
//
// The checked form refuses, and records as rotary.access, every element access outside the
// tensor or outside the head the row's rotation belongs to; the rest of the pair is done. A
// (row, head) wholly outside the tensor is recorded once, with the count of its accesses
// (rope::accesses_per_row_head), as the CPU twin counts it. Launch order and geometry:
// contract/rotary.hpp, contract/launch_order.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_check.hpp"
#include "device_common.cuh"
#include "contract/rotary.hpp"
#include "launch.hpp"

namespace ad::kern {

namespace {

constexpr int kRotaryThreads = 128;

struct RotarySegment {
  int64_t start;  // first row (signed: flash_attn reads cu_seqlens as int32)
  int64_t len;
};

__device__ __forceinline__ RotarySegment rotary_segment(const RotaryParams& p, int b) {
  if (p.cu_seqlens == nullptr) return {int64_t(b) * p.segment_rows, p.segment_rows};
  const int32_t a = p.cu_seqlens[b];
  return {int64_t(a), int64_t(p.cu_seqlens[b + 1]) - int64_t(a)};
}

// Launch-order key of the accesses of a (row, head): flash_attn's program (m, b, h) in its
// grid (grid_rows / BLOCK_M, N, H), then the row in the program. Computed only when an
// access is refused (the divisions stay out of the hot path).
struct OrderCtx {
  int64_t grid_rows;
  __device__ uint64_t key(const RotaryParams& p, int b, int64_t r, int h) const {
    const int64_t bm = p.block_rows > 0 ? p.block_rows : 1;
    const uint64_t program = rope::flash_attn_program(r / bm, b, h, (grid_rows + bm - 1) / bm, p.num_segments);
    return order::key(program, order::kRead, order::rotary_sub(r % bm, 0));
  }
};

// Whether element `e` at head column `col` of packed row `xrow` (row r of segment b) may be
// touched; records it when not.
template <bool Checked>
__device__ __forceinline__ bool element_ok(const RotaryParams& p, int64_t e, int col, int64_t numel, AccessKind kind,
                                           int b, int64_t r, int64_t xrow, int h, OrderCtx order_ctx) {
  if constexpr (!Checked) {
    return true;
  } else {
    const bool outside_tensor = e < 0 || e >= numel;
    if (!outside_tensor && col < p.head_dim) return true;
    const int64_t bm = p.block_rows > 0 ? p.block_rows : 1;
    record_violation(p.record, p.buffer, kind, Unit::elements, outside_tensor ? Region::tensor : Region::head, e, numel,
                     r / bm, b, h, b, xrow, h, col, order_ctx.key(p, b, r, h), 1);
    return false;
  }
}

template <class T, bool Checked>
__device__ __forceinline__ void rotate_pair(const RotaryParams& p, T* x, int64_t base, int c, int half, float cs,
                                            float sn, int64_t numel, int b, int64_t r, int64_t xrow, int h,
                                            OrderCtx order) {
  const int ca = p.interleaved ? 2 * c : c;
  const int cb = p.interleaved ? 2 * c + 1 : c + half;
  const int64_t ea = base + ca, eb = base + cb;
  const bool ra = element_ok<Checked>(p, ea, ca, numel, AccessKind::read, b, r, xrow, h, order);
  const bool rb = element_ok<Checked>(p, eb, cb, numel, AccessKind::read, b, r, xrow, h, order);
  const float a = ra ? Elem<T>::to_float(x[ea]) : 0.f;
  const float bb = rb ? Elem<T>::to_float(x[eb]) : 0.f;
  if (ra) x[ea] = Elem<T>::from_float(a * cs - bb * sn);
  else if (Checked) element_ok<Checked>(p, ea, ca, numel, AccessKind::write, b, r, xrow, h, order);
  if (rb) x[eb] = Elem<T>::from_float(a * sn + bb * cs);
  else if (Checked) element_ok<Checked>(p, eb, cb, numel, AccessKind::write, b, r, xrow, h, order);
}

// V = 8: eight GPT-NeoX pairs per thread with 16-byte accesses (2-byte types, half % 8 == 0).
template <class T, int V, bool Checked>
__global__ void __launch_bounds__(kRotaryThreads) rotary_kernel(const RotaryParams p, int64_t grid_rows,
                                                                int threads_per_row) {
  const int b = blockIdx.y, h = blockIdx.z;
  const int rows_per_block = kRotaryThreads / threads_per_row;
  const int sub = threadIdx.x / threads_per_row;
  if (sub >= rows_per_block) return;
  const int64_t r = int64_t(blockIdx.x) * rows_per_block + sub;
  if (r >= grid_rows) return;
  const RotarySegment seg = rotary_segment(p, b);
  if (r >= seg.len) return;
  const int64_t offset = p.seqlen_offsets != nullptr ? p.seqlen_offsets[b] : p.seqlen_offset;
  const int64_t pos = r + offset;
  const bool in_table = pos >= 0 && pos < p.table_rows;
  if (p.contract == RotaryContract::fla && !in_table) return;  // fla masks the whole row
  const int half = p.rotary_dim / 2;
  const int64_t row_stride = int64_t(p.heads) * p.head_dim;
  const int64_t numel = p.rows * row_stride;
  const int64_t xrow = seg.start + r;
  const int64_t base = xrow * row_stride + int64_t(h) * p.head_dim;
  const OrderCtx order{grid_rows};
  if constexpr (Checked) {
    if (xrow < 0 || xrow >= p.rows) {
      // the rest of a segment outside the tensor: counted by the host, or here at once
      if (!p.skip_rows_outside && threadIdx.x % threads_per_row == 0 && (base >= numel || base + 2 * half <= 0))
        record_violation(p.record, p.buffer, AccessKind::read, Unit::elements, Region::tensor, base, numel,
                         r / (p.block_rows > 0 ? p.block_rows : 1), b, h, b, xrow, h, 0, order.key(p, b, r, h),
                         uint64_t(rope::accesses_per_row_head(half, p.interleaved)));
      if (p.skip_rows_outside || base >= numel || base + 2 * half <= 0) return;
    }
  }
  T* x = static_cast<T*>(p.x);
  const float* cos_row = p.cos + (in_table ? pos : 0) * half;
  const float* sin_row = p.sin + (in_table ? pos : 0) * half;
  const int units = (half + V - 1) / V;
  for (int u = threadIdx.x % threads_per_row; u < units; u += threads_per_row) {
    const int c0 = u * V;
    bool done = false;
    if constexpr (V == 8) {
      const int64_t ea = base + c0, eb = base + c0 + half;
      const bool fast = !Checked || (c0 + half + 7 < p.head_dim && ea >= 0 && eb + 7 < numel);
      if (fast) {
        float cs[8], sn[8];
        if (in_table) {
          const float4 c_lo = *reinterpret_cast<const float4*>(cos_row + c0);
          const float4 c_hi = *reinterpret_cast<const float4*>(cos_row + c0 + 4);
          const float4 s_lo = *reinterpret_cast<const float4*>(sin_row + c0);
          const float4 s_hi = *reinterpret_cast<const float4*>(sin_row + c0 + 4);
          cs[0] = c_lo.x, cs[1] = c_lo.y, cs[2] = c_lo.z, cs[3] = c_lo.w;
          cs[4] = c_hi.x, cs[5] = c_hi.y, cs[6] = c_hi.z, cs[7] = c_hi.w;
          sn[0] = s_lo.x, sn[1] = s_lo.y, sn[2] = s_lo.z, sn[3] = s_lo.w;
          sn[4] = s_hi.x, sn[5] = s_hi.y, sn[6] = s_hi.z, sn[7] = s_hi.w;
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i) cs[i] = 1.f, sn[i] = 0.f;
        }
        uint4 va = *reinterpret_cast<const uint4*>(x + ea);
        uint4 vb = *reinterpret_cast<const uint4*>(x + eb);
        T* ta = reinterpret_cast<T*>(&va);
        T* tb = reinterpret_cast<T*>(&vb);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float a = Elem<T>::to_float(ta[i]), bb = Elem<T>::to_float(tb[i]);
          ta[i] = Elem<T>::from_float(a * cs[i] - bb * sn[i]);
          tb[i] = Elem<T>::from_float(a * sn[i] + bb * cs[i]);
        }
        *reinterpret_cast<uint4*>(x + ea) = va;
        *reinterpret_cast<uint4*>(x + eb) = vb;
        done = true;
      }
    }
    if (done) continue;
    for (int c = c0; c < c0 + V && c < half; ++c) {
      const float cs = in_table ? cos_row[c] : 1.f;
      const float sn = in_table ? sin_row[c] : 0.f;
      rotate_pair<T, Checked>(p, x, base, c, half, cs, sn, numel, b, r, xrow, h, order);
    }
  }
}

template <class T, int V>
void launch_t(const RotaryParams& p, int64_t grid_rows, bool checked, cudaStream_t stream) {
  const int half = p.rotary_dim / 2;
  const int units = (half + V - 1) / V;
  const int threads_per_row = std::min(units, kRotaryThreads);
  const int rows_per_block = kRotaryThreads / threads_per_row;
  const int64_t launched = p.skip_rows_outside && p.launch_rows > 0 && p.launch_rows < grid_rows ? p.launch_rows : grid_rows;
  const dim3 grid(unsigned((launched + rows_per_block - 1) / rows_per_block), unsigned(p.num_segments),
                  unsigned(p.heads));
  if (checked)
    rotary_kernel<T, V, true><<<grid, kRotaryThreads, 0, stream>>>(p, grid_rows, threads_per_row);
  else
    rotary_kernel<T, V, false><<<grid, kRotaryThreads, 0, stream>>>(p, grid_rows, threads_per_row);
}

}  // namespace

int64_t rotary_grid_rows(const RotaryParams& p, const int32_t* host_cu_seqlens) {
  if (p.cu_seqlens == nullptr) return p.segment_rows;
  if (p.contract == RotaryContract::flash_attn) return rope::grid_m(p.max_seqlen, p.block_rows) * p.block_rows;
  int64_t longest = 0;
  for (int32_t b = 0; b < p.num_segments; ++b)
    longest = std::max<int64_t>(longest, int64_t(host_cu_seqlens[b + 1]) - int64_t(host_cu_seqlens[b]));
  return longest;
}

void launch_rotary(const RotaryParams& p, int64_t grid_rows, Checks checks, cudaStream_t stream) {
  auto fail = [](const std::string& what) { throw cuda::LaunchConfigError("rotary: " + what); };
  if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0) fail("rotary_dim must be positive and even");
  if (p.heads <= 0 || p.head_dim <= 0 || p.rows < 0) fail("invalid tensor shape");
  if (checks == Checks::checked && p.record == nullptr) fail("checked launch without a violation record");
  if (p.contract != RotaryContract::flash_attn && p.contract != RotaryContract::fla)
    fail(std::string("no kernel for the ") + to_string(p.contract) + " contract");
  if (p.contract == RotaryContract::flash_attn && p.cu_seqlens != nullptr && p.block_rows <= 0)
    fail("flash_attn: block_rows (BLOCK_M of the release) must be set");
  if (p.num_segments > 65535 || p.heads > 65535) fail("grid exceeds the 65535 limit of grid.y/grid.z: invalid argument");
  if (grid_rows <= 0 || p.num_segments <= 0 || p.rows == 0) return;
  const int half = p.rotary_dim / 2;
  const bool vec = p.elem != ElemType::fp32 && !p.interleaved && half % 8 == 0 && p.head_dim % 8 == 0;
  const bool checked = checks == Checks::checked;
  switch (p.elem) {
    case ElemType::bf16:
      vec ? launch_t<__nv_bfloat16, 8>(p, grid_rows, checked, stream)
          : launch_t<__nv_bfloat16, 1>(p, grid_rows, checked, stream);
      break;
    case ElemType::fp16:
      vec ? launch_t<__half, 8>(p, grid_rows, checked, stream) : launch_t<__half, 1>(p, grid_rows, checked, stream);
      break;
    case ElemType::fp32: launch_t<float, 1>(p, grid_rows, checked, stream); break;
  }
}

}  // namespace ad::kern
