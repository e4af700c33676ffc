// Launchers of the project's CUDA kernels: the host-callable side of kernels/*.cu.
//
// Each launcher validates its params struct against the kernel's own limits (throwing
// `LaunchConfigError`), launches asynchronously on `stream` and returns. It does not
// synchronise: the backend wraps every launch in `checked_launch` (lib/exec/cuda/), which
// synchronises, checks the launch and execution errors and reads the violation record
// before anything else runs; the benchmarks time the bare launches.
//
// Plain C++ header: the backend (.cpp) and the tests include it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernel_params.hpp"

namespace ad::kern {

struct FwdTmaMaps;  // kernels/tma_maps.hpp
struct BwdTmaMaps;

// ---- unpad / pad (kernels/unpad_pad.cu) -------------------------------------------------
void launch_unpad_gather(const IndexCopyParams& p, Checks checks, cudaStream_t stream = nullptr);
void launch_pad_scatter(const IndexCopyParams& p, Checks checks, cudaStream_t stream = nullptr);

// ---- rotary (kernels/rotary.cu) ---------------------------------------------------------
// `grid_rows`: rows per segment the grid covers (flash_attn: ceil(max_seqlen / BLOCK_M) *
// BLOCK_M with p.block_rows = BLOCK_M; fla: the longest segment), computed on the host by
// `rotary_grid_rows`.
void launch_rotary(const RotaryParams& p, int64_t grid_rows, Checks checks, cudaStream_t stream = nullptr);
int64_t rotary_grid_rows(const RotaryParams& p, const int32_t* host_cu_seqlens);

// ---- varlen attention forward (kernels/varlen_attention*.cu) ----------------------------
// automatic: the wgmma kernel on a compute capability 9.0 device when the build carries it
// (sm_90a) and the shape has it (bf16/fp16, head_dim 64/128/192; at 128 the warp-specialised
// one, wgmma_ws); else the mma.sync tensor-core
// kernel for its shapes (bf16/fp16, head_dim 64, 96, 128, 192, 256 with FA2's block_m);
// else the generic one. tensor_core: the mma.sync kernel (sm_80 and
// up); tensor_core_alt: the same with its other warp layout (benchmarks only; needs a build
// with ATTN_DOCTOR_TC_BOTH_SHAPES); wgmma: the Hopper kernel (refused where it cannot run);
// wgmma_alt: the same with its other tile shape (benchmarks only; ATTN_DOCTOR_WGMMA_ALT, bf16);
// wgmma_one_launch / tensor_core_one_launch: that kernel's checked form in one launch, the
// checked body on every CTA, as before the two-launch form (benchmarks only; a build with
// ATTN_DOCTOR_FWD_ONE_LAUNCH; their unchecked form is the kernel's own).
// wgmma_ws: the warp-specialised Hopper kernel (head_dim 128; checked: it runs the CTAs whose
// accesses all lie in bounds, the checked wgmma kernel's second launch the others);
// wgmma_ws_alt: the same without ping-pong (benchmarks only, bf16).
enum class AttnKernel {
  automatic = 0,
  tensor_core = 1,
  generic = 2,
  tensor_core_alt = 3,
  wgmma = 4,
  wgmma_alt = 5,
  wgmma_one_launch = 6,
  tensor_core_one_launch = 7,
  wgmma_ws = 8,
  wgmma_ws_alt = 9
};

// FA2's host-side normalisation of the call (fa2::normalize in contract/fa2_forward.hpp,
// mha_varlen_fwd's order) applied to the params: causal is dropped when max_seqlen_q == 1,
// causal sets window_right = 0, the single-query GQA swap, windows not smaller than
// max_seqlen_k become unlimited, one-sided windows get max_seqlen_k. Idempotent.
void fa2_normalize(VarlenFwdParams& p);

// Which kernel `launch_varlen_fwd` runs for these params on the current device, e.g.
// "varlen_fwd_wgmma<bf16,d128,checked>", "varlen_fwd_tc<bf16,d128,warp32rows,checked>" or
// "varlen_fwd_generic<fp32,checked>".
std::string varlen_fwd_kernel_name(const VarlenFwdParams& p, Checks checks, AttnKernel which = AttnKernel::automatic);
bool varlen_fwd_has_tensor_core_path(const VarlenFwdParams& p);
// The shape has a wgmma kernel, the build carries it and the current device runs it (9.0).
bool varlen_fwd_has_wgmma_path(const VarlenFwdParams& p);

// Launches the forward (after fa2_normalize). With max_seqlen_k <= 0 FA2 launches nothing
// and zero-fills out / sets LSE to +inf; this does the same.
void launch_varlen_fwd(const VarlenFwdParams& p, Checks checks, cudaStream_t stream = nullptr,
                       AttnKernel which = AttnKernel::automatic);

// ---- varlen attention backward (kernels/varlen_attention_bwd*.cu) ---------------------
// FA2's three launches (kernel_params.hpp VarlenBwdParams), and the group sum of dk / dv
// when H > Hk. The backend runs each step through checked_launch (one record per launch);
// `launch_varlen_bwd` enqueues all of them (benchmarks).
enum class BwdStep { preprocess = 0, key_blocks = 1, convert_dq = 2, group_sum = 3 };
const char* to_string(BwdStep s);

// mha_varlen_bwd's adjustments of the call and FA2's geometry (fa2::bwd::normalize), and
// the workspaces' shapes: fills p.kernel, p.dq_accum_shape, p.softmax_d_shape. Idempotent.
void fa2_bwd_normalize(VarlenBwdParams& p);
// The checked tensor-core backward covers this call: bf16/fp16, head_dim 64, 96, 128, 192 or 256.
bool varlen_bwd_supported(const VarlenBwdParams& p);
// Why the kernels cannot run this call (element type, head dim, FA2's tile), or "".
std::string varlen_bwd_unsupported(const VarlenBwdParams& p);
// "varlen_bwd_tc<bf16,d128,m32,checked>" (m: the key-block kernel's query rows per step)
std::string varlen_bwd_kernel_name(const VarlenBwdParams& p, Checks checks);
// The fp32 workspaces as FA2 allocates them for this call (elements): softmax_d, and
// dq_accum with all its copies (and the elements of one copy).
struct BwdWorkspace {
  int64_t softmax_d = 0, dq_accum = 0, dq_accum_split = 0;
};
BwdWorkspace varlen_bwd_workspace(const VarlenBwdParams& p);
// The steps this call runs, in order (group_sum only when H > Hk).
std::vector<BwdStep> varlen_bwd_steps(const VarlenBwdParams& p);
void launch_varlen_bwd_step(const VarlenBwdParams& p, BwdStep step, Checks checks, cudaStream_t stream = nullptr);
void launch_varlen_bwd(const VarlenBwdParams& p, Checks checks, cudaStream_t stream = nullptr);

// Fill helpers for the backend: NaN poison (outputs are poisoned before each launch).
void launch_fill_nan(void* data, int64_t elements, ElemType elem, cudaStream_t stream = nullptr);
void launch_fill_f32(float* data, int64_t elements, float value, cudaStream_t stream = nullptr);

// ---- build facts ----------------------------------------------------------------------
// The architectures the kernels were compiled for (nvcc's __CUDA_ARCH_LIST__, "800,900").
const char* compiled_architectures();
// cudaFuncGetAttributes of one kernel: the SASS and PTX versions the driver loaded.
void probe_kernel_versions(int* binary_version, int* ptx_version);

// ---- internal: the instantiated kernels ----------------------------------------------
// Each kernel family's per-type files (kernels/varlen_attention_tc_{bf16,fp16}.cu,
// kernels/varlen_attention_bwd_tc_{bf16,fp16}.cu, kernels/sm90a/*.cu: one element type per
// file, so the instantiations compile in parallel) name the instantiation a call needs; the
// launchers (kernels/varlen_attention.cu, kernels/varlen_attention_bwd.cu) launch it.
namespace detail {
template <class Params, class... Extra>
struct KernelEntry {
  void (*fn)(Params, Extra...) = nullptr;  // the __global__ function (it takes its arguments by value)
  int threads = 0;                         // threads per CTA
  int smem = 0;                            // dynamic shared memory per CTA, bytes
};
using FwdKernel = KernelEntry<VarlenFwdParams>;
using BwdKernel = KernelEntry<VarlenBwdParams>;
// Sets the kernel's dynamic shared-memory limit and launches it on `stream`; the launch's own
// error is left to the caller's check (cudaGetLastError), as a <<<...>>> launch leaves it.
void launch_kernel(const FwdKernel& k, dim3 grid, const VarlenFwdParams& p, cudaStream_t stream);
void launch_kernel(const BwdKernel& k, dim3 grid, const VarlenBwdParams& p, cudaStream_t stream);

// A forward kernel's launches: the unchecked kernel, or the checked form's two (main: the
// CTAs whose accesses all lie inside their buffers, with the unchecked body; fallback: a
// persistent launch running the others with the checked body), or, benchmarks only
// (checked_one_launch, a build with ATTN_DOCTOR_FWD_ONE_LAUNCH), the checked body on every
// CTA in one launch, as before the two-launch form.
enum class FwdForm { unchecked, checked, checked_one_launch };
struct FwdKernels {
  FwdKernel main;
  FwdKernel fallback;  // the checked form only (fn null otherwise)
};
// The mma.sync forward (head_dim 64, 96, 128, 192, 256 with block_m 128, and 256 with 64;
// alt_shape: its other warp layout, head dims 64 and 128 in a build with
// ATTN_DOCTOR_TC_BOTH_SHAPES). Throws LaunchConfigError for a shape it lacks. The _wide
// (96, 192) and _d256 files hold the larger head dims' instantiations.
FwdKernels varlen_fwd_tc_bf16(int head_dim, int block_m, FwdForm form, bool alt_shape);
FwdKernels varlen_fwd_tc_fp16(int head_dim, int block_m, FwdForm form, bool alt_shape);
FwdKernels varlen_fwd_tc_wide_bf16(int head_dim, int block_m, FwdForm form, bool alt_shape);
FwdKernels varlen_fwd_tc_wide_fp16(int head_dim, int block_m, FwdForm form, bool alt_shape);
FwdKernels varlen_fwd_tc_d256_bf16(int block_m, FwdForm form);
FwdKernels varlen_fwd_tc_d256_fp16(int block_m, FwdForm form);
void launch_varlen_fwd_generic(const VarlenFwdParams& p, bool checked, cudaStream_t stream);
// kernels/sm90a/ (present when the build carries sm_90a: ATTN_DOCTOR_WITH_WGMMA): the wgmma
// forward (alt: its other tile shape, ATTN_DOCTOR_WGMMA_ALT, bf16) and the wgmma backward's
// key-block kernel, each with, in its checked form, the fallback kernel of the CTAs (key
// blocks) it leaves.
FwdKernels varlen_fwd_wgmma_bf16(int head_dim, FwdForm form, bool alt);  // head dims 64, 128, 192
FwdKernels varlen_fwd_wgmma_fp16(int head_dim, FwdForm form, bool alt);
FwdKernels varlen_fwd_wgmma_d192_bf16(FwdForm form);  // head dim 192's own files
FwdKernels varlen_fwd_wgmma_d192_fp16(FwdForm form);
// The warp-specialised wgmma forward at head dim 128 (varlen_attention_wgmma_ws.cuh), its
// first launch only: unchecked, or (checked) the checked form's first launch, whose second is
// the wgmma kernel's fallback; alt: without ping-pong (bf16). It takes the tensor maps of q, k
// and v beside the params (FwdTmaMaps, kernels/tma_maps.hpp: CUDA headers), which the checked
// form's first launch loads its in-bounds tiles with.
using FwdWsKernel = KernelEntry<VarlenFwdParams, FwdTmaMaps>;
FwdWsKernel varlen_fwd_wgmma_ws_bf16(bool checked, bool alt);
FwdWsKernel varlen_fwd_wgmma_ws_fp16(bool checked, bool alt);
// The warp-specialised kernel at head dim 64 (benchmarks, bf16; a build with
// ATTN_DOCTOR_WGMMA_WS_D64, else LaunchConfigError): AttnKernel::wgmma_ws at head dim 64.
FwdWsKernel varlen_fwd_wgmma_ws_d64_bf16(bool checked);
// The warp-specialised backward's key-block kernel (varlen_attention_bwd_wgmma_ws.cuh) takes the
// tensor maps of q, k, v and dout beside the params (BwdTmaMaps, kernels/tma_maps.hpp). Its
// checked form loads through them, so it runs only on a call that has all four; its unchecked
// form (a benchmarks' build) takes none.
using BwdWsKernel = KernelEntry<VarlenBwdParams, BwdTmaMaps>;
struct BwdWgmmaKernels {
  BwdKernel main;
  BwdWsKernel ws;      // when set, it runs the key blocks in main's place (checked: where the maps are)
  BwdKernel fallback;  // checked form only (fn null otherwise)
};
void launch_kernel(const BwdWsKernel& k, dim3 grid, const VarlenBwdParams& p, const BwdTmaMaps& maps,
                   cudaStream_t stream);
BwdWgmmaKernels varlen_bwd_wgmma_bf16(int head_dim, bool checked);
BwdWgmmaKernels varlen_bwd_wgmma_fp16(int head_dim, bool checked);
// Whether the current device runs the sm_90a kernels (compute capability 9.0, a build with
// sm_90a, the image loads); asked once per device.
bool device_runs_wgmma();
// The backward's mma.sync key-block kernel, block_m query rows per step (0: the head dim's
// default).
BwdKernel varlen_bwd_tc_bf16(int head_dim, int block_m, bool checked);
BwdKernel varlen_bwd_tc_fp16(int head_dim, int block_m, bool checked);
BwdKernel varlen_bwd_tc_d96_bf16(int block_m, bool checked);  // head dim 96's own file
BwdKernel varlen_bwd_tc_d96_fp16(int block_m, bool checked);
// head dims 192 and 256 (varlen_attention_bwd_split.cuh), a file per head dim and type
BwdKernel varlen_bwd_tc_d192_bf16(int block_m, bool checked);
BwdKernel varlen_bwd_tc_d192_fp16(int block_m, bool checked);
BwdKernel varlen_bwd_tc_d256_bf16(int block_m, bool checked);
BwdKernel varlen_bwd_tc_d256_fp16(int block_m, bool checked);
}  // namespace detail

}  // namespace ad::kern
