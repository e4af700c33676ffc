// Element-type names (vocab/dtype.hpp): the batch format's spellings plus the torch/numpy
// aliases users paste.
#include "vocab/dtype.hpp"

namespace ad {

std::string to_string(DType t) {
  switch (t) {
    case DType::boolean: return "bool";
    case DType::int8: return "int8";
    case DType::int16: return "int16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp32: return "fp32";
    case DType::fp64: return "fp64";
    case DType::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"bool", DType::boolean},      {"int8", DType::int8},          {"int16", DType::int16},
      {"int32", DType::int32},       {"int64", DType::int64},        {"uint8", DType::uint8},
      {"fp16", DType::fp16},         {"float16", DType::fp16},       {"half", DType::fp16},
      {"bf16", DType::bf16},         {"bfloat16", DType::bf16},      {"fp32", DType::fp32},
      {"float32", DType::fp32},      {"float", DType::fp32},         {"fp64", DType::fp64},
      {"float64", DType::fp64},      {"fp8_e4m3", DType::fp8_e4m3},  {"float8_e4m3fn", DType::fp8_e4m3},
      {"long", DType::int64},        {"int", DType::int32},
  };
  std::string_view n = name;
  if (n.substr(0, 6) == "torch.") n.remove_prefix(6);
  for (const auto& a : kAliases)
    if (a.name == n) return a.type;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::fp16 || t == DType::bf16 || t == DType::fp32 || t == DType::fp64 ||
         t == DType::fp8_e4m3;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::boolean:
    case DType::int8:
    case DType::uint8:
    case DType::fp8_e4m3: return 1;
    case DType::int16:
    case DType::fp16:
    case DType::bf16: return 2;
    case DType::int32:
    case DType::fp32: return 4;
    case DType::int64:
    case DType::fp64: return 8;
  }
  return 0;
}

}  // namespace ad
