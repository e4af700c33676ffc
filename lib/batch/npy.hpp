// A strict reader for NumPy `.npy` files (format versions 1.0, 2.0 and 3.0) holding the
// integer and boolean arrays a batch file may reference: masks, position ids, cu_seqlens.
// Anything else (object arrays, floats, Fortran order, truncated or padded data, a header
// that is not the exact dict numpy writes) is rejected with a precise message.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "batch/batch.hpp"

namespace ad {

// `label` names the file in messages, `json_path` the place in the batch file that referenced
// it. Throws InputError.
IntTensor parse_npy(std::string_view bytes, const std::string& label, const std::string& json_path,
                    const LoadLimits& limits);
IntTensor read_npy_file(const std::filesystem::path& path, const std::string& json_path,
                        const LoadLimits& limits);

// The header of any .npy (float ones too: q, k, out...) without reading its data: what an
// importer learns from a tensor dump (dtype and shape). Reads at most 64 KiB + 12 bytes;
// checks the format as parse_npy does and that the data fills the file. Throws InputError.
struct NpyHeader {
  std::string descr;  // as written, e.g. "<f2"
  bool fortran_order = false;
  std::vector<int64_t> shape;
};
NpyHeader read_npy_header(const std::filesystem::path& path, const std::string& json_path, const LoadLimits& limits);

// Writes a C-order little-endian .npy (version 1.0); used by tests, benchmarks and tools.
std::string make_npy(const IntTensor& tensor);

}  // namespace ad
