// Small text helpers every message shares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ad {

// A tensor shape as a message quotes it: as Python prints a shape tuple, "(2, 1, 5, 5)" and
// "(3,)", or as PyTorch writes a size list in its errors, "[3, 3, 3, 64]".
enum class ShapeStyle { python_tuple, torch_list };
inline std::string shape_text(const std::vector<int64_t>& shape, ShapeStyle style = ShapeStyle::python_tuple) {
  const bool tuple = style == ShapeStyle::python_tuple;
  std::string s = tuple ? "(" : "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (tuple && shape.size() == 1) s += ",";
  return s + (tuple ? ")" : "]");
}

}  // namespace ad
