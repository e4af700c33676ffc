// Strict .npy parsing. Format reference: numpy/lib/format.py (NEP 1): magic "\x93NUMPY",
// major/minor version, a little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), then a
// Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with
// spaces and ended by '\n', then the raw data.
#include "batch/npy.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

namespace ad {
namespace {

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& label, const std::string& json_path)
      : s_(text), label_(label), path_(json_path) {}

  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw InputError(label_, path_, "a .npy header with " + expected, found);
  }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  std::string near() const {
    std::string_view rest = s_.substr(i_, 20);
    std::string out = "'";
    for (char c : rest) out += (c >= 32 && c < 127) ? c : '?';
    return out + "' at header byte " + std::to_string(i_);
  }
  void expect_char(char c) {
    skip_ws();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("'") + c + "'", near());
    ++i_;
  }
  bool try_char(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string read_string() {
    skip_ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("a quoted string", near());
    char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' || out.size() > 64) fail("a short plain string", near());
      out += s_[i_++];
    }
    if (i_ >= s_.size()) fail("a closing quote", "the end of the header");
    ++i_;
    return out;
  }
  bool read_bool() {
    skip_ws();
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail("True or False", near());
  }
  std::vector<int64_t> read_shape() {
    expect_char('(');
    std::vector<int64_t> shape;
    while (true) {
      skip_ws();
      if (try_char(')')) break;
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("a dimension (non-negative integer)", near());
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("a dimension below 2^63", near());
        v = v * 10 + (s_[i_++] - '0');
        if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // numpy < 1.x on Python 2 wrote 3L
      }
      shape.push_back(v);
      if (shape.size() > 8) fail("at most 8 dimensions", "more");
      skip_ws();
      if (try_char(',')) continue;
      expect_char(')');
      break;
    }
    return shape;
  }
  void finish() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\x00')) ++i_;
    if (i_ != s_.size() - 1 || s_.back() != '\n') fail("to end with spaces and a newline", near());
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  const std::string& label_;
  const std::string& path_;
};

struct Descr {
  DType type;
  int size;
  bool big_endian;
};

Descr parse_descr(const std::string& d, const HeaderParser& hp) {
  if (d.size() < 3) hp.fail("descr such as '<i8' or '|b1'", "'" + d + "'");
  char order = d[0];
  std::string code = d.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    hp.fail("a byte-order mark (<, >, | or =) in descr", "'" + d + "'");
  struct K {
    const char* code;
    DType type;
    int size;
  };
  static const K kinds[] = {{"b1", DType::boolean, 1}, {"i1", DType::int8, 1}, {"u1", DType::uint8, 1},
                            {"i2", DType::int16, 2},   {"i4", DType::int32, 4}, {"i8", DType::int64, 8}};
  for (const auto& k : kinds)
    if (code == k.code) return {k.type, k.size, order == '>' && k.size > 1};
  hp.fail("an integer or bool dtype (b1, i1, u1, i2, i4, i8)", "descr '" + d + "'");
}

// The header of a .npy: the format checks every reader shares. `bytes` may end anywhere after
// the header (read_npy_header reads no data).
struct ParsedHeader {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

ParsedHeader parse_header(std::string_view bytes, const std::string& label, const std::string& json_path,
                          std::optional<size_t> file_size = std::nullopt) {
  auto fail = [&](const std::string& expected, const std::string& found) -> void {
    throw InputError(label, json_path, expected, found);
  };
  const size_t total = file_size.value_or(bytes.size());
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    fail("a .npy file (magic \\x93NUMPY)", bytes.size() < 10 ? std::to_string(bytes.size()) + " bytes"
                                                             : "other leading bytes");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  unsigned minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(".npy format version 1.0, 2.0 or 3.0", "version " + std::to_string(major) + "." + std::to_string(minor));
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) fail("a 4-byte header length", "a truncated file");
    header_len = 0;
    for (int k = 3; k >= 0; --k) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + k]);
    offset = 12;
  }
  if (header_len > 65536 || offset + header_len > bytes.size())
    fail("a header of at most 64 KiB inside the file",
         "header length " + std::to_string(header_len) + " with " + std::to_string(total) + " bytes in the file");
  std::string_view header = bytes.substr(offset, header_len);
  HeaderParser hp(header, label, json_path);

  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  hp.expect_char('{');
  while (!hp.try_char('}')) {
    std::string key = hp.read_string();
    hp.expect_char(':');
    if (key == "descr" && !descr) descr = hp.read_string();
    else if (key == "fortran_order" && !fortran) fortran = hp.read_bool();
    else if (key == "shape" && !shape) shape = hp.read_shape();
    else hp.fail("only the keys 'descr', 'fortran_order', 'shape' (once each)", "key '" + key + "'");
    if (!hp.try_char(',')) {
      hp.expect_char('}');
      break;
    }
  }
  hp.finish();
  if (!descr || !fortran || !shape) hp.fail("the keys 'descr', 'fortran_order' and 'shape'", "a key missing");
  return {*descr, *fortran, *shape, offset + header_len};
}

}  // namespace

IntTensor parse_npy(std::string_view bytes, const std::string& label, const std::string& json_path,
                    const LoadLimits& limits) {
  auto fail = [&](const std::string& expected, const std::string& found) -> void {
    throw InputError(label, json_path, expected, found);
  };
  ParsedHeader ph = parse_header(bytes, label, json_path);
  HeaderParser hp({}, label, json_path);
  std::optional<std::string> descr = ph.descr;
  std::optional<bool> fortran = ph.fortran;
  std::optional<std::vector<int64_t>> shape = ph.shape;
  const size_t offset = ph.data_offset, header_len = 0;
  Descr d = parse_descr(*descr, hp);
  if (*fortran) fail("a C-order array (fortran_order False)", "fortran_order True (save with np.ascontiguousarray)");

  // every dimension within the widths' cap, also beside a zero one: a (0, 2^62) array holds no
  // element, but its width would reach the checks
  for (size_t k = 0; k < shape->size(); ++k)
    if ((*shape)[k] > limits.max_dimension)
      fail("dimensions of at most " + std::to_string(limits.max_dimension),
           "dimension " + std::to_string(k) + " of " + std::to_string((*shape)[k]));
  int64_t count = 1;
  for (int64_t dim : *shape) {
    if (dim != 0 && count > limits.max_array_elements / dim)
      fail("at most " + std::to_string(limits.max_array_elements) + " elements", "shape with more");
    count *= dim;
  }
  if (count > limits.max_array_elements)
    fail("at most " + std::to_string(limits.max_array_elements) + " elements", std::to_string(count));
  size_t data_bytes = static_cast<size_t>(count) * static_cast<size_t>(d.size);
  size_t available = bytes.size() - offset - header_len;
  if (available != data_bytes)
    fail(std::to_string(data_bytes) + " data bytes for the shape and dtype",
         std::to_string(available) + (available < data_bytes ? " (truncated file)" : " (trailing bytes)"));

  IntTensor t;
  t.shape = *shape;
  t.dtype = d.type;
  t.values.resize(static_cast<size_t>(count));
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset + header_len);
  for (int64_t k = 0; k < count; ++k, p += d.size) {
    uint64_t raw = 0;
    for (int b = 0; b < d.size; ++b) {
      int src = d.big_endian ? (d.size - 1 - b) : b;
      raw |= static_cast<uint64_t>(p[src]) << (8 * b);
    }
    int64_t v;
    switch (d.type) {
      case DType::boolean: v = raw != 0; break;
      case DType::uint8: v = static_cast<int64_t>(raw); break;
      case DType::int8: v = static_cast<int8_t>(raw); break;
      case DType::int16: v = static_cast<int16_t>(raw); break;
      case DType::int32: v = static_cast<int32_t>(raw); break;
      default: v = static_cast<int64_t>(raw); break;
    }
    t.values[static_cast<size_t>(k)] = v;
  }
  return t;
}

IntTensor read_npy_file(const std::filesystem::path& path, const std::string& json_path, const LoadLimits& limits) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(path.string(), json_path, "a readable .npy file", ec.message());
  if (static_cast<int64_t>(size) > limits.max_npy_bytes)
    throw InputError(path.string(), json_path, "a file of at most " + std::to_string(limits.max_npy_bytes) + " bytes",
                     std::to_string(size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), json_path, "a readable .npy file", "it cannot be opened");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size))
    throw InputError(path.string(), json_path, std::to_string(size) + " bytes", "a short read");
  return parse_npy(bytes, path.string(), json_path, limits);
}

NpyHeader read_npy_header(const std::filesystem::path& path, const std::string& json_path, const LoadLimits& limits) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(path.string(), json_path, "a readable .npy file", ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), json_path, "a readable .npy file", "it cannot be opened");
  // the magic, the version, the length and a header of at most 64 KiB: never the data
  const size_t want = static_cast<size_t>(std::min<uintmax_t>(size, 12 + 65536));
  std::string bytes(want, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(want));
  if (in.gcount() != static_cast<std::streamsize>(want))
    throw InputError(path.string(), json_path, std::to_string(want) + " bytes", "a short read");
  const std::string label = path.string();
  ParsedHeader ph = parse_header(bytes, label, json_path, static_cast<size_t>(size));
  NpyHeader h;
  h.descr = ph.descr;
  h.fortran_order = ph.fortran;
  h.shape = ph.shape;
  auto fail = [&](const std::string& expected, const std::string& found) {
    throw InputError(label, json_path, expected, found);
  };
  for (size_t k = 0; k < h.shape.size(); ++k)
    if (h.shape[k] > limits.max_dimension)
      fail("dimensions of at most " + std::to_string(limits.max_dimension),
           "dimension " + std::to_string(k) + " of " + std::to_string(h.shape[k]));
  // the item size is the descr's digits ('<f2' -> 2, '|V2' -> 2); the data must fill the file
  size_t digits = h.descr.find_first_of("0123456789");
  if (h.descr.size() < 3 || digits == std::string::npos || digits < 2 || h.descr.size() - digits > 2 ||
      h.descr.find_first_not_of("0123456789", digits) != std::string::npos)
    fail("a .npy header with a plain descr such as '<f2' or '<i4'", "descr '" + h.descr + "'");
  const uint64_t item = std::stoull(h.descr.substr(digits));
  const uint64_t available = static_cast<uint64_t>(size) - ph.data_offset;
  uint64_t need = item;
  bool beyond = false;
  for (int64_t dim : h.shape) {
    if (dim != 0 && need > available / static_cast<uint64_t>(dim)) beyond = true;
    need = beyond ? need : need * static_cast<uint64_t>(dim);
  }
  bool zero = std::find(h.shape.begin(), h.shape.end(), int64_t{0}) != h.shape.end();
  if (zero) need = 0, beyond = false;
  if (beyond || need != available) {
    std::string shape = "(";
    for (size_t k = 0; k < h.shape.size(); ++k) shape += (k ? ", " : "") + std::to_string(h.shape[k]);
    fail((beyond ? "the data of shape " + shape + ") of '" + h.descr + "'" : std::to_string(need) + " data bytes for the shape and dtype"),
         std::to_string(available) + " bytes" + (beyond || available < need ? " (truncated file)" : " (trailing bytes)"));
  }
  return h;
}

std::string make_npy(const IntTensor& tensor) {
  const char* descr = "<i8";
  int size = 8;
  switch (tensor.dtype) {
    case DType::boolean: descr = "|b1"; size = 1; break;
    case DType::int8: descr = "|i1"; size = 1; break;
    case DType::uint8: descr = "|u1"; size = 1; break;
    case DType::int16: descr = "<i2"; size = 2; break;
    case DType::int32: descr = "<i4"; size = 4; break;
    default: break;
  }
  std::string shape = "(";
  for (size_t k = 0; k < tensor.shape.size(); ++k) {
    shape += std::to_string(tensor.shape[k]);
    if (tensor.shape.size() == 1 || k + 1 < tensor.shape.size()) shape += ",";
    if (k + 1 < tensor.shape.size()) shape += " ";
  }
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  header.append(pad, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  for (int64_t v : tensor.values) {
    uint64_t raw = static_cast<uint64_t>(v);
    for (int b = 0; b < size; ++b) out += static_cast<char>((raw >> (8 * b)) & 0xff);
  }
  return out;
}

}  // namespace ad
