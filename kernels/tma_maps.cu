// The host side of the forward's and the backward's tensor maps (tma_maps.hpp): cuTensorMapEncodeTiled, taken from
// the driver through the CUDA runtime (cudaGetDriverEntryPointByVersion), so that the library
// does not link libcuda (the runtime is linked statically: CMakeLists.txt, bench/gpu/capi.cpp).
#include "tma_maps.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace ad::kern {

namespace {

// The driver's encoder, asked for once per process (null when the driver has none).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return PFN_cuTensorMapEncodeTiled_v12000(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// (rows, heads, head_dim) row-major, innermost first for the map: head_dim, heads, rows; boxes
// of 64 columns x 1 head x box_rows rows.
template <class Role, class Pointer>
int32_t encode(CUtensorMap& map, const RowOperand<Role, Pointer>& op, const VarlenParamsBase& p, int box_rows) {
  const int eb = elem_bytes(p.elem);
  if (p.elem == ElemType::fp32 || !tma_operand_ok(op, p.head_dim, eb)) return 0;
  const PFN_cuTensorMapEncodeTiled_v12000 fn = tensor_map_encoder();
  if (fn == nullptr) return 0;
  const cuuint64_t dims[3] = {cuuint64_t(p.head_dim), cuuint64_t(op.heads), cuuint64_t(op.rows)};
  const cuuint64_t strides[2] = {cuuint64_t(p.head_dim) * eb, cuuint64_t(p.head_dim) * eb * cuuint64_t(op.heads)};
  const cuuint32_t box[3] = {64, 1, cuuint32_t(box_rows)};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUtensorMapDataType type =
      p.elem == ElemType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return fn(&map, type, 3, const_cast<void*>(static_cast<const void*>(op.data)), dims, strides, box, unit,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
             ? 1
             : 0;
}

}  // namespace

FwdTmaMaps fwd_tma_maps(const VarlenFwdParams& p) {
  FwdTmaMaps m{};
#if ATTN_DOCTOR_FWD_TMA
  m.has_q = encode(m.q, p.q, p, kTmaBoxRows);
  m.has_k = encode(m.k, p.k, p, kTmaBoxRows);
  m.has_v = encode(m.v, p.v, p, kTmaBoxRows);
#else
  (void)p;
#endif
  return m;
}

namespace {

// dq_accum as [rows][row stride] fp32 (tma_maps.hpp): the base 16-byte aligned, the row
// stride a multiple of 16 bytes, at most 2^31 rows.
int32_t encode_dq(CUtensorMap& map, const VarlenBwdParams& p) {
  const int64_t stride = p.dq_accum_shape.row_stride();
  if (p.dq_accum == nullptr || reinterpret_cast<uintptr_t>(p.dq_accum) % 16 != 0 || stride <= 0 || stride % 4 != 0 ||
      stride * 4 >= (int64_t(1) << 40) || p.dq_accum_size <= 0)
    return 0;
  const int64_t rows = (p.dq_accum_size + stride - 1) / stride;
  if (rows >= (int64_t(1) << 31)) return 0;
  const PFN_cuTensorMapEncodeTiled_v12000 fn = tensor_map_encoder();
  if (fn == nullptr) return 0;
  const cuuint64_t dims[2] = {cuuint64_t(stride), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(stride) * 4};
  const cuuint32_t box[2] = {cuuint32_t(kBwdTmaDqCols), cuuint32_t(kBwdTmaQueryRows)};
  const cuuint32_t unit[2] = {1, 1};
  return fn(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, p.dq_accum, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) ==
                 CUDA_SUCCESS
             ? 1
             : 0;
}

}  // namespace

BwdTmaMaps bwd_tma_maps(const VarlenBwdParams& p) {
  BwdTmaMaps m{};
  m.has_dq = encode_dq(m.dq, p);
  m.has_q = encode(m.q, p.q, p, kBwdTmaQueryRows);
  m.has_dout = encode(m.dout, p.dout, p, kBwdTmaQueryRows);
  m.has_k = encode(m.k, p.k, p, kBwdTmaKeyRows);
  m.has_v = encode(m.v, p.v, p, kBwdTmaKeyRows);
  return m;
}

}  // namespace ad::kern
