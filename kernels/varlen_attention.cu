// Varlen attention forward: the generic (any head dim, any element type) kernel, the fill
// kernels the backend uses for poison, and the launcher that normalises the call the way
// FA2's host code does, picks the kernel and launches it (every attention kernel's launch,
// the backward's too, goes through detail::launch_kernel below). The mma.sync tensor-core
// kernel is in varlen_attention.cuh (instantiated in varlen_attention_tc_{bf16,fp16}.cu), the
// Hopper (wgmma, sm_90a) kernel in sm90a/ (its own translation units and target architecture).
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "cuda_check.hpp"
#include "device_common.cuh"
#include "launch.hpp"
#include "tma_maps.hpp"
#include "varlen_attention.cuh"

namespace ad::kern {

namespace attn {

// One warp per query row, the row's head-dim elements spread over the lanes (D <= 256:
// at most 8 per lane), one key at a time with a warp reduction. Slow, but exact in its
// semantics for every head dim the tool accepts (32, 80, 96, 256, not multiples of 8) and
// for fp32 inputs; the same segment/window/coverage rules as the tensor-core kernel. An
// out-of-bounds K or V row reads as zeros there too, so both kernels compute the same.
template <class T, bool Checked>
__global__ void __launch_bounds__(kGenericThreads) varlen_fwd_generic_kernel(const VarlenFwdParams p) {
  constexpr int kPerLane = 8;
  const QueryTile tile = fwd_tile(p, p.block_m);
  if (skips<Checked>(p, tile)) return;
  const int m_block = tile.at.x, b = tile.at.y, h = tile.at.z, row0 = tile.row0;
  const Segment seg = tile.seg;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int D = p.head_dim;
  const KeyPipelineParams kpipe = key_pipeline(p);
  const ValuePipelineParams vpipe = value_pipeline(p);
  const int h_kv = h / kpipe.group;
  const fa2::Flags flags = fa2_flags(p, 1);
  const int64_t kv_head = p.seqlenq_ngroups_swapped ? -1 : int64_t(h);
  const SoftmaxScale sc = softmax_scale_of(p);  // softmax.cuh, as the tensor-core kernels
  const float scale_nat = sc.nat, scale_log2 = sc.log2, cap_in = sc.cap_in;
  const T* q = static_cast<const T*>(p.q.data);
  const T* k = static_cast<const T*>(kpipe.src.data);
  const T* v = static_cast<const T*>(vpipe.src.data);
  T* out = static_cast<T*>(p.out.data);
  // Checked form: the keys at or past k's (v's) rows, a suffix of the segment's keys.
  const int64_t k_valid = int64_t(kpipe.src.rows) - int64_t(seg.start_k);
  const int64_t v_valid = int64_t(vpipe.src.rows) - int64_t(seg.start_k);

  for (int r = warp; r < p.block_m; r += kGenericThreads / 32) {
    const int lr = row0 + r;
    if (lr >= seg.len_q) break;
    const QueryRow qr = query_row(p, seg, b, h, lr);
    bool q_ok = true;
    if constexpr (Checked) {
      if (qr.row >= uint64_t(p.q.rows)) {
        if (lane == 0)
          record_row(p, tile.at, p.q.buffer, AccessKind::read, Unit::rows, int64_t(qr.row), p.q.rows, int64_t(qr.row),
                     qr.head, m_block, order::kRead, lr);
        q_ok = false;
      }
    }
    float qv[kPerLane], acc[kPerLane];
    const T* qrow = q + (int64_t(qr.row) * p.q.heads + qr.head) * D;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      qv[i] = (q_ok && d < D) ? Elem<T>::to_float(qrow[d]) : 0.f;
      acc[i] = 0.f;
    }
    const fa2::KeyLimits kl = fa2::row_keys(lr, seg.len_q, seg.len_k, flags);
    // [kl.lo, j_read): keys of which k or v is inside its buffer, key by key; [j_read, kl.hi):
    // both past their buffers (zeros), recorded and folded into the softmax at once below.
    int64_t j_read = kl.hi;
    if constexpr (Checked) {
      const int64_t inside = k_valid > v_valid ? k_valid : v_valid;
      j_read = inside < kl.lo ? kl.lo : (inside < kl.hi ? inside : kl.hi);
    }
    float m = -INFINITY, l = 0.f;
    for (int64_t j = kl.lo; j < j_read; ++j) {
      const uint64_t row = uint64_t(seg.start_k) + uint64_t(j);
      bool k_ok = true, v_ok = true;
      if constexpr (Checked) {
        if (row >= uint64_t(kpipe.src.rows)) {
          if (lane == 0)
            record_row(p, tile.at, kpipe.src.buffer, AccessKind::read, Unit::rows, int64_t(row), kpipe.src.rows,
                       int64_t(row), kv_head, m_block, order::kKeyRead, j);
          k_ok = false;
        }
        if (row >= uint64_t(vpipe.src.rows)) {
          if (lane == 0)
            record_row(p, tile.at, vpipe.src.buffer, AccessKind::read, Unit::rows, int64_t(row), vpipe.src.rows,
                       int64_t(row), kv_head, m_block, order::kKeyRead, j | int64_t(order::kValueBit));
          v_ok = false;
        }
      }
      const T* krow = k + (int64_t(row) * kpipe.src.heads + h_kv) * D;
      const T* vrow = v + (int64_t(row) * vpipe.src.heads + h_kv) * D;
      float dot = 0.f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (k_ok && d < D) dot = fmaf(qv[i], Elem<T>::to_float(krow[d]), dot);
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      const float s = p.softcap > 0.f ? p.softcap * tanhf(dot * cap_in) : dot;
      const float m_new = fmaxf(m, s);
      const float corr = exp2f((m - m_new) * scale_log2);
      const float pj = exp2f((s - m_new) * scale_log2);
      l = l * corr + pj;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        const float vv = (v_ok && d < D) ? Elem<T>::to_float(vrow[d]) : 0.f;
        acc[i] = fmaf(pj, vv, acc[i] * corr);
      }
      m = m_new;
    }
    if (Checked && j_read < kl.hi) {
      // n keys read as zeros: score 0 (softcap(0) = 0), value 0. The first rescales the row
      // to max(m, 0); each then adds exp2(-max * scale) to the sum.
      const int64_t n = kl.hi - j_read;
      const uint64_t row = uint64_t(seg.start_k) + uint64_t(j_read);
      if (lane == 0) {
        record_row(p, tile.at, kpipe.src.buffer, AccessKind::read, Unit::rows, int64_t(row), kpipe.src.rows, int64_t(row),
                   kv_head, m_block, order::kKeyRead, j_read, uint64_t(n));
        record_row(p, tile.at, vpipe.src.buffer, AccessKind::read, Unit::rows, int64_t(row), vpipe.src.rows, int64_t(row),
                   kv_head, m_block, order::kKeyRead, j_read | int64_t(order::kValueBit), uint64_t(n));
      }
      const float m_new = fmaxf(m, 0.f);
      const float corr = exp2f((m - m_new) * scale_log2);
      const float pj = exp2f((0.f - m_new) * scale_log2);
      l = l * corr + pj * float(n);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] *= corr;
      m = m_new;
    }
    const bool empty = l == 0.f || l != l;
    const float inv = empty ? 1.f : 1.f / l;
    const float lse = empty ? INFINITY : m * scale_nat + logf(l);
    bool out_ok = true;
    if constexpr (Checked) {
      if (qr.row >= uint64_t(p.out.rows)) {
        if (lane == 0)
          record_row(p, tile.at, p.out.buffer, AccessKind::write, Unit::rows, int64_t(qr.row), p.out.rows,
                     int64_t(qr.row), qr.head, m_block, order::kOutWrite, lr);
        out_ok = false;
      }
    }
    if (Checked && out_ok && lane == 0) count_row_write(p, qr);
    if (lane == 0) write_lse<Checked>(p, tile.at, qr, lr, lse);
    if (out_ok) {
      T* orow = out + (int64_t(qr.row) * p.out.heads + qr.head) * D;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < D) orow[d] = Elem<T>::from_float(acc[i] * inv);
      }
    }
  }
}

}  // namespace attn

namespace {

template <class T>
__global__ void fill_kernel(T* data, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    data[i] = value;
}

template <class T>
void fill(T* data, int64_t n, T value, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  fill_kernel<T><<<unsigned(blocks), 256, 0, stream>>>(data, n, value);
  AD_CUDA_CHECK(cudaGetLastError());
}

void check_config(bool ok, const std::string& what) {
  if (!ok) throw cuda::LaunchConfigError("varlen attention forward: " + what);
}

// A kernel entry's launch with its arguments (the params, and the warp-specialised forward's
// tensor maps). `dependent`: launched as the stream's previous kernel's programmatic dependent
// (compute capability 9.0: it may start once every CTA of that kernel has called
// pdl_launch_dependents).
template <class Entry, class... Args>
void launch_entry(const Entry& k, dim3 grid, cudaStream_t stream, bool dependent, const Args&... a) {
  const void* fn = reinterpret_cast<const void*>(k.fn);
  AD_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem));
  void* args[] = {const_cast<Args*>(&a)...};
  if (!dependent) {
    (void)cudaLaunchKernel(fn, grid, dim3(unsigned(k.threads)), args, size_t(k.smem), stream);
    return;
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(unsigned(k.threads));
  config.dynamicSmemBytes = size_t(k.smem);
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  (void)cudaLaunchKernelExC(&config, fn, args);
}

#ifdef ATTN_DOCTOR_WITH_WGMMA
// Whether this process can run the sm_90a kernels on the current device: their image loads
// only on compute capability 9.0.
bool wgmma_loadable() {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(detail::varlen_fwd_wgmma_bf16(64, detail::FwdForm::checked, false).main.fn)) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}
#endif

}  // namespace

void detail::launch_kernel(const FwdKernel& k, dim3 grid, const VarlenFwdParams& p, cudaStream_t stream) {
  launch_entry(k, grid, stream, false, p);
}

namespace {
// The checked forward's launches: the first on the launch grid, then, where the form has one, the
// second (fwd_checked_fallback in varlen_attention.cuh): a persistent grid of at most two CTAs per
// SM, each taking the launch grid's CTAs a block of threads at a time.
// On compute capability 9.0 the second launch is the first's programmatic dependent
// (fwd_checked_fallback), unless ATTN_DOCTOR_NO_PDL is set in the environment (read once: the
// benchmarks' same-process comparison, and a way out should a driver mishandle it).
bool fwd_dependent_launch(int major) {
  static const bool disabled = std::getenv("ATTN_DOCTOR_NO_PDL") != nullptr;
  return major >= 9 && !disabled;
}
void launch_fwd_fallback(const detail::FwdKernel& fallback, dim3 grid, const VarlenFwdParams& p, cudaStream_t stream) {
  if (fallback.fn == nullptr) return;
  int dev = 0, sms = 0, major = 0;
  AD_CUDA_CHECK(cudaGetDevice(&dev));
  AD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  AD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  const int64_t ctas = int64_t(grid.x) * grid.y * grid.z;
  const int64_t passes = (ctas + fallback.threads - 1) / fallback.threads;
  launch_entry(fallback, dim3(unsigned(std::min<int64_t>(passes, 2 * int64_t(sms)))), stream,
               fwd_dependent_launch(major), p);
}
void launch_fwd(const detail::FwdKernels& k, dim3 grid, const VarlenFwdParams& p, cudaStream_t stream) {
  detail::launch_kernel(k.main, grid, p, stream);
  launch_fwd_fallback(k.fallback, grid, p, stream);
}
detail::FwdForm fwd_form(bool checked, bool one_launch) {
  return !checked ? detail::FwdForm::unchecked : one_launch ? detail::FwdForm::checked_one_launch : detail::FwdForm::checked;
}
}  // namespace
void detail::launch_kernel(const BwdKernel& k, dim3 grid, const VarlenBwdParams& p, cudaStream_t stream) {
  launch_entry(k, grid, stream, false, p);
}
void detail::launch_kernel(const BwdWsKernel& k, dim3 grid, const VarlenBwdParams& p, const BwdTmaMaps& maps,
                           cudaStream_t stream) {
  launch_entry(k, grid, stream, false, p, maps);
}

#define AD_STRINGIFY_(...) #__VA_ARGS__
#define AD_STRINGIFY(...) AD_STRINGIFY_(__VA_ARGS__)
const char* compiled_architectures() {
#ifdef __CUDA_ARCH_LIST__
#ifdef ATTN_DOCTOR_WITH_WGMMA
  return AD_STRINGIFY(__CUDA_ARCH_LIST__) ",900a";  // kernels/sm90a/: the wgmma attention forward
#else
  return AD_STRINGIFY(__CUDA_ARCH_LIST__);
#endif
#else
  return "";
#endif
}

void probe_kernel_versions(int* binary_version, int* ptx_version) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, fill_kernel<float>) == cudaSuccess) {
    *binary_version = attr.binaryVersion;
    *ptx_version = attr.ptxVersion;
  } else {
    cudaGetLastError();
    *binary_version = *ptx_version = 0;
  }
}

void launch_fill_nan(void* data, int64_t elements, ElemType elem, cudaStream_t stream) {
  switch (elem) {
    case ElemType::fp32:
      fill<float>(static_cast<float*>(data), elements, std::numeric_limits<float>::quiet_NaN(), stream);
      break;
    case ElemType::bf16:
      fill<uint16_t>(static_cast<uint16_t*>(data), elements, uint16_t(0x7FC0), stream);  // bf16 qNaN
      break;
    case ElemType::fp16:
      fill<uint16_t>(static_cast<uint16_t*>(data), elements, uint16_t(0x7E00), stream);  // fp16 qNaN
      break;
  }
}

void launch_fill_f32(float* data, int64_t elements, float value, cudaStream_t stream) {
  fill<float>(data, elements, value, stream);
}

void fa2_normalize(VarlenFwdParams& p) {
  if (p.normalized) return;
  p.normalized = true;
  const fa2::Normalized n = fa2::normalize(fa2::Call{p.max_seqlen_q, p.max_seqlen_k, p.num_heads, p.num_heads_k,
                                                     p.head_dim, p.causal, p.window_left, p.window_right, false});
  if (n.swapped) {
    p.ngroups = int32_t(n.ngroups);
    p.num_heads = int32_t(n.num_heads);
    p.max_seqlen_q = int32_t(n.max_seqlen_q);
    p.seqlenq_ngroups_swapped = true;
  }
  p.causal = n.causal;
  p.window_left = int32_t(n.window_left);
  p.window_right = int32_t(n.window_right);
}

bool varlen_fwd_has_tensor_core_path(const VarlenFwdParams& p) {
  const int d = p.head_dim;
  return p.elem != ElemType::fp32 && (d == 64 || d == 96 || d == 128 || d == 192 || d == 256) &&
         attn::tc_block_m_ok(d, p.block_m);
}

// Whether the current device runs the sm_90a kernels: compute capability 9.0 exactly (sm_90a
// code runs nowhere else) and the image loads. Asked once per device.
bool detail::device_runs_wgmma() {
#ifdef ATTN_DOCTOR_WITH_WGMMA
  static std::atomic<int8_t> known[64] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  int8_t k = known[dev].load(std::memory_order_relaxed);
  if (k == 0) {
    int major = 0, minor = 0;
    const bool cc90 = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                      major == 9 && minor == 0;
    cudaGetLastError();
    k = cc90 && wgmma_loadable() ? 2 : 1;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 2;
#else
  return false;
#endif
}

namespace {

enum class Chosen {
  wgmma, wgmma_alt, wgmma_one_launch, wgmma_ws, wgmma_ws_alt, mma_sync, mma_sync_alt, mma_sync_one_launch, generic
};

Chosen choose_kernel(const VarlenFwdParams& p, AttnKernel which) {
  switch (which) {
    case AttnKernel::wgmma: return Chosen::wgmma;
    case AttnKernel::wgmma_alt: return Chosen::wgmma_alt;
    case AttnKernel::wgmma_one_launch: return Chosen::wgmma_one_launch;
    case AttnKernel::wgmma_ws: return Chosen::wgmma_ws;
    case AttnKernel::wgmma_ws_alt: return Chosen::wgmma_ws_alt;
    case AttnKernel::tensor_core: return Chosen::mma_sync;
    case AttnKernel::tensor_core_alt: return Chosen::mma_sync_alt;
    case AttnKernel::tensor_core_one_launch: return Chosen::mma_sync_one_launch;
    case AttnKernel::generic: return Chosen::generic;
    case AttnKernel::automatic: break;
  }
  // Head dim 128: the warp-specialised kernel, 1.12-1.18x the wgmma kernel on an H100
  // (bench/results/fwd-ws-h100-2026-11-27); one CTA a tile: a persistent form ran at
  // 0.82-1.00x it (bench/results/fwd-persistent-h100-2026-11-27).
  if (varlen_fwd_has_wgmma_path(p)) return p.head_dim == 128 ? Chosen::wgmma_ws : Chosen::wgmma;
  return varlen_fwd_has_tensor_core_path(p) ? Chosen::mma_sync : Chosen::generic;
}

}  // namespace

// Head dims 64, 128 and 192 with 128-row tiles (96 and 256 run the mma.sync kernel on a Hopper
// device too: kernels/sm90a/varlen_attention_wgmma.cuh says why).
namespace {
bool wgmma_shape(const VarlenFwdParams& p) {
  return varlen_fwd_has_tensor_core_path(p) && (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 192) &&
         p.block_m == attn::kBlockM;
}
}  // namespace
bool varlen_fwd_has_wgmma_path(const VarlenFwdParams& p) { return wgmma_shape(p) && detail::device_runs_wgmma(); }

std::string varlen_fwd_kernel_name(const VarlenFwdParams& p, Checks checks, AttnKernel which) {
  const Chosen k = choose_kernel(p, which);
  const bool ws = k == Chosen::wgmma_ws || k == Chosen::wgmma_ws_alt;
  const bool wg = k == Chosen::wgmma || k == Chosen::wgmma_alt || k == Chosen::wgmma_one_launch || ws;
  std::string name = ws                     ? "varlen_fwd_wgmma_ws<"
                     : wg                   ? "varlen_fwd_wgmma<"
                     : k == Chosen::generic ? "varlen_fwd_generic<"
                                            : "varlen_fwd_tc<";
  name += to_string(p.elem);
  if (wg)
    name += ",d" + std::to_string(p.head_dim) + (k == Chosen::wgmma_alt || k == Chosen::wgmma_ws_alt ? ",alt"
                                                 : k == Chosen::wgmma_one_launch  ? ",one_launch"
                                                                                  : "");
  const bool tc = k == Chosen::mma_sync || k == Chosen::mma_sync_alt || k == Chosen::mma_sync_one_launch;
  if (tc) {
    const int mt = k == Chosen::mma_sync_alt ? 3 - attn::kDefaultMT : attn::default_mt(p.head_dim);
    name += ",d" + std::to_string(p.head_dim) + ",warp" + std::to_string(16 * mt) + "rows" +
            (k == Chosen::mma_sync_one_launch ? ",one_launch" : "");
  }
  name += std::string(",") + to_string(checks) + ">";
  return name;
}

void launch_varlen_fwd(const VarlenFwdParams& p_in, Checks checks, cudaStream_t stream, AttnKernel which) {
  VarlenFwdParams p = p_in;
  fa2_normalize(p);
  const bool checked = checks == Checks::checked;
  check_config(p.num_heads_k > 0 && p.num_heads > 0 && p.num_heads % p.num_heads_k == 0,
               "num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_heads_k " +
                   std::to_string(p.num_heads_k));
  check_config(p.head_dim > 0 && p.head_dim <= 256, "head_dim " + std::to_string(p.head_dim) + " not in [1, 256]");
  check_config(p.cu_seqlens_q.data != nullptr && p.cu_seqlens_k.data != nullptr, "cu_seqlens missing");
  check_config(p.cu_seqlens_q.size == int64_t(p.batch) + 1 && p.cu_seqlens_k.size == int64_t(p.batch) + 1,
               "cu_seqlens_q/k must hold batch + 1 entries");
  check_config(!checked || p.record != nullptr, "checked launch without a violation record");
  if (p.max_seqlen_k <= 0) {
    // flash_api.cpp: "If seqlen_k == 0, then we have an empty tensor": out = 0, lse = +inf.
    const int64_t out_bytes = p.out.rows * int64_t(p.out.heads) * p.head_dim * elem_bytes(p.elem);
    if (out_bytes > 0) AD_CUDA_CHECK(cudaMemsetAsync(p.out.data, 0, size_t(out_bytes), stream));
    launch_fill_f32(p.lse, p.lse_size, INFINITY, stream);
    return;
  }
  check_config(p.block_m > 0, "block_m must be positive");
  const int64_t grid_x = fa2_grid_m(p);
  check_config(grid_x > 0 && p.batch > 0,
               "empty launch grid (" + std::to_string(grid_x) + ", " + std::to_string(p.batch) + ", " +
                   std::to_string(p.num_heads) + "): invalid configuration argument");
  check_config(p.batch <= 65535 && p.num_heads <= 65535,
               "grid (" + std::to_string(grid_x) + ", " + std::to_string(p.batch) + ", " + std::to_string(p.num_heads) +
                   ") exceeds the 65535 limit of grid.y/grid.z: invalid argument");
  const Chosen k = choose_kernel(p, which);
  const dim3 grid(unsigned(launch_grid_m(p)), p.batch, p.num_heads);
  if (k == Chosen::wgmma_ws || k == Chosen::wgmma_ws_alt) {
    // The warp-specialised kernel (kernels/sm90a/varlen_attention_wgmma_ws.cuh), head dim 128.
    // Checked: its first launch runs the CTAs whose accesses all lie inside the buffers, the
    // wgmma kernel's second launch the others (the same predicate, fwd_cta_in_bounds).
    const bool d64 = p.head_dim == 64 && k == Chosen::wgmma_ws && p.elem == ElemType::bf16;  // benchmarks
    check_config(wgmma_shape(p) && (p.head_dim == 128 || d64), "no warp-specialised wgmma kernel for " +
                                                          std::string(to_string(p.elem)) + " head_dim " +
                                                          std::to_string(p.head_dim) + " block_m " +
                                                          std::to_string(p.block_m));
    check_config(detail::device_runs_wgmma(), "the wgmma kernel needs a compute capability 9.0 device and a build with "
                                              "sm_90a (ATTN_DOCTOR_WGMMA)");
#ifdef ATTN_DOCTOR_WITH_WGMMA
    const bool alt = k == Chosen::wgmma_ws_alt;
    const bool bf16 = p.elem == ElemType::bf16;
    const detail::FwdWsKernel main = d64    ? detail::varlen_fwd_wgmma_ws_d64_bf16(checked)
                                     : bf16 ? detail::varlen_fwd_wgmma_ws_bf16(checked, alt)
                                            : detail::varlen_fwd_wgmma_ws_fp16(checked, alt);
    // The checked form's first launch loads its in-bounds tiles through these maps; the
    // unchecked kernel (cp.async only) gets none.
    const FwdTmaMaps maps = checked ? fwd_tma_maps(p) : FwdTmaMaps{};
    launch_entry(main, grid, stream, false, p, maps);
    if (checked)
      launch_fwd_fallback((bf16 ? detail::varlen_fwd_wgmma_bf16(p.head_dim, detail::FwdForm::checked, false)
                                : detail::varlen_fwd_wgmma_fp16(p.head_dim, detail::FwdForm::checked, false))
                              .fallback,
                          grid, p, stream);
#endif
  } else if (k == Chosen::wgmma || k == Chosen::wgmma_alt || k == Chosen::wgmma_one_launch) {
    check_config(wgmma_shape(p), "no wgmma kernel for " + std::string(to_string(p.elem)) + " head_dim " +
                                     std::to_string(p.head_dim) + " block_m " + std::to_string(p.block_m));
    check_config(detail::device_runs_wgmma(), "the wgmma kernel needs a compute capability 9.0 device and a build with "
                                      "sm_90a (ATTN_DOCTOR_WGMMA)");
#ifdef ATTN_DOCTOR_WITH_WGMMA
    const bool alt = k == Chosen::wgmma_alt;
    const detail::FwdForm form = fwd_form(checked, k == Chosen::wgmma_one_launch);
    launch_fwd(p.elem == ElemType::bf16 ? detail::varlen_fwd_wgmma_bf16(p.head_dim, form, alt)
                                        : detail::varlen_fwd_wgmma_fp16(p.head_dim, form, alt),
               grid, p, stream);
#endif
  } else if (k == Chosen::mma_sync || k == Chosen::mma_sync_alt || k == Chosen::mma_sync_one_launch) {
    check_config(varlen_fwd_has_tensor_core_path(p), "no tensor-core kernel for " + std::string(to_string(p.elem)) +
                                                         " head_dim " + std::to_string(p.head_dim));
    const bool alt = k == Chosen::mma_sync_alt;
    const detail::FwdForm form = fwd_form(checked, k == Chosen::mma_sync_one_launch);
    launch_fwd(p.elem == ElemType::bf16 ? detail::varlen_fwd_tc_bf16(p.head_dim, p.block_m, form, alt)
                                        : detail::varlen_fwd_tc_fp16(p.head_dim, p.block_m, form, alt),
               grid, p, stream);
  } else {
    detail::launch_varlen_fwd_generic(p, checked, stream);
  }
}

namespace detail {

template <class T>
void launch_generic_t(const VarlenFwdParams& p, bool checked, cudaStream_t stream) {
  const dim3 grid(unsigned(launch_grid_m(p)), p.batch, p.num_heads);
  if (checked)
    attn::varlen_fwd_generic_kernel<T, true><<<grid, attn::kGenericThreads, 0, stream>>>(p);
  else
    attn::varlen_fwd_generic_kernel<T, false><<<grid, attn::kGenericThreads, 0, stream>>>(p);
}

void launch_varlen_fwd_generic(const VarlenFwdParams& p, bool checked, cudaStream_t stream) {
  switch (p.elem) {
    case ElemType::bf16: launch_generic_t<__nv_bfloat16>(p, checked, stream); break;
    case ElemType::fp16: launch_generic_t<__half>(p, checked, stream); break;
    case ElemType::fp32: launch_generic_t<float>(p, checked, stream); break;
  }
}

}  // namespace detail

}  // namespace ad::kern
