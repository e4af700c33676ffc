// Element types: the batch format's model dtypes and the dtypes of index and mask tensors
// (from `.npy` files or `tensors` overrides). The ground floor: the loader, the checks, the
// plan and the report all name them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ad {

enum class DType { boolean, int8, int16, int32, int64, uint8, fp16, bf16, fp32, fp64, fp8_e4m3 };

std::string to_string(DType t);
std::optional<DType> parse_dtype(std::string_view name);  // "bf16", "bfloat16", "int32", ...
bool is_floating(DType t);
int dtype_bytes(DType t);

}  // namespace ad
