// Device helpers shared by the kernels: the access recorder, element conversions, and
// the sm_80 warp-level primitives (cp.async, ldmatrix, mma.sync m16n8k16) the attention
// kernel is built from. PTX semantics: NVIDIA PTX ISA, "Warp-level matrix instructions"
// (mma.m16n8k16 fragment layouts, ldmatrix) and "cp.async".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "contract/access_record.hpp"

namespace ad::kern {

// ---------------------------------------------------------------------------------------
// the access record

// Records `n` refused accesses, the first of them `a` at launch-order key `key`
// (contract/access_record.hpp: counting mode adds to the count and lowers the smallest index
// and key, and the first arrival fills the details; detail mode fills them for `key` ==
// target_order only). The host reads the record after the launch has completed, so no
// further ordering is needed. The access comes by address: a call takes its arguments in
// registers that must be free at every call site, and a kernel at its register cap pays for
// each one there (16 scalar arguments made the checked wgmma kernels spill 2-4x more).
__device__ __noinline__ inline void record_access(AccessRecord* rec, const Access* a, uint64_t key, uint64_t n) {
  if (rec == nullptr) return;
  if (rec->detail_mode != 0) {
    if (key != rec->target_order) return;
  } else {
    atomicMin(reinterpret_cast<long long*>(&rec->min_index), static_cast<long long>(a->index));
    atomicMin(reinterpret_cast<unsigned long long*>(&rec->order), static_cast<unsigned long long>(key));
    const unsigned long long previous =
        atomicAdd(reinterpret_cast<unsigned long long*>(&rec->count), static_cast<unsigned long long>(n));
    if (previous != 0) return;
  }
  rec->first = *a;
  rec->thread = static_cast<int32_t>(threadIdx.x);
}

// The same from scalars, built where it is called (in the refusal branches only).
// (m, b, h): the program's coordinates.
__device__ __forceinline__ void record_violation(AccessRecord* rec, Buffer buffer, AccessKind kind, Unit unit,
                                                 Region region, int64_t index, int64_t bound, int64_t m, int64_t b,
                                                 int64_t h, int64_t segment, int64_t row, int64_t head, int64_t tile,
                                                 uint64_t key, uint64_t n) {
  const Access a{.buffer = buffer, .kind = kind, .unit = unit, .region = region, .index = index, .bound = bound,
                 .block = {m, b, h}, .segment = segment, .row = row, .head = head, .tile = tile};
  record_access(rec, &a, key, n);
}

// ---------------------------------------------------------------------------------------
// element types

template <class T> struct Elem;
template <> struct Elem<__nv_bfloat16> {
  using pair = __nv_bfloat162;
  __device__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  __device__ static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  __device__ static uint32_t pack(float a, float b) {
    __nv_bfloat162 p = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&p);
  }
};
template <> struct Elem<__half> {
  using pair = __half2;
  __device__ static float to_float(__half x) { return __half2float(x); }
  __device__ static __half from_float(float x) { return __float2half_rn(x); }
  __device__ static uint32_t pack(float a, float b) {
    __half2 p = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&p);
  }
};
template <> struct Elem<float> {
  __device__ static float to_float(float x) { return x; }
  __device__ static float from_float(float x) { return x; }
};

// ---------------------------------------------------------------------------------------
// sm_80 primitives

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous global -> shared copy (L2 only: .cg).
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src));
}
// Programmatic dependent launch (PTX ISA "griddepcontrol", compute capability 9.0; both are
// no-ops on a kernel launched without it and compile to nothing before sm_90). A primary
// kernel's CTA lets the dependent kernel launch (it launches once every CTA of the primary has
// done so or exited); the dependent kernel waits for the primary's completion and the
// visibility of its writes.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem_row)));
}

// D = A(16x16, row) * B(16x8, col) + D, fp32 accumulators.
template <class T> struct Mma;
template <> struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma<__half> {
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

}  // namespace ad::kern
