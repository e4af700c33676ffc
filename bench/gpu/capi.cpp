// C entry points over the kernel launchers, for bench/gpu/*.py: PyTorch allocates the
// tensors, calls FA2 (torch.ops.aten._flash_attention_forward) and these on the same
// inputs in the same process, and times both with CUDA events. Launches are asynchronous
// on the given stream; nothing here synchronises. Returns 0, or -1 with ad_last_error().
//
// Built by scripts/gpu-check as build-*/libad_bench.so from this file and the PIC static
// library attn_doctor_cuda.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "exec/cuda/device.hpp"
#include "contract/rotary.hpp"
#include "launch.hpp"

using namespace ad;

namespace {
thread_local std::string last_error;
// FA2's query rows per CTA for the forward (kBlockM) at head dim 256: 128 (A100's tile, the
// params' default) or 64 (H100's); ad_set_fwd_block_m_d256 picks it for the benchmarks.
thread_local int32_t block_m_d256 = 128;

template <class F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return -1;
  }
}

// The fields the forward and the backward params share (kern::set_varlen_call, as the CUDA
// backend fills them), from the arguments both entry points take: the operands, cu_seqlens
// (batch + 1 entries), the shape and the masks; the LSE holds rows_q x heads elements.
void set_attention(kern::VarlenParamsBase& p, int elem, const void* q, const void* k, const void* v, int64_t rows_q,
                   int64_t rows_k, const int32_t* cu_q, const int32_t* cu_k, int32_t batch, int32_t heads,
                   int32_t heads_k, int32_t head_dim, int32_t max_seqlen_q, int32_t max_seqlen_k, float scale, int causal,
                   int32_t window_left, int32_t window_right, float softcap) {
  kern::set_varlen_call(p, static_cast<ElemType>(elem), {q, rows_q, heads}, {k, rows_k, heads_k}, {v, rows_k, heads_k},
                        {cu_q, int64_t(batch) + 1}, {cu_k, int64_t(batch) + 1},
                        {batch, heads, heads_k, head_dim, max_seqlen_q, max_seqlen_k},
                        {scale, softcap, causal != 0, window_left, window_right});
  p.lse_size = rows_q * heads;
}
}  // namespace

extern "C" {

const char* ad_last_error() { return last_error.c_str(); }

// The forward's block_m for head dim 256 in later ad_varlen_fwd / ad_varlen_fwd_kernel_name
// calls of this thread (64: FA2's H100 tile; 128 otherwise).
void ad_set_fwd_block_m_d256(int32_t block_m) { block_m_d256 = block_m; }

size_t ad_record_size() { return sizeof(AccessRecord); }

// Writes an empty record to host memory `out` (the caller copies it to the device).
void ad_empty_record(void* out) {
  const AccessRecord r;
  std::memcpy(out, &r, sizeof(r));
}

// Fields of a record read back to host memory: count, buffer, index, bound, min_index.
void ad_record_fields(const void* rec, int64_t* fields) {
  AccessRecord r;
  std::memcpy(&r, rec, sizeof(r));
  fields[0] = int64_t(r.count), fields[1] = int64_t(r.first.buffer), fields[2] = r.first.index, fields[3] = r.first.bound,
  fields[4] = r.min_index;
}

// The kernel ad_varlen_fwd runs on the current device for (elem, head_dim, which, checked),
// e.g. "varlen_fwd_wgmma<bf16,d128,checked>".
const char* ad_varlen_fwd_kernel_name(int elem, int32_t head_dim, int which, int checked) {
  thread_local std::string name;
  kern::VarlenFwdParams p;
  p.elem = static_cast<ElemType>(elem);
  p.head_dim = head_dim;
  if (head_dim == 256) p.block_m = block_m_d256;
  name = kern::varlen_fwd_kernel_name(p, checked ? Checks::checked : Checks::unchecked,
                                      static_cast<kern::AttnKernel>(which));
  return name.c_str();
}

// The key-block kernel ad_varlen_bwd runs on the current device for (elem, head_dim, block_m,
// checked), e.g. "varlen_bwd_wgmma<bf16,d128,checked>" (block_m 0 on an H100 / H200).
const char* ad_varlen_bwd_kernel_name(int elem, int32_t head_dim, int32_t block_m, int checked) {
  thread_local std::string name;
  kern::VarlenBwdParams p;
  p.elem = static_cast<ElemType>(elem);
  p.head_dim = head_dim;
  p.num_heads = p.num_heads_k = 1;
  p.batch = 1;
  p.max_seqlen_q = p.max_seqlen_k = 128;
  p.block_m = block_m;
  name = kern::varlen_bwd_kernel_name(p, checked ? Checks::checked : Checks::unchecked);
  return name.c_str();
}

// elem: 0 bf16, 1 fp16, 2 fp32. which: 0 automatic (wgmma on compute capability 9.0 when
// built, else mma.sync), 1 mma.sync tensor core, 2 generic, 3 mma.sync other warp layout,
// 4 wgmma, 5 wgmma other tile shape, 6 / 7 wgmma / mma.sync with the checked form in one launch
// (a build with ATTN_DOCTOR_FWD_ONE_LAUNCH; kern::AttnKernel), 8 warp-specialised wgmma (head_dim
// 128), 9 the same without ping-pong.
int ad_varlen_fwd(int elem, const void* q, int64_t rows_q, void* out, float* lse, const void* k, const void* v,
                  int64_t rows_k, const int32_t* cu_q, const int32_t* cu_k, int32_t batch, int32_t heads,
                  int32_t heads_k, int32_t head_dim, int32_t max_seqlen_q, int32_t max_seqlen_k, float scale,
                  int causal, int32_t window_left, int32_t window_right, float softcap, int checked, int which,
                  void* record, void* stream) {
  return guarded([&] {
    kern::VarlenFwdParams p;
    set_attention(p, elem, q, k, v, rows_q, rows_k, cu_q, cu_k, batch, heads, heads_k, head_dim, max_seqlen_q,
                  max_seqlen_k, scale, causal, window_left, window_right, softcap);
    p.out = {out, rows_q, heads};
    p.lse = lse;
    p.record = static_cast<AccessRecord*>(record);
    if (head_dim == 256) p.block_m = block_m_d256;
    kern::launch_varlen_fwd(p, checked ? Checks::checked : Checks::unchecked,
                            static_cast<cudaStream_t>(stream), static_cast<kern::AttnKernel>(which));
  });
}

// The fp32 workspaces of the backward for this call, in elements: out[0] softmax_d, out[1]
// dq_accum (flash-attn 2.8's rules, non-deterministic, the same geometry ad_varlen_bwd runs).
void ad_varlen_bwd_workspace(int64_t rows_q, int32_t heads, int32_t head_dim, int32_t batch, int32_t max_seqlen_q,
                             int32_t max_seqlen_k, int64_t* out) {
  kern::VarlenBwdParams p;
  p.q.rows = rows_q;
  p.num_heads = heads, p.num_heads_k = heads, p.head_dim = head_dim;
  p.batch = batch;
  p.max_seqlen_q = max_seqlen_q, p.max_seqlen_k = max_seqlen_k;
  const kern::BwdWorkspace w = kern::varlen_bwd_workspace(p);
  out[0] = w.softmax_d;
  out[1] = w.dq_accum;
}

// The varlen backward (all its launches, enqueued on `stream`). With heads > heads_k, dk / dv
// receive the group sums and dk_expanded / dv_expanded (rows_k, heads, head_dim) hold the
// per-query-head gradients; otherwise the expanded pointers are ignored. block_m: the
// key-block kernel's query rows per step (0: the default; 32 or 64 for head_dim 128).
int ad_varlen_bwd(int elem, const void* q, const void* k, const void* v, const void* out, const void* dout,
                  const float* lse, void* dq, void* dk, void* dv, void* dk_expanded, void* dv_expanded,
                  float* softmax_d, float* dq_accum, int64_t rows_q, int64_t rows_k, const int32_t* cu_q,
                  const int32_t* cu_k, int32_t batch, int32_t heads, int32_t heads_k, int32_t head_dim,
                  int32_t max_seqlen_q, int32_t max_seqlen_k, float scale, int causal, int32_t window_left,
                  int32_t window_right, float softcap, int checked, int32_t block_m, void* record, void* stream) {
  return guarded([&] {
    kern::VarlenBwdParams p;
    set_attention(p, elem, q, k, v, rows_q, rows_k, cu_q, cu_k, batch, heads, heads_k, head_dim, max_seqlen_q,
                  max_seqlen_k, scale, causal, window_left, window_right, softcap);
    p.out = {out, rows_q, heads};
    p.lse = lse;
    p.dout = {dout, rows_q, heads};
    p.dq = {dq, rows_q, heads};
    const bool gqa = heads != heads_k;
    p.dk = {gqa ? dk_expanded : dk, rows_k, gqa ? heads : heads_k};
    p.dv = {gqa ? dv_expanded : dv, rows_k, gqa ? heads : heads_k};
    p.dk_out = gqa ? dk : nullptr;
    p.dv_out = gqa ? dv : nullptr;
    p.block_m = block_m;
    const kern::BwdWorkspace w = kern::varlen_bwd_workspace(p);  // the caller allocated these sizes
    p.softmax_d = softmax_d;
    p.softmax_d_size = w.softmax_d;
    p.dq_accum = dq_accum;
    p.dq_accum_size = w.dq_accum;
    p.record = static_cast<AccessRecord*>(record);
    kern::launch_varlen_bwd(p, checked ? Checks::checked : Checks::unchecked, static_cast<cudaStream_t>(stream));
  });
}

int ad_index_copy(int scatter, const void* src, int64_t src_rows, void* dst, int64_t dst_rows, int64_t row_bytes,
                  const int64_t* indices, int64_t num_indices, int checked, void* record, void* stream) {
  return guarded([&] {
    kern::IndexCopyParams p{src, src_rows, dst, dst_rows, row_bytes, indices, num_indices,
                            static_cast<AccessRecord*>(record)};
    const auto c = checked ? Checks::checked : Checks::unchecked;
    if (scatter)
      kern::launch_pad_scatter(p, c, static_cast<cudaStream_t>(stream));
    else
      kern::launch_unpad_gather(p, c, static_cast<cudaStream_t>(stream));
  });
}

// cu_seqlens_host: the same values as cu_seqlens (device), for the grid of the fla contract.
int ad_rotary(int elem, void* x, int64_t rows, int32_t heads, int32_t head_dim, const float* cos, const float* sin,
              int64_t table_rows, int32_t rotary_dim, int interleaved, const int32_t* cu_seqlens,
              const int32_t* cu_seqlens_host, int32_t num_segments, int32_t max_seqlen, int contract, int checked,
              void* record, void* stream) {
  return guarded([&] {
    kern::RotaryParams p;
    p.elem = static_cast<ElemType>(elem);
    p.x = x;
    p.rows = rows, p.heads = heads, p.head_dim = head_dim;
    p.cos = cos, p.sin = sin, p.table_rows = table_rows, p.rotary_dim = rotary_dim;
    p.interleaved = interleaved != 0;
    p.cu_seqlens = cu_seqlens;
    p.num_segments = num_segments;
    p.max_seqlen = max_seqlen;
    p.contract = static_cast<RotaryContract>(contract);
    p.block_rows = rope::flash_attn_block_m(rotary_dim, interleaved != 0, 6);  // flash-attn 2.6 (the plan's default release)
    p.record = static_cast<AccessRecord*>(record);
    const int64_t grid_rows = kern::rotary_grid_rows(p, cu_seqlens_host);
    kern::launch_rotary(p, grid_rows, checked ? Checks::checked : Checks::unchecked,
                        static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
