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

BwdTmaMaps bwd_tma_maps(const VarlenBwdParams& p) {
  BwdTmaMaps m{};
  m.has_q = encode(m.q, p.q, p, kBwdTmaQueryRows);
  m.has_dout = encode(m.dout, p.dout, p, kBwdTmaQueryRows);
  m.has_k = encode(m.k, p.k, p, kBwdTmaKeyRows);
  m.has_v = encode(m.v, p.v, p, kBwdTmaKeyRows);
  return m;
}

}  // namespace ad::kern
