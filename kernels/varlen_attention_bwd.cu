// Varlen attention backward: the launchers of FA2's three launches (the preprocess, the
// key-block kernel, the dq conversion) and of the GQA group sum, the call's normalisation
// and the workspace sizes. The kernels are in varlen_attention_bwd.cuh; the key-block kernel
// is instantiated per element type in varlen_attention_bwd_tc_{bf16,fp16}.cu (head dims 96, 192
// and 256: a file per head dim and type).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.hpp"
#include "launch.hpp"
#include "tma_maps.hpp"
#include "varlen_attention_bwd_small.cuh"

namespace ad::kern {

namespace {

void check_config(bool ok, const std::string& what) {
  if (!ok) throw cuda::LaunchConfigError("varlen attention backward: " + what);
}

template <class T>
void launch_small(const VarlenBwdParams& p, BwdStep step, bool checked, cudaStream_t stream) {
  const dim3 grid(unsigned(bwd::pre_grid_m(p)), p.batch, p.num_heads);
  switch (step) {
    case BwdStep::preprocess:
      if (checked)
        bwd::varlen_bwd_preprocess_kernel<T, true><<<grid, bwd::kPreThreads, 0, stream>>>(p);
      else
        bwd::varlen_bwd_preprocess_kernel<T, false><<<grid, bwd::kPreThreads, 0, stream>>>(p);
      break;
    case BwdStep::convert_dq:
      if (checked)
        bwd::varlen_bwd_convert_dq_kernel<T, true><<<grid, bwd::kPreThreads, 0, stream>>>(p);
      else
        bwd::varlen_bwd_convert_dq_kernel<T, false><<<grid, bwd::kPreThreads, 0, stream>>>(p);
      break;
    case BwdStep::group_sum: {
      const auto aligned = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; };
      const bool v8 = p.head_dim % 8 == 0 && aligned(p.dk.data) && aligned(p.dv.data) && aligned(p.dk_out) &&
                      aligned(p.dv_out);
      const int64_t n = 2 * p.dk.rows * p.num_heads_k * (v8 ? p.head_dim / 8 : p.head_dim);
      const int64_t blocks = std::clamp<int64_t>((n + bwd::kGroupSumThreads - 1) / bwd::kGroupSumThreads, 1, 8192);
      if (v8)
        bwd::varlen_bwd_group_sum_v8_kernel<T><<<unsigned(blocks), bwd::kGroupSumThreads, 0, stream>>>(p);
      else
        bwd::varlen_bwd_group_sum_kernel<T><<<unsigned(blocks), bwd::kGroupSumThreads, 0, stream>>>(p);
      break;
    }
    case BwdStep::key_blocks: break;
  }
}

// The key-block kernel a call runs: on a device that runs the sm_90a kernels, with block_m 0
// (automatic) and head dim 64 or 128, the wgmma kernel (kernels/sm90a/varlen_attention_bwd_wgmma.cuh,
// kWgmmaBlockM query rows per step); otherwise the mma.sync kernel with block_m rows per step (0: its default).
bool uses_wgmma(const VarlenBwdParams& p) {
#ifdef ATTN_DOCTOR_WITH_WGMMA
  return p.block_m == 0 && (p.head_dim == 64 || p.head_dim == 128) && bwd::tile_m_of(p) % bwd::kWgmmaBlockM == 0 &&
         detail::device_runs_wgmma();
#else
  (void)p;
  return false;
#endif
}
int walk_block_m(const VarlenBwdParams& p) {
  if (uses_wgmma(p)) return bwd::kWgmmaBlockM;
  return p.block_m > 0 ? p.block_m : bwd::default_block_m(p.head_dim);
}

}  // namespace

const char* to_string(BwdStep s) {
  switch (s) {
    case BwdStep::preprocess: return "preprocess";
    case BwdStep::key_blocks: return "key_blocks";
    case BwdStep::convert_dq: return "convert_dq";
    case BwdStep::group_sum: return "group_sum";
  }
  return "?";
}

void fa2_bwd_normalize(VarlenBwdParams& p) {
  if (p.normalized) return;
  p.normalized = true;
  fa2::bwd::Call c;
  c.max_seqlen_q = p.max_seqlen_q, c.max_seqlen_k = p.max_seqlen_k;
  c.num_heads = p.num_heads, c.num_heads_k = p.num_heads_k;
  c.head_dim = p.head_dim;
  c.num_segments = p.batch;
  c.causal = p.causal;
  c.window_left = p.window_left, c.window_right = p.window_right;
  c.deterministic = p.deterministic;
  c.arch = p.arch;
  p.kernel = fa2::bwd::normalize(p.release, c);
  p.dq_accum_shape = fa2::bwd::DqAccumShape{p.q.rows, p.batch, p.num_heads, p.kernel.tile.head_dim_rounded,
                                            p.kernel.nsplits};
  p.softmax_d_shape = fa2::bwd::SoftmaxDShape{p.release.lse, p.q.rows, p.batch, p.num_heads, p.max_seqlen_q};
}

bool varlen_bwd_supported(const VarlenBwdParams& p) {
  return p.elem != ElemType::fp32 &&
         (p.head_dim == 64 || p.head_dim == 96 || p.head_dim == 128 || p.head_dim == 192 || p.head_dim == 256);
}

std::string varlen_bwd_unsupported(const VarlenBwdParams& p_in) {
  VarlenBwdParams p = p_in;
  fa2_bwd_normalize(p);
  if (!varlen_bwd_supported(p))
    return std::string("the kernels take bf16 / fp16 with head_dim 64, 96, 128, 192 or 256, not ") + to_string(p.elem) + " d" +
           std::to_string(p.head_dim);
  const int block_m = walk_block_m(p);
  const int tile_m = bwd::tile_m_of(p);
  const int block_n = bwd::key_block_n(p.head_dim);
  if (bwd::tile_n_of(p) != block_n || tile_m <= 0 || tile_m % block_m != 0 || tile_m > 128)
    return "FA2's tile " + std::to_string(tile_m) + " x " + std::to_string(bwd::tile_n_of(p)) +
           " is not one the kernel walks (key blocks of " + std::to_string(block_n) +
           ", query tiles a multiple of " + std::to_string(block_m) + ")";
  if (p.kernel.flags.chunk != 0)
    return "FA3's attention_chunk (" + std::to_string(p.kernel.flags.chunk) + "): the kernels take FA2's masks";
  if (p.kernel.tile.head_dim_rounded != p.head_dim)
    return "dq_accum has " + std::to_string(p.kernel.tile.head_dim_rounded) + " columns per head for head_dim " +
           std::to_string(p.head_dim);
  return "";
}

std::string varlen_bwd_kernel_name(const VarlenBwdParams& p_in, Checks checks) {
  VarlenBwdParams p = p_in;
  fa2_bwd_normalize(p);
  if (uses_wgmma(p))
    return std::string("varlen_bwd_wgmma<") + to_string(p.elem) + ",d" + std::to_string(p.head_dim) + "," +
           to_string(checks) + ">";
  const int block_m = walk_block_m(p);
  return std::string("varlen_bwd_tc<") + to_string(p.elem) + ",d" + std::to_string(p.head_dim) + ",m" +
         std::to_string(block_m) + "," + to_string(checks) + ">";
}

BwdWorkspace varlen_bwd_workspace(const VarlenBwdParams& p_in) {
  VarlenBwdParams p = p_in;
  fa2_bwd_normalize(p);
  return {p.softmax_d_shape.elements(), p.dq_accum_shape.elements(), p.dq_accum_shape.split_stride()};
}

std::vector<BwdStep> varlen_bwd_steps(const VarlenBwdParams& p) {
  std::vector<BwdStep> s = {BwdStep::preprocess, BwdStep::key_blocks, BwdStep::convert_dq};
  if (p.num_heads != p.num_heads_k) s.push_back(BwdStep::group_sum);
  return s;
}

void launch_varlen_bwd_step(const VarlenBwdParams& p_in, BwdStep step, Checks checks, cudaStream_t stream) {
  VarlenBwdParams p = p_in;
  fa2_bwd_normalize(p);
  const bool checked = checks == Checks::checked;
  check_config(varlen_bwd_supported(p), "no tensor-core kernel for " + std::string(to_string(p.elem)) + " head_dim " +
                                            std::to_string(p.head_dim) + " (bf16/fp16, 64, 96, 128, 192 or 256)");
  check_config(p.num_heads_k > 0 && p.num_heads > 0 && p.num_heads % p.num_heads_k == 0,
               "num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_heads_k " +
                   std::to_string(p.num_heads_k));
  check_config(p.cu_seqlens_q.data != nullptr && p.cu_seqlens_k.data != nullptr, "cu_seqlens missing");
  check_config(p.cu_seqlens_q.size == int64_t(p.batch) + 1 && p.cu_seqlens_k.size == int64_t(p.batch) + 1,
               "cu_seqlens_q/k must hold batch + 1 entries");
  check_config(!checked || p.record != nullptr, "checked launch without a violation record");
  check_config(p.batch > 0 && p.batch <= 65535 && p.num_heads <= 65535,
               "grid (.., " + std::to_string(p.batch) + ", " + std::to_string(p.num_heads) +
                   ") outside the 1-65535 limit of grid.y/grid.z: invalid configuration argument");
  check_config(step != BwdStep::group_sum || (p.dk_out != nullptr && p.dv_out != nullptr),
               "H > Hk without dk_out / dv_out");
  const int tile_m = bwd::tile_m_of(p), block_m = walk_block_m(p);
  const int block_n = bwd::key_block_n(p.head_dim);
  check_config(bwd::tile_n_of(p) == block_n && tile_m > 0 && tile_m % block_m == 0 && tile_m <= 128,
               "FA2 tile " + std::to_string(tile_m) + " x " + std::to_string(bwd::tile_n_of(p)) +
                   " is not walked by this kernel (key blocks of " + std::to_string(block_n) +
                   ", query tiles a multiple of " +
                   std::to_string(block_m) + ", at most 128)");
  check_config(p.kernel.tile.head_dim_rounded == p.head_dim, "dq_accum columns per head must equal head_dim");
  check_config(p.kernel.grid_x > 0 && p.kernel.grid_x <= 0x7fffffff && p.kernel.grid_m <= 0x7fffffff,
               "grid of " + std::to_string(p.kernel.grid_x) + " key-block CTAs: invalid configuration argument");
  check_config(p.dq_accum != nullptr && p.dq_accum_size >= p.dq_accum_shape.elements() && p.softmax_d != nullptr &&
                   p.softmax_d_size >= p.softmax_d_shape.elements(),
               "the dq_accum / softmax_d workspaces are smaller than FA2 allocates them (varlen_bwd_workspace)");
  if (step == BwdStep::key_blocks) {
    check_config(p.kernel.n_blocks > 0, "empty launch grid (" + std::to_string(p.kernel.n_blocks) +
                                            " key blocks): invalid configuration argument");
    const dim3 grid(unsigned(bwd::key_grid_x(p)), p.batch, p.num_heads);
#ifdef ATTN_DOCTOR_WITH_WGMMA
    if (uses_wgmma(p)) {
      const detail::BwdWgmmaKernels k = p.elem == ElemType::bf16 ? detail::varlen_bwd_wgmma_bf16(p.head_dim, checked)
                                                                 : detail::varlen_bwd_wgmma_fp16(p.head_dim, checked);
      // The checked form's in-bounds key blocks run the warp-specialised kernel, which loads
      // through tensor maps of q, k, v and dout and adds dQ through one of dq_accum, where the
      // call has them all (tma_maps.hpp); its fallback launch then also takes the blocks whose
      // dQ rows cross a row of dq_accum (dq_rows_whole).
      const BwdTmaMaps maps = checked && k.ws.fn != nullptr ? bwd_tma_maps(p) : BwdTmaMaps{};
      const bool ws = k.ws.fn != nullptr && (!checked || maps.all());
      VarlenBwdParams q = p;
      q.dq_rows_whole = checked && ws;
      if (ws)
        detail::launch_kernel(k.ws, grid, q, maps, stream);
      else
        detail::launch_kernel(k.main, grid, q, stream);
      if (checked) {
        // the key blocks the wgmma kernel left (those that can reach past a buffer): a
        // persistent grid of at most two CTAs per SM, each taking the grid's CTAs a block at a time
        int dev = 0, sms = 0;
        AD_CUDA_CHECK(cudaGetDevice(&dev));
        AD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        const int64_t ctas = bwd::key_grid_x(p) * p.batch * p.num_heads;
        const int64_t passes = (ctas + k.fallback.threads - 1) / k.fallback.threads;
        detail::launch_kernel(k.fallback, dim3(unsigned(std::min<int64_t>(passes, 2 * int64_t(sms)))), q, stream);
      }
      return;
    }
#endif
    detail::launch_kernel(p.elem == ElemType::bf16 ? detail::varlen_bwd_tc_bf16(p.head_dim, p.block_m, checked)
                                                   : detail::varlen_bwd_tc_fp16(p.head_dim, p.block_m, checked),
                          grid, p, stream);
    return;
  }
  if (step != BwdStep::group_sum)
    check_config(p.kernel.grid_m > 0, "empty launch grid (" + std::to_string(p.kernel.grid_m) +
                                          " query tiles): invalid configuration argument");
  if (p.elem == ElemType::bf16)
    launch_small<__nv_bfloat16>(p, step, checked, stream);
  else
    launch_small<__half>(p, step, checked, stream);
}

void launch_varlen_bwd(const VarlenBwdParams& p, Checks checks, cudaStream_t stream) {
  for (const BwdStep s : varlen_bwd_steps(p)) launch_varlen_bwd_step(p, s, checks, stream);
}

}  // namespace ad::kern
