// The batch-file loader: JSON (batch-format.md, version 1) -> ad::Batch.
//
// Strict by design: unknown keys, wrong types, out-of-range values, ragged arrays, lengths
// beyond widths, files outside the batch file's folder and sizes past LoadLimits are errors
// that name the file, the JSON path, what was expected and what was found (exit 2).
#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "batch/batch.hpp"
#include "batch/collate.hpp"
#include "batch/json_node.hpp"
#include "batch/npy.hpp"
#include "util/checked_math.hpp"

namespace ad {

// intent.cpp
Intent derive_intent(const Batch& batch);
void validate_intent(const Batch& batch, const std::string& file, const std::string& path);

namespace {

constexpr int64_t kMaxHeads = 1 << 20;
constexpr int64_t kMaxHeadDim = 1 << 20;
constexpr int64_t kMaxIndex = int64_t{1} << 62;
constexpr int64_t kInt32Max = 2147483647;

// Tracks materialised elements across the whole batch.
struct Budget {
  const LoadLimits& limits;
  const std::string& file;
  int64_t used = 0;
  void take(int64_t n, const std::string& path) {
    if (n > limits.max_array_elements)
      throw InputError(file, path, "an array of at most " + std::to_string(limits.max_array_elements) + " elements",
                       std::to_string(n) + " elements");
    used += n;
    if (used > limits.max_total_elements)
      throw InputError(file, path,
                       "at most " + std::to_string(limits.max_total_elements) + " array elements in one batch",
                       std::to_string(used) + " so far");
  }
};

struct Loader {
  std::string file;              // label used in messages
  std::filesystem::path folder;  // anchors relative .npy paths
  const LoadLimits& limits;
  Budget budget{limits, file};

  // ---- nested integer arrays ------------------------------------------------------------

  // Dense nested array (rank 1..max_rank) of integers or booleans -> IntTensor. Rejects
  // ragged arrays and mixed booleans/integers.
  IntTensor dense(const Node& n, int max_rank) {
    if (!n.is_array()) n.fail("a nested array of integers");
    IntTensor t;
    // shape from the first element of each level
    const json* cur = &n.raw();
    while (cur->is_array()) {
      if (static_cast<int>(t.shape.size()) >= max_rank)
        n.fail("an array of rank at most " + std::to_string(max_rank), "deeper nesting");
      t.shape.push_back(static_cast<int64_t>(cur->size()));
      if (cur->empty()) break;
      cur = &(*cur)[0];
    }
    int64_t count = 1;
    for (int64_t d : t.shape) {
      if (d != 0 && count > limits.max_array_elements / d) count = limits.max_array_elements + 1;
      else count *= d;
    }
    budget.take(count, n.path());
    t.values.reserve(static_cast<size_t>(count));
    bool booleans = cur->is_boolean();
    t.dtype = booleans ? DType::boolean : DType::int64;
    fill(n, 0, t, booleans);
    return t;
  }

  void fill(const Node& n, size_t level, IntTensor& t, bool booleans) {
    const json& j = n.raw();
    if (level == t.shape.size()) {
      if (booleans) {
        if (!j.is_boolean()) n.fail("a boolean (the array's first element is a boolean)");
        t.values.push_back(j.get<bool>() ? 1 : 0);
      } else {
        if (j.is_boolean()) n.fail("an integer (the array's first element is an integer)");
        t.values.push_back(n.as_int());
      }
      return;
    }
    if (!j.is_array())
      n.fail("an array of " + std::to_string(t.shape[level]) + " elements (ragged array)");
    if (static_cast<int64_t>(j.size()) != t.shape[level])
      n.fail("an array of " + std::to_string(t.shape[level]) + " elements like its siblings (ragged array)");
    // Fast path for the innermost level.
    if (level + 1 == t.shape.size()) {
      for (size_t k = 0; k < j.size(); ++k) {
        const json& e = j[k];
        // (the JSON parser gives non-negative integers the unsigned type)
        if (!booleans && e.is_number_unsigned() && e.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          t.values.push_back(static_cast<int64_t>(e.get<uint64_t>()));
        } else if (!booleans && e.is_number_integer() && !e.is_number_unsigned()) {
          t.values.push_back(e.get<int64_t>());
        } else if (booleans && e.is_boolean()) {
          t.values.push_back(e.get<bool>() ? 1 : 0);
        } else {
          fill(n[k], level + 1, t, booleans);
        }
      }
      return;
    }
    for (size_t k = 0; k < j.size(); ++k) fill(n[k], level + 1, t, booleans);
  }

  std::filesystem::path resolve_file(const Node& n) {
    std::string rel = n.as_string();
    if (rel.empty()) n.fail("a file name relative to the batch file");
    std::error_code ec;
    auto base = std::filesystem::weakly_canonical(folder, ec);
    if (ec) base = folder;
    auto target = std::filesystem::weakly_canonical(base / rel, ec);
    if (ec) n.fail("a readable file next to the batch file", "\"" + rel + "\" (" + ec.message() + ")");
    auto mismatch = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
    if (mismatch.first != base.end())
      n.fail("a file inside the batch file's folder " + base.string(), "\"" + rel + "\", which resolves outside it");
    if (!std::filesystem::is_regular_file(target, ec))
      n.fail("an existing regular file", "\"" + rel + "\" (" + (ec ? ec.message() : "not a regular file") + ")");
    return target;
  }

  IntTensor npy(const Node& n, std::filesystem::path* resolved) {
    auto path = resolve_file(n);
    if (resolved) *resolved = path;
    IntTensor t;
    try {
      t = read_npy_file(path, n.path(), limits);
    } catch (const InputError& e) {
      // name the batch file (where the reference is) and the .npy file (what is wrong)
      throw InputError(file, n.path(), e.expected() + " in " + path.filename().string(), e.found());
    }
    budget.take(t.numel(), n.path());
    return t;
  }

  // ---- mask -----------------------------------------------------------------------------

  Mask mask(const Node& n, bool allow_four_d) {
    n.expect_object({"values", "lengths", "width", "padding_side", "file", "shape", "from", "style", "causal", "rank",
                     "level"});
    int encodings = n.has("values") + n.has("lengths") + n.has("file") + n.has("shape");
    if (encodings != 1)
      n.fail("exactly one mask encoding: \"values\", \"lengths\", \"file\" or \"shape\" (4-D)",
             std::to_string(encodings) + " encodings");
    auto forbid = [&](std::initializer_list<std::string_view> keys, const char* encoding) {
      for (auto k : keys)
        if (n.has(k))
          n.at(k).fail(std::string("no \"") + std::string(k) + "\" with the " + encoding + " encoding", "the key");
    };
    Mask m;
    if (auto v = n.get("values")) {
      forbid({"width", "padding_side", "from", "causal", "lengths"}, "dense");
      m.encoding = MaskEncoding::dense;
      m.tensor = dense(*v, 4);
      if (m.tensor.rank() < 1) v->fail("a non-empty nested array");
    } else if (auto l = n.get("lengths")) {
      forbid({"from", "style", "causal", "shape"}, "lengths");
      m.encoding = MaskEncoding::lengths;
      auto width = n.at("width").as_int(0, limits.max_dimension);
      auto lengths = l->as_int_array(0, limits.max_dimension, limits.max_array_elements);
      if (lengths.empty()) l->fail("at least one length");
      m.padding_side = n.has("padding_side") ? n.at("padding_side").as_enum({"right", "left"}) : "right";
      for (size_t i = 0; i < lengths.size(); ++i)
        if (lengths[i] > width)
          (*l)[i].fail("a length at most the width " + std::to_string(width), std::to_string(lengths[i]));
      int64_t rows = static_cast<int64_t>(lengths.size());
      if (width != 0 && rows > limits.max_array_elements / width)
        n.fail("a mask of at most " + std::to_string(limits.max_array_elements) + " entries",
               std::to_string(rows) + " x " + std::to_string(width));
      budget.take(rows * width, n.path());
      m.tensor.shape = {rows, width};
      m.tensor.dtype = DType::int64;
      m.tensor.values.assign(static_cast<size_t>(rows * width), 0);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t len = lengths[static_cast<size_t>(r)];
        int64_t begin = m.padding_side == "right" ? 0 : width - len;
        std::fill_n(m.tensor.values.begin() + r * width + begin, len, 1);
      }
    } else if (auto f = n.get("file")) {
      forbid({"width", "padding_side", "from", "causal"}, "file");
      m.encoding = MaskEncoding::file;
      m.tensor = npy(*f, &m.file);
      if (m.tensor.rank() < 1 || m.tensor.rank() > 4)
        f->fail("a mask of rank 1 to 4", "rank " + std::to_string(m.tensor.rank()));
    } else {
      if (!allow_four_d) n.fail("a 2-D mask encoding (\"values\", \"lengths\" or \"file\") inside \"from\"", "a 4-D mask");
      forbid({"width", "padding_side"}, "4-D");
      m.encoding = MaskEncoding::four_d;
      four_d(n, m);
    }
    // docs/spec/batch-format.md: "style" on a dense or file mask says how to read a
    // written-out 4-D mask: "additive" = non-zero entries hold the large negative value (masked),
    // "boolean" = non-zero entries are attended. Captured generate() masks use it.
    if (m.encoding == MaskEncoding::dense || m.encoding == MaskEncoding::file) {
      if (auto st = n.get("style")) {
        if (m.tensor.rank() != 4) st->fail("\"style\" only on a 4-D mask", "a mask of rank " + std::to_string(m.tensor.rank()));
        m.style = st->as_enum({"additive", "boolean"}) == "additive" ? MaskStyle::additive : MaskStyle::boolean;
      }
    }
    // docs/spec/batch-format.md: "level": "model" = the mask given to the model's forward (the
    // replay runs the release's mask preparation first); a 2-D mask only
    if (auto lv = n.get("level")) {
      m.model_level = lv->as_enum({"attention", "model"}) == "model";
      if (m.model_level && !allow_four_d) lv->fail("no \"level\" inside \"from\"", "\"model\"");
      if (m.model_level && m.tensor.rank() != 2)
        lv->fail("\"model\" only on a 2-D (B, S) mask", "a mask of rank " + std::to_string(m.tensor.rank()));
    }
    if (auto r = n.get("rank")) {
      int rank = static_cast<int>(r->as_int(2, 4));
      m.asserted_rank = rank;
      if (rank != m.tensor.rank())
        r->fail("the mask's actual rank " + std::to_string(m.tensor.rank()), "rank " + std::to_string(rank));
    }
    return m;
  }

  // The square mask transformers builds from a 2-D mask (_prepare_4d_causal_attention_mask
  // style): query q sits at absolute position (W - Q + q) where W is the 2-D mask's width;
  // key k is attended when the 2-D mask has it and (if causal) k <= that position. Columns
  // past W (a static cache longer than the mask) are therefore masked.
  void four_d(const Node& n, Mask& m) {
    auto shape = n.at("shape").as_int_array(0, limits.max_dimension, 8);
    if (shape.size() != 4) n.at("shape").fail("a 4-D shape [B, 1, Q, K]", std::to_string(shape.size()) + " dimensions");
    Mask from = mask(n.at("from"), false);
    if (from.tensor.rank() != 2)
      n.at("from").fail("a 2-D mask", "rank " + std::to_string(from.tensor.rank()));
    m.style = n.has("style") ? (n.at("style").as_enum({"additive", "boolean"}) == "additive" ? MaskStyle::additive
                                                                                              : MaskStyle::boolean)
                             : MaskStyle::additive;
    m.four_d_causal = n.has("causal") ? n.at("causal").as_bool() : true;
    int64_t B = shape[0], H1 = shape[1], Q = shape[2], K = shape[3];
    int64_t W = from.tensor.dim(1);
    if (B != from.tensor.dim(0))
      n.at("shape").fail("B equal to the rows of \"from\" (" + std::to_string(from.tensor.dim(0)) + ")", std::to_string(B));
    if (K < W || (!m.four_d_causal && K != W))
      n.at("shape").fail(std::string("K ") + (m.four_d_causal ? "at least" : "equal to") + " the width of \"from\" (" +
                             std::to_string(W) + ")",
                         std::to_string(K));
    if (H1 < 1 || Q < 1) n.at("shape").fail("positive head and query dimensions", "[" + std::to_string(B) + ", " +
                                                                                    std::to_string(H1) + ", " +
                                                                                    std::to_string(Q) + ", " +
                                                                                    std::to_string(K) + "]");
    int64_t count = 1;
    for (int64_t d : shape) {
      if (d != 0 && count > limits.max_array_elements / d) {
        count = limits.max_array_elements + 1;
        break;
      }
      count *= d;
    }
    budget.take(count, n.path() + "/shape");
    m.tensor.shape = shape;
    m.tensor.dtype = m.style == MaskStyle::boolean ? DType::boolean : DType::bf16;
    m.tensor.values.resize(static_cast<size_t>(count));
    int64_t* out = m.tensor.values.data();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H1; ++h)
        for (int64_t q = 0; q < Q; ++q) {
          int64_t pos = W - Q + q;
          for (int64_t k = 0; k < K; ++k) {
            bool attended = k < W && from.tensor.values[static_cast<size_t>(b * W + k)] != 0 &&
                            (!m.four_d_causal || k <= pos);
            *out++ = m.style == MaskStyle::boolean ? (attended ? 1 : 0) : (attended ? 0 : 1);
          }
        }
    m.from = std::move(from.tensor);
  }

  // ---- position ids ---------------------------------------------------------------------

  PositionIds position_ids(const Node& n, const std::optional<Mask>& attention_mask, const Model& model,
                           const Node& batch_node) {
    n.expect_object({"values", "file", "from", "lengths", "mrope", "level"});
    int encodings = n.has("values") + n.has("file") + n.has("from");
    if (encodings != 1)
      n.fail("exactly one position-ids encoding: \"values\", \"file\" or \"from\"", std::to_string(encodings) + " encodings");
    PositionIds p;
    p.mrope = n.has("mrope") && n.at("mrope").as_bool();
    p.model_level = n.has("level") && n.at("level").as_enum({"attention", "model"}) == "model";
    if (n.has("lengths") && !(n.has("from") && n.at("from").is_string() && n.at("from").as_string() == "packed"))
      n.at("lengths").fail("\"lengths\" only with \"from\": \"packed\"", "the key");
    if (auto v = n.get("values")) {
      p.encoding = PositionEncoding::dense;
      p.tensor = dense(*v, 3);
    } else if (auto f = n.get("file")) {
      p.encoding = PositionEncoding::file;
      p.tensor = npy(*f, &p.file);
    } else {
      auto from = n.at("from");
      std::string kind = from.as_enum({"mask", "packed", "arange"});
      if (kind == "mask") {
        p.encoding = PositionEncoding::from_mask;
        if (!attention_mask) from.fail("an attention_mask in the same batch (positions from the mask)", "none");
        const IntTensor& m = attention_mask->from ? *attention_mask->from : attention_mask->tensor;
        if (m.rank() != 2) from.fail("a 2-D attention mask", "rank " + std::to_string(m.rank()));
        // The generate() convention: cumsum(mask) - 1, padded slots set to 1.
        p.tensor.shape = m.shape;
        p.tensor.values.resize(m.values.size());
        budget.take(m.numel(), n.path());
        int64_t S = m.dim(1);
        for (int64_t r = 0; r < m.dim(0); ++r) {
          int64_t acc = 0;
          for (int64_t c = 0; c < S; ++c) {
            int64_t v = m.values[static_cast<size_t>(r * S + c)];
            acc += v;
            p.tensor.values[static_cast<size_t>(r * S + c)] = v == 0 ? 1 : acc - 1;
          }
        }
      } else if (kind == "packed") {
        p.encoding = PositionEncoding::packed;
        auto lengths_node = n.at("lengths");
        p.packed_lengths = lengths_node.as_int_array(1, limits.max_dimension, limits.max_array_elements);
        if (p.packed_lengths.empty()) lengths_node.fail("at least one length");
        int64_t total = 0;
        for (int64_t l : p.packed_lengths) {
          total += l;
          if (total > limits.max_array_elements) {
            budget.take(total, lengths_node.path());
          }
        }
        budget.take(total, lengths_node.path());
        p.tensor.shape = {1, total};
        p.tensor.values.reserve(static_cast<size_t>(total));
        for (int64_t l : p.packed_lengths)
          for (int64_t k = 0; k < l; ++k) p.tensor.values.push_back(model.position_origin + k);
      } else {
        p.encoding = PositionEncoding::arange;
        int64_t B = 0, S = 0;
        if (attention_mask) {
          const IntTensor& m = attention_mask->from ? *attention_mask->from : attention_mask->tensor;
          B = m.rank() >= 2 ? m.dim(0) : 1;
          S = m.dim(-1);
        } else if (batch_node.has("kv_length") || batch_node.has("query_length")) {
          B = batch_node.has("batch_size") ? batch_node.at("batch_size").as_int(1, limits.max_dimension) : 1;
          S = batch_node.has("query_length") ? batch_node.at("query_length").as_int(1, limits.max_dimension)
                                             : batch_node.at("kv_length").as_int(1, limits.max_dimension);
        } else {
          from.fail("an attention_mask or query_length/kv_length to size the arange", "neither");
        }
        if (S != 0 && B > limits.max_array_elements / S) budget.take(limits.max_array_elements + 1, n.path());
        budget.take(B * S, n.path());
        p.tensor.shape = {B, S};
        p.tensor.values.resize(static_cast<size_t>(B * S));
        for (int64_t r = 0; r < B; ++r)
          for (int64_t c = 0; c < S; ++c) p.tensor.values[static_cast<size_t>(r * S + c)] = c;
      }
    }
    if (p.tensor.rank() < 1 || p.tensor.rank() > 3)
      n.fail("position ids of rank 1 (S), 2 (B, S) or 3 (3, B, S)", "rank " + std::to_string(p.tensor.rank()));
    if (p.mrope && p.tensor.rank() != 3) {
      // replicate to (3, B, S) as multimodal models do for text tokens
      IntTensor t;
      int64_t B = p.tensor.rank() == 2 ? p.tensor.dim(0) : 1;
      int64_t S = p.tensor.dim(-1);
      budget.take(2 * p.tensor.numel(), n.path());
      t.shape = {3, B, S};
      t.dtype = p.tensor.dtype;
      t.values.reserve(p.tensor.values.size() * 3);
      for (int a = 0; a < 3; ++a) t.values.insert(t.values.end(), p.tensor.values.begin(), p.tensor.values.end());
      p.tensor = std::move(t);
    }
    if (p.mrope && p.tensor.dim(0) != 3)
      n.fail("mRoPE position ids of shape (3, B, S)", "first dimension " + std::to_string(p.tensor.dim(0)));
    return p;
  }

  // ---- sections -------------------------------------------------------------------------

  Environment environment(const Node& n) {
    n.expect_object({"transformers", "flash_attn", "flash_attn_4", "fla", "triton", "torch", "device", "gpu_arch", "trl",
                     "transformer_engine", "compile", "diffusers", "xformers", "axolotl", "flash_attn_cute"});
    Environment e;
    auto version = [&](const char* key) -> std::optional<Version> {
      auto v = n.get(key);
      if (!v) return std::nullopt;
      auto parsed = parse_version(v->as_string());
      if (!parsed) v->fail("a PEP 440 version such as \"4.44.0\"");
      return parsed;
    };
    e.transformers = version("transformers");
    e.flash_attn = version("flash_attn");
    e.triton = version("triton");
    e.torch = version("torch");
    e.fla = version("fla");
    e.flash_attn_4 = version("flash_attn_4");
    e.trl = version("trl");
    e.transformer_engine = version("transformer_engine");
    if (auto c = n.get("compile")) e.compile = c->as_enum({"none", "default", "fullgraph"});
    e.diffusers = version("diffusers");
    e.xformers = version("xformers");
    e.axolotl = version("axolotl");
    e.flash_attn_cute = version("flash_attn_cute");
    if (auto d = n.get("device")) e.device = device(*d);
    if (auto g = n.get("gpu_arch")) {
      e.gpu_arch = parse_gpu_arch(g->as_string());
      if (!e.gpu_arch) g->fail("a CUDA architecture such as \"sm_80\", \"sm_90a\", \"sm_100a\" or \"sm_120\"");
    }
    return e;
  }

  static bool valid_device(const std::string& s) {
    if (s == "cpu" || s == "cuda" || s == "meta") return true;
    if (s.rfind("cuda:", 0) != 0 || s.size() == 5 || s.size() > 9) return false;
    return std::all_of(s.begin() + 5, s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  std::string device(const Node& n) {
    std::string s = n.as_string();
    if (!valid_device(s)) n.fail("a device such as \"cuda:0\", \"cuda:1\" or \"cpu\"");
    return s;
  }

  // `name`, or its Hugging Face config.json spelling `alias` (copied from a model's config as
  // it is); given both ways, the two must agree.
  std::optional<int64_t> aliased_int(const Node& n, const char* name, const char* alias, int64_t min, int64_t max) {
    auto a = n.get(name), b = n.get(alias);
    if (!a && !b) return std::nullopt;
    if (a && b && a->as_int(min, max) != b->as_int(min, max))
      b->fail("the same value as /model/" + std::string(name) + " (" + std::to_string(a->as_int(min, max)) + ")",
              std::to_string(b->as_int(min, max)));
    return (a ? *a : *b).as_int(min, max);
  }

  Model model(const Node& n) {
    n.expect_object({"num_heads", "num_kv_heads", "head_dim", "hidden_size", "dtype", "causal", "sliding_window",
                     "softcap", "dropout", "deterministic", "architecture", "position_origin", "num_attention_heads",
                     "num_key_value_heads", "remote_code"});
    Model m;
    auto heads = aliased_int(n, "num_heads", "num_attention_heads", 1, kMaxHeads);
    if (!heads) n.at("num_heads");  // the required-key error
    m.num_heads = *heads;
    m.num_kv_heads = aliased_int(n, "num_kv_heads", "num_key_value_heads", 1, kMaxHeads).value_or(m.num_heads);
    if (auto h = n.get("hidden_size")) m.hidden_size = h->as_int(1, kMaxHeads * kMaxHeadDim);
    if (auto d = n.get("head_dim")) {
      m.head_dim = d->as_int(1, kMaxHeadDim);
    } else if (m.hidden_size && *m.hidden_size % m.num_heads == 0) {
      m.head_dim = *m.hidden_size / m.num_heads;  // what transformers derives for a config without head_dim
    } else {
      n.fail("\"head_dim\", or \"hidden_size\" divisible by the number of heads",
             m.hidden_size ? "hidden_size " + std::to_string(*m.hidden_size) + " and " + std::to_string(m.num_heads) + " heads"
                           : "neither");
    }
    if (auto d = n.get("dtype")) {
      auto t = parse_dtype(d->as_string());
      if (!t || !is_floating(*t) || *t == DType::fp64)
        d->fail("one of \"fp16\", \"bf16\", \"fp32\", \"fp8_e4m3\"");
      m.dtype = *t;
    }
    if (auto c = n.get("causal")) m.causal = c->as_bool();
    if (auto w = n.get("sliding_window")) m.sliding_window = w->as_int(0, limits.max_dimension);
    if (auto s = n.get("softcap")) m.softcap = s->as_number(0.0, 1e9);
    if (auto d = n.get("dropout")) m.dropout = d->as_number(0.0, 1.0);
    if (auto d = n.get("deterministic")) m.deterministic = d->as_bool();
    if (auto a = n.get("architecture")) {
      m.architecture = a->as_string();
      std::transform(m.architecture.begin(), m.architecture.end(), m.architecture.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
    if (auto o = n.get("position_origin")) {
      m.position_origin = o->as_int(0, 1 << 20);
      m.position_origin_given = true;
    }
    if (auto r = n.get("remote_code")) m.remote_code = r->as_bool();
    return m;
  }

  BatchInputs inputs(const Node& n, const Model& model) {
    n.expect_object({"attention_mask", "position_ids", "query_length", "kv_length", "batch_size", "cache", "stage",
                     "flash_kwargs", "seq_idx"});
    BatchInputs b;
    if (auto m = n.get("attention_mask")) b.attention_mask = mask(*m, true);
    if (auto p = n.get("position_ids")) b.position_ids = position_ids(*p, b.attention_mask, model, n);
    if (auto c = n.get("cache")) {
      c->expect_object({"kind", "max_cache_len", "past_length"});
      Cache cache;
      cache.kind = c->at("kind").as_enum({"dynamic", "static", "hybrid", "sliding"});
      if (auto v = c->get("max_cache_len")) cache.max_cache_len = v->as_int(0, limits.max_dimension);
      if (auto v = c->get("past_length")) cache.past_length = v->as_int(0, limits.max_dimension);
      b.cache = cache;
    }
    if (auto k = n.get("flash_kwargs")) {
      k->expect_object({"cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k"});
      FlashKwargs f;
      if (auto v = k->get("cu_seq_lens_q")) f.cu_seq_lens_q = v->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
      if (auto v = k->get("cu_seq_lens_k")) f.cu_seq_lens_k = v->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
      if (auto v = k->get("max_length_q")) f.max_length_q = v->as_int(-kMaxIndex, kMaxIndex);
      if (auto v = k->get("max_length_k")) f.max_length_k = v->as_int(-kMaxIndex, kMaxIndex);
      if (f.cu_seq_lens_q) budget.take(static_cast<int64_t>(f.cu_seq_lens_q->size()), k->path());
      if (f.cu_seq_lens_k) budget.take(static_cast<int64_t>(f.cu_seq_lens_k->size()), k->path());
      b.flash_kwargs = f;
    }

    // Shape facts the mask and position ids carry.
    std::optional<int64_t> rows, width;
    std::string rows_from, width_from;
    if (b.attention_mask) {
      const IntTensor& t = b.attention_mask->tensor;
      if (t.rank() >= 2) {
        rows = t.dim(0);
        rows_from = "the attention mask's rows";
      }
      width = t.dim(-1);
      width_from = "the attention mask's width";
    }
    std::optional<int64_t> pos_rows, pos_width;
    if (b.position_ids) {
      const IntTensor& t = b.position_ids->tensor;
      pos_rows = t.rank() == 1 ? 1 : t.dim(-2);
      pos_width = t.dim(-1);
    }
    if (auto v = n.get("batch_size")) {
      b.batch_size = v->as_int(1, limits.max_dimension);
      b.batch_size_given = true;
      if (rows && *rows != b.batch_size)
        v->fail("the batch size " + std::to_string(*rows) + " that " + rows_from + " imply", std::to_string(b.batch_size));
    } else if (rows) {
      b.batch_size = *rows;
    } else if (pos_rows) {
      b.batch_size = *pos_rows;
    } else {
      b.batch_size = 1;
    }
    if (auto v = n.get("kv_length")) {
      b.kv_length = v->as_int(1, limits.max_dimension);
      b.kv_length_given = true;
    } else if (width) {
      b.kv_length = *width;
    } else if (pos_width) {
      b.kv_length = *pos_width;
    }
    if (auto v = n.get("stage")) {
      b.stage = v->as_enum({"prefill", "decode"}) == "decode" ? CallStage::decode : CallStage::prefill;
      b.stage_given = true;
    }
    if (auto v = n.get("query_length")) {
      b.query_length = v->as_int(1, limits.max_dimension);
      b.query_length_given = true;
    } else if (b.stage_given && b.stage == CallStage::decode) {
      b.query_length = 1;
    } else if (pos_width && !width) {
      b.query_length = *pos_width;
    } else {
      b.query_length = b.kv_length;
    }
    if (b.kv_length == 0) {
      if (b.query_length_given) b.kv_length = b.query_length;
      else n.fail("an attention_mask, position_ids, kv_length or query_length to size the call", "none of them");
    }
    if (b.query_length == 0) b.query_length = b.kv_length;
    if (!b.stage_given) b.stage = b.query_length == 1 && b.kv_length > 1 ? CallStage::decode : CallStage::prefill;
    if (b.stage_given && b.stage == CallStage::decode && b.query_length != 1 && b.query_length_given)
      n.at("stage").fail("\"prefill\" for query_length " + std::to_string(b.query_length), "\"decode\"");
    if (pos_rows && *pos_rows != b.batch_size && *pos_rows != 1)
      n.at("position_ids").fail("position ids with " + std::to_string(b.batch_size) + " rows (the batch size) or 1",
                                std::to_string(*pos_rows) + " rows");
    // Overflow guard for B*L products used everywhere downstream: B x L < max_dimension, i.e.
    // B x L <= max_dimension - 1 (B = 2^20 rows of 2^20 tokens is refused).
    if (b.batch_size > (limits.max_dimension - 1) / std::max<int64_t>(1, std::max(b.query_length, b.kv_length)))
      n.fail("batch_size x length below " + std::to_string(limits.max_dimension),
             std::to_string(b.batch_size) + " x " + std::to_string(std::max(b.query_length, b.kv_length)));
    // seq_idx: the model kwarg a collator passes beside the flash kwargs, one id per query token
    if (auto s = n.get("seq_idx")) {
      IntTensor t = dense(*s, 2);
      if (t.dtype == DType::boolean) s->fail("integers", "booleans");
      if (t.rank() == 1) t.shape.insert(t.shape.begin(), 1);
      if (t.dim(-1) != b.query_length)
        s->fail("seq_idx " + std::to_string(b.query_length) + " wide (the query length)", std::to_string(t.dim(-1)) + " wide");
      if (t.dim(0) != 1 && t.dim(0) != b.batch_size)
        s->fail("seq_idx with " + std::to_string(b.batch_size) + " rows (the batch size) or 1", std::to_string(t.dim(0)) + " rows");
      t.dtype = DType::int32;
      b.seq_idx = std::move(t);
    }
    return b;
  }

  MaxSeqlenArg max_seqlen(const Node& n) {
    MaxSeqlenArg m;
    if (n.is_object()) {
      n.expect_object({"tensor"});
      m.value = n.at("tensor").as_int(-kMaxIndex, kMaxIndex);
      m.is_tensor = true;
    } else {
      if (!n.is_integer()) n.fail("an integer, or {\"tensor\": N} for a 0-d tensor");
      m.value = n.as_int(-kMaxIndex, kMaxIndex);
    }
    return m;
  }

  static int64_t largest_segment(const IntTensor& cu) {
    int64_t best = 0;
    if (cu.rank() != 1) return 0;
    // entries are within +-2^62, so a difference can reach 2^63: overflow-checked (a segment too
    // long for int64 is left to the checks, which report it)
    for (size_t i = 1; i < cu.values.size(); ++i)
      if (const auto length = checked::sub(cu.values[i], cu.values[i - 1])) best = std::max(best, *length);
    return best;
  }

  IntTensor cu_array(const Node& n) {
    IntTensor t = dense(n, 2);
    if (t.dtype == DType::boolean) n.fail("integers", "booleans");
    for (size_t i = 0; i < t.values.size(); ++i)
      if (t.values[i] < -kMaxIndex || t.values[i] > kMaxIndex)
        (t.rank() == 1 ? n[i] : n).fail("a value within +-2^62", std::to_string(t.values[i]));
    t.dtype = DType::int32;
    return t;
  }

  // The call-site facts of the varlen block: which API, and the arguments FA2 does not have.
  void call_site(const Node& n, ExplicitVarlen& v) {
    if (auto a = n.get("api")) {
      v.api = parse_api(a->as_string());
      if (!v.api) {
        std::string ids;
        for (std::string_view id : api_names()) ids += (ids.empty() ? "" : ", ") + std::string(id);
        a->fail("one of " + ids);
      }
      // the block holds cu_seqlens: a dense function takes none
      if (*v.api == Api::flash_attn_2_dense || *v.api == Api::flash_attn_3_dense || *v.api == Api::flash_attn_4_dense)
        a->fail("an API that takes cu_seqlens (a varlen block describes a varlen call)");
    }
    if (auto s = n.get("seqused_q")) v.seqused_q = s->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
    if (auto w = n.get("window_size")) {
      std::vector<int64_t> pair = w->as_int_array(-1, kMaxIndex, 2);
      if (pair.size() != 2) w->fail("[left, right], two integers >= -1", std::to_string(pair.size()) + " values");
      v.window_size = std::make_pair(pair[0], pair[1]);
    }
    if (auto b = n.get("binding")) v.binding = b->as_enum({"keyword", "positional"}) == "keyword" ? Bound::keyword : Bound::positional;
    if (auto p = n.get("pack_gqa")) v.pack_gqa = p->as_bool();
    if (auto s = n.get("num_splits")) v.num_splits = s->as_int(0, 1 << 20);
    if (auto g = n.get("enable_gqa")) v.enable_gqa = g->as_bool();
    te_thd(n, v);
    fa3_extras(n, v);
  }

  // A paged call's keys as the kernel addresses them (hopper/flash_api.cpp mha_fwd): sequence b
  // has seqlen_k = pages per sequence * page_size logical rows, the b-th such block of a
  // (batch_size_k * seqlen_k)-row view; logical row r lives in page page_table.flatten()[r /
  // page_size] at row r % page_size. cu_seqlens_k holds those blocks' offsets (the call passes
  // none), max_seqlen_k their length (flash_attn_with_kvcache passes none either).
  void paged_keys(const Node& n, ExplicitVarlen& v) {
    const PageTable& p = *v.page_table;
    const Node at = n.at("page_table");
    const auto seqlen = checked::mul(p.pages_per_seq, p.page_size);
    const auto rows = seqlen ? checked::mul(p.rows, *seqlen) : std::nullopt;
    if (!rows || *rows > kMaxIndex)
      at.fail("a page table whose rows x pages per sequence x page_size fits 2^62 key rows",
              std::to_string(p.rows) + " x " + std::to_string(p.pages_per_seq) + " x " + std::to_string(p.page_size));
    if (n.has("max_seqlen_k")) n.at("max_seqlen_k").fail("no max_seqlen_k beside page_table (mha_fwd takes pages per sequence x page_size)");
    budget.take(p.rows + 1, at.path());
    v.cu_seqlens_k = IntTensor{{p.rows + 1}, {}, DType::int32};
    for (int64_t b = 0; b <= p.rows; ++b) v.cu_seqlens_k.values.push_back(b * *seqlen);
    v.max_seqlen_k = {*seqlen, false};
  }

  // FlashAttention-3's page_table, qv and attention_chunk (docs/spec/batch-format.md): values as
  // passed; the host checks and the page_table.* invariants judge them.
  void fa3_extras(const Node& n, ExplicitVarlen& v) {
    for (const char* key : {"attention_chunk", "qv", "page_table"})
      if (n.has(key) && (!v.api || flash_attn_family(*v.api) < 3))
        n.at(key).fail("\"api\": a FlashAttention-3 / -4 API (e.g. \"flash_attn_3.kvcache\") beside " + std::string(key),
                       v.api ? "api " + to_string(*v.api) : std::string("no api"));
    if (auto c = n.get("attention_chunk")) v.attention_chunk = c->as_int(0, kMaxIndex);
    if (auto q = n.get("qv")) {
      q->expect_object({"head_dim", "dtype"});
      QvArg a;
      a.head_dim = q->at("head_dim").as_int(1, kMaxHeadDim);
      if (auto d = q->get("dtype")) {
        a.dtype = parse_dtype(d->as_string());
        if (!a.dtype) d->fail("a dtype such as \"bf16\", \"fp16\", \"fp32\"");
      }
      v.qv = a;
    }
    if (auto t = n.get("page_table")) {
      t->expect_object({"page_size", "num_pages", "table", "shape", "dtype"});
      // FA3's flash_attn_with_kvcache takes it; FA3's flash_attn_varlen_func does not (the binding
      // reports the TypeError); FA4's flash_attn_varlen_func takes one too
      if (n.has("cu_seqlens_k") || n.has("cu_seqlens_k_file"))
        t->fail("no cu_seqlens_k beside page_table (the keys come from the pages; seqused_k holds their counts)",
                "cu_seqlens_k");
      PageTable p;
      // C ints in mha_fwd
      p.page_size = t->at("page_size").as_int(1, kInt32Max);
      p.num_pages = t->at("num_pages").as_int(1, kInt32Max);
      if (t->has("table") == t->has("shape"))
        t->fail("exactly one of \"table\" and \"shape\"", t->has("table") ? "both" : "neither");
      if (auto a = t->get("table")) {
        IntTensor tab = dense(*a, 2);
        if (tab.dtype == DType::boolean) a->fail("integers", "booleans");
        if (tab.rank() != 2) a->fail("a 2-D array [batch_size_k][pages per sequence]", "rank " + std::to_string(tab.rank()));
        for (size_t i = 0; i < tab.values.size(); ++i)
          if (tab.values[i] < -kMaxIndex || tab.values[i] > kMaxIndex)
            a->fail("page indices within +-2^62", std::to_string(tab.values[i]));
        p.rows = tab.shape[0];
        p.pages_per_seq = tab.shape[1];
        p.values = std::move(tab.values);
      } else {
        const Node s = t->at("shape");
        const std::vector<int64_t> shape = s.as_int_array(0, kInt32Max, 2);
        if (shape.size() != 2) s.fail("[batch_size_k, pages per sequence], two integers >= 0", std::to_string(shape.size()) + " values");
        p.rows = shape[0];
        p.pages_per_seq = shape[1];
      }
      if (auto d = t->get("dtype")) {
        auto parsed = parse_dtype(d->as_string());
        if (!parsed || (*parsed != DType::int32 && *parsed != DType::int64)) d->fail("\"int32\" or \"int64\"");
        p.dtype = *parsed;
      }
      v.page_table = std::move(p);
    }
  }

  // Transformer Engine's THD arguments (docs/spec/transformer-engine-thd.md): values as passed;
  // the te.* invariants judge them.
  void te_thd(const Node& n, ExplicitVarlen& v) {
    for (const char* key : {"cu_seqlens_q_padded", "cu_seqlens_kv_padded", "pad_between_seqs", "attn_mask_type"})
      if (n.has(key) && v.api != Api::te_dot_product_attention)
        n.at(key).fail("\"api\": \"transformer_engine.dot_product_attention\" beside " + std::string(key) +
                       " (a Transformer Engine argument)",
                       v.api ? "api " + to_string(*v.api) : std::string("no api"));
    if (auto c = n.get("cu_seqlens_q_padded")) v.cu_seqlens_q_padded = c->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
    if (auto c = n.get("cu_seqlens_kv_padded")) v.cu_seqlens_kv_padded = c->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
    if (auto p = n.get("pad_between_seqs")) v.pad_between_seqs = p->as_bool();
    if (auto m = n.get("attn_mask_type"))
      v.attn_mask_type = m->as_enum({"no_mask", "padding", "causal", "padding_causal", "causal_bottom_right",
                                     "padding_causal_bottom_right", "arbitrary"});
  }

  ContextParallel context_parallel(const Node& n, const std::optional<ExplicitVarlen>& v) {
    n.expect_object({"size", "rank", "comm_type", "call", "chunks"});
    if (!v || v->api != Api::te_dot_product_attention)
      n.fail("a \"varlen\" block with \"api\": \"transformer_engine.dot_product_attention\" beside it",
             !v ? std::string("no varlen block") : v->api ? "api " + to_string(*v->api) : std::string("no api"));
    ContextParallel cp;
    cp.size = n.at("size").as_int(1, 1 << 20);
    auto r = n.at("rank");
    cp.rank = r.as_int(0, 1 << 20);
    if (cp.rank >= cp.size) r.fail("a rank from 0 to " + std::to_string(cp.size - 1) + " (size " + std::to_string(cp.size) + ")");
    if (auto c = n.get("comm_type")) cp.comm_type = c->as_enum({"p2p", "all_gather", "a2a", "a2a+p2p"});
    if (auto c = n.get("call")) cp.call = c->as_string();
    if (auto c = n.get("chunks")) {
      const int64_t sequences = v->cu_seqlens_q.rank() == 1 ? std::max<int64_t>(0, v->cu_seqlens_q.numel() - 1) : -1;
      if (!c->is_array()) c->fail("an array of [first, second] chunk pairs, one per sequence");
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (size_t i = 0; i < c->size(); ++i) {
        std::vector<int64_t> p = (*c)[i].as_int_array(0, 2 * cp.size - 1, 2);
        if (p.size() != 2) (*c)[i].fail("[first, second]: two chunk indices from 0 to " + std::to_string(2 * cp.size - 1),
                                        std::to_string(p.size()) + " values");
        pairs.emplace_back(p[0], p[1]);
      }
      if (sequences >= 0 && static_cast<int64_t>(pairs.size()) != sequences)
        c->fail(std::to_string(sequences) + " pairs (one per sequence of cu_seqlens_q)", std::to_string(pairs.size()) + " pairs");
      cp.chunks = std::move(pairs);
    }
    return cp;
  }

  // axolotl's `ring_attn_func` (the dispatch backend) by release, read in the wheels: none
  // before 0.9.0 (context parallelism went through ring-flash-attn's own varlen adapter);
  // 0.9.x's RingAttnFunc holds varlen_llama3, batch_ring, batch_zigzag and batch_stripe
  // (monkeypatch/attention/ring_attn/patch.py); 0.10.0 - 0.19.0 keep varlen_llama3 and
  // batch_ring (utils/schemas/enums.py), so the config rejects the other two. From 0.20.0 the
  // key is deprecated and unused (ringmaster replaced the backend): the check says so in a note.
  void axolotl_release(const Node& n, const Dispatch& d, const Environment& env) {
    static const Version first = version_literal("0.9.0"), narrowed = version_literal("0.10.0");
    if (d.backend.empty())
      n.fail("\"backend\": axolotl's ring_attn_func (\"batch_ring\", \"batch_zigzag\", \"batch_stripe\" or "
             "\"varlen_llama3\")",
             "none");
    if (!env.axolotl) return;
    if (*env.axolotl < first)
      n.at("backend").fail("environment.axolotl 0.9.0 or later (the first release with ring_attn_func)",
                           "axolotl " + env.axolotl->text);
    if (*env.axolotl >= narrowed && (d.backend == "batch_zigzag" || d.backend == "batch_stripe"))
      n.at("backend").fail("\"batch_ring\" or \"varlen_llama3\" (axolotl 0.10.0 onwards: RingAttnFunc has no " +
                               d.backend + ")",
                           "\"" + d.backend + "\" with axolotl " + env.axolotl->text);
  }

  // `dispatch`: a framework's own attention dispatch (batch-format.md). The backend names are
  // diffusers' AttentionBackendName values (0.36.0 - 0.42.1) and HunyuanVideo's modes; the bias
  // classes are xformers' fmha.attn_bias block-diagonal classes (0.0.27 - 0.0.30).
  Dispatch dispatch(const Node& n, const std::optional<ExplicitVarlen>& v, const Environment& env) {
    n.expect_object({"library", "backend", "ring_degree", "ulysses_degree", "attn_bias", "attn_bias_moved", "seqlens"});
    Dispatch d;
    auto lib = n.at("library");
    d.library = lib.as_enum({"diffusers", "xformers", "hunyuanvideo", "axolotl"});
    auto only = [&](const char* key, const char* library) {
      if (n.has(key) && d.library != library)
        n.at(key).fail("\"library\": \"" + std::string(library) + "\" beside " + key, "library " + d.library);
    };
    if (n.has("ring_degree") && d.library != "diffusers" && d.library != "axolotl")
      n.at("ring_degree").fail("\"library\": \"diffusers\" beside ring_degree (or \"axolotl\")", "library " + d.library);
    only("ulysses_degree", "diffusers");
    for (const char* key : {"attn_bias", "attn_bias_moved", "seqlens"}) only(key, "xformers");
    if (auto b = n.get("backend")) {
      if (d.library == "diffusers")
        d.backend = b->as_enum({"eager", "flash", "flash_hub", "flash_varlen", "flash_varlen_hub", "flash_4_hub", "_flash_3",
                                "_flash_varlen_3", "_flash_3_hub", "_flash_3_varlen_hub", "aiter", "aiter_fa2_hub", "flex",
                                "native", "_native_cudnn", "_native_efficient", "_native_flash", "_native_math",
                                "_native_npu", "_native_xla", "sage", "sage_hub", "sage_blackwell_hub", "sage_varlen",
                                "_sage_qk_int8_pv_fp8_cuda", "_sage_qk_int8_pv_fp8_cuda_sm90", "_sage_qk_int8_pv_fp16_cuda",
                                "_sage_qk_int8_pv_fp16_triton", "sparge", "xformers"});
      else if (d.library == "hunyuanvideo")
        d.backend = b->as_enum({"flash", "torch", "vanilla"});
      else if (d.library == "axolotl")
        d.backend = b->as_enum({"batch_ring", "batch_zigzag", "batch_stripe", "varlen_llama3"});
      else
        b->fail("no \"backend\" for xformers (the call is fmha.memory_efficient_attention)", "a backend");
    }
    if (d.library == "hunyuanvideo") {
      if (d.backend.empty()) n.fail("\"backend\": HunyuanVideo's attention mode (\"flash\", \"torch\" or \"vanilla\")", "none");
      if (!v) n.fail("a \"varlen\" block beside it (the cu_seqlens and max_seqlen_q the attention function is given)",
                     "no varlen block");
      // the torch and vanilla modes see q as (B, max_seqlen_q): the packed rows must fill whole rows
      const int64_t rows = v->max_seqlen_q.value;
      if (d.backend != "flash" && (v->cu_seqlens_q.rank() != 1 || rows <= 0 || v->total_q % rows != 0))
        n.at("backend").fail("a varlen block whose 1-D cu_seqlens_q fills rows of max_seqlen_q tokens (HunyuanVideo's (B, S) "
                             "layout: total_q a multiple of max_seqlen_q)",
                             "total_q " + std::to_string(v->total_q) + ", max_seqlen_q " + std::to_string(rows));
    }
    if (d.library == "axolotl") axolotl_release(n, d, env);
    if (auto r = n.get("ring_degree")) d.ring_degree = r->as_int(1, 1 << 20);
    if (auto u = n.get("ulysses_degree")) d.ulysses_degree = u->as_int(1, 1 << 20);
    if (auto a = n.get("attn_bias"))
      d.attn_bias = a->as_enum({"BlockDiagonalMask", "BlockDiagonalCausalMask", "BlockDiagonalCausalFromBottomRightMask",
                                "BlockDiagonalCausalLocalAttentionMask", "BlockDiagonalCausalLocalAttentionFromBottomRightMask",
                                "BlockDiagonalPaddedKeysMask", "BlockDiagonalCausalWithOffsetPaddedKeysMask",
                                "BlockDiagonalCausalLocalAttentionPaddedKeysMask", "PagedBlockDiagonalPaddedKeysMask",
                                "PagedBlockDiagonalCausalWithOffsetPaddedKeysMask", "BlockDiagonalGappyKeysMask",
                                "BlockDiagonalCausalWithOffsetGappyKeysMask", "PagedBlockDiagonalGappyKeysMask"});
    if (d.library == "xformers" && d.attn_bias.empty())
      n.fail("\"attn_bias\": the xformers attn_bias class the call passed", "none");
    if (auto m = n.get("attn_bias_moved")) d.attn_bias_moved = m->as_bool();
    if (auto l = n.get("seqlens")) {
      d.seqlens = l->as_int_array(0, kMaxIndex, limits.max_array_elements);
      if (d.seqlens->empty()) l->fail("at least one sequence length", "an empty array");
    }
    return d;
  }

  ExplicitVarlen varlen(const Node& n) {
    n.expect_object({"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "seqused_k", "total_q", "total_k",
                     "cu_seqlens_file", "cu_seqlens_k_file", "api", "seqused_q", "window_size", "binding", "pack_gqa", "num_splits",
                     "cu_seqlens_q_padded", "cu_seqlens_kv_padded", "pad_between_seqs", "attn_mask_type", "enable_gqa",
                     "page_table", "qv", "attention_chunk"});
    ExplicitVarlen v;
    if (n.has("cu_seqlens_q") == n.has("cu_seqlens_file"))
      n.fail("exactly one of \"cu_seqlens_q\" and \"cu_seqlens_file\"",
             n.has("cu_seqlens_q") ? "both" : "neither");
    if (auto c = n.get("cu_seqlens_q")) {
      v.cu_seqlens_q = cu_array(*c);
    } else {
      auto f = n.at("cu_seqlens_file");
      v.cu_seqlens_q = npy(f, &v.cu_seqlens_file);
      for (int64_t x : v.cu_seqlens_q.values)
        if (x < -kMaxIndex || x > kMaxIndex) f.fail("cu_seqlens values within +-2^62");
    }
    if (n.has("cu_seqlens_k") && n.has("cu_seqlens_k_file"))
      n.fail("at most one of \"cu_seqlens_k\" and \"cu_seqlens_k_file\"", "both");
    if (auto c = n.get("cu_seqlens_k")) {
      v.cu_seqlens_k = cu_array(*c);
      v.cu_seqlens_k_given = true;
    } else if (auto f = n.get("cu_seqlens_k_file")) {
      // a .npy holding cu_seqlens_k, as cu_seqlens_file holds cu_seqlens_q (its dtype kept)
      v.cu_seqlens_k = npy(*f, &v.cu_seqlens_k_file);
      for (int64_t x : v.cu_seqlens_k.values)
        if (x < -kMaxIndex || x > kMaxIndex) f->fail("cu_seqlens values within +-2^62");
      v.cu_seqlens_k_given = true;
    } else {
      v.cu_seqlens_k = v.cu_seqlens_q;
    }
    if (auto m = n.get("max_seqlen_q")) {
      v.max_seqlen_q = max_seqlen(*m);
      v.max_seqlen_q_given = true;
    } else {
      v.max_seqlen_q.value = largest_segment(v.cu_seqlens_q);
    }
    if (auto m = n.get("max_seqlen_k")) {
      v.max_seqlen_k = max_seqlen(*m);
      v.max_seqlen_k_given = true;
    } else {
      v.max_seqlen_k = v.max_seqlen_q;
    }
    if (auto s = n.get("seqused_k")) v.seqused_k = s->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
    call_site(n, v);
    if (v.page_table) paged_keys(n, v);
    auto last = [](const IntTensor& t) { return t.values.empty() ? int64_t{0} : std::max<int64_t>(0, t.values.back()); };
    if (auto t = n.get("total_q")) {
      v.total_q = t->as_int(0, kMaxIndex);
      v.total_q_given = true;
    } else {
      v.total_q = last(v.cu_seqlens_q);
    }
    if (auto t = n.get("total_k")) {
      v.total_k = t->as_int(0, kMaxIndex);
      v.total_k_given = true;
    } else {
      v.total_k = v.cu_seqlens_k_given || v.page_table ? last(v.cu_seqlens_k) : v.total_q;
    }
    return v;
  }

  std::map<std::string, TensorOverride> tensors(const Node& n) {
    n.expect_object({"q", "k", "v", "out", "cu_seqlens_q", "cu_seqlens_k", "position_ids", "cos", "sin"});
    std::map<std::string, TensorOverride> out;
    for (auto it = n.raw().begin(); it != n.raw().end(); ++it) {
      Node t = n.at(it.key());
      t.expect_object({"dtype", "device", "rows", "contiguous", "aligned"});
      TensorOverride o;
      if (auto d = t.get("dtype")) {
        auto parsed = parse_dtype(d->as_string());
        if (!parsed) d->fail("a dtype such as \"int32\", \"int64\", \"bf16\", \"fp16\", \"fp32\"");
        o.dtype = parsed;
      }
      if (auto d = t.get("device")) o.device = device(*d);
      if (auto r = t.get("rows")) o.rows = r->as_int(0, kMaxIndex);
      if (auto c = t.get("contiguous")) o.contiguous = c->as_bool();
      if (auto a = t.get("aligned")) o.aligned16 = a->as_bool();
      out[it.key()] = o;
    }
    return out;
  }

  Rotary rotary(const Node& n) {
    n.expect_object({"implementation", "dim", "base", "interleaved", "table_length", "seqlen_offset", "varlen", "layout"});
    Rotary r;
    if (auto i = n.get("implementation")) r.implementation = i->as_enum({"fla", "flash_attn", "hf"});
    r.dim = n.at("dim").as_int(1, kMaxHeads * kMaxHeadDim);
    if (auto b = n.get("base")) r.base = b->as_number(1e-9, 1e30);
    if (auto i = n.get("interleaved")) r.interleaved = i->as_bool();
    if (auto t = n.get("table_length")) r.table_length = t->as_int(0, limits.max_dimension);
    if (auto o = n.get("seqlen_offset")) {
      if (o->is_array()) {
        // negative offsets are legal: FLA encodes left padding as a negative per-sequence offset
        // (fla/modules/rotary.py; the FLA#967 fix's tests use them)
        r.seqlen_offset = o->as_int_array(-limits.max_dimension, limits.max_dimension, limits.max_array_elements);
        r.seqlen_offset_per_sequence = true;
      } else {
        r.seqlen_offset = {o->as_int(-limits.max_dimension, limits.max_dimension)};
      }
    }
    if (auto v = n.get("varlen")) r.varlen = v->as_bool();
    if (auto l = n.get("layout")) r.layout = l->as_enum({"BTHD", "BHTD", "THD"});
    return r;
  }

  Launch launch(const Node& n) {
    n.expect_object({"kernel", "signature", "passed", "heuristics", "config_params", "autotune_keys"});
    Launch l;
    if (auto k = n.get("kernel")) l.kernel = k->as_string();
    l.signature = n.at("signature").as_string_array();
    l.passed = n.at("passed").as_string_array();
    l.autotune_keys = n.at("autotune_keys").as_string_array();
    if (auto h = n.get("heuristics")) l.heuristics = h->as_string_array();
    if (auto c = n.get("config_params")) l.config_params = c->as_string_array();
    if (l.signature.empty()) n.at("signature").fail("at least one parameter name");
    const std::unordered_set<std::string> signature(l.signature.begin(), l.signature.end());
    auto in_signature = [&](const std::string& name) { return signature.count(name) > 0; };
    for (const char* list : {"passed", "heuristics", "config_params"}) {
      auto node = n.get(list);
      if (!node) continue;
      const auto& names = std::string(list) == "passed" ? l.passed : std::string(list) == "heuristics" ? l.heuristics : l.config_params;
      for (size_t i = 0; i < names.size(); ++i)
        if (!in_signature(names[i])) (*node)[i].fail("a parameter named in \"signature\"");
    }
    return l;
  }

  FlaOp fla_op(const Node& n) {
    n.expect_object({"name", "multiprocessors"});
    FlaOp op;
    op.name = n.at("name").as_enum({"token_shift"});
    if (auto m = n.get("multiprocessors")) op.multiprocessors = m->as_int(1, 1 << 20);
    return op;
  }

  // `layers`: a hybrid model's layers and where each takes its boundaries from
  std::vector<Layer> layers(const Node& n) {
    if (!n.is_array() || n.size() == 0) n.fail("a non-empty array of layer objects");
    if (n.size() > 1024) n.fail("at most 1024 layer entries", std::to_string(n.size()));
    std::vector<Layer> out;
    for (size_t i = 0; i < n.size(); ++i) {
      Node e = n[i];
      if (!e.is_object()) e.fail("a layer object");
      e.expect_object({"kind", "count", "implementation", "cu_seqlens", "attention_mask", "causal_conv1d"});
      Layer l;
      l.kind = e.at("kind").as_enum({"attention", "gated_deltanet"});
      if (l.kind == "attention") {
        // the attention layers take what the flash-attn conversion passes: nothing to say per layer
        for (const char* key : {"implementation", "cu_seqlens", "attention_mask", "causal_conv1d"})
          if (auto k = e.get(key)) k->fail(std::string("no \"") + key + "\" on an attention layer", std::string("\"") + key + "\"");
      } else {
        l.implementation =
            e.has("implementation") ? e.at("implementation").as_enum({"transformers", "fla", "areal"}) : "transformers";
        if (auto c = e.get("cu_seqlens")) {
          if (l.implementation == "transformers") c->fail("no cu_seqlens (transformers' layer reads batch.flash_kwargs.cu_seq_lens_q)", "cu_seqlens");
          l.cu_seqlens = c->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
          budget.take(static_cast<int64_t>(l.cu_seqlens->size()), c->path());
        }
        if (auto m = e.get("attention_mask")) {
          if (l.implementation == "areal") m->fail("no attention_mask (AReaL's layer takes cu_seqlens only)", "attention_mask");
          l.attention_mask = m->as_bool();
        }
        if (auto c = e.get("causal_conv1d")) {
          if (l.implementation == "fla") c->fail("no causal_conv1d (FLA's layer convolves with cu_seqlens)", "causal_conv1d");
          l.causal_conv1d = c->as_bool();
        }
      }
      if (auto c = e.get("count")) l.count = c->as_int(1, 1 << 20);
      out.push_back(std::move(l));
    }
    return out;
  }

  Intent intent(const Node& n) {
    n.expect_object({"sequences"});
    Intent in;
    in.source = IntentSource::given;
    auto seqs = n.at("sequences");
    if (!seqs.is_array()) seqs.fail("an array of {\"row\", \"start\", \"length\"} objects");
    if (static_cast<int64_t>(seqs.size()) > limits.max_array_elements) seqs.fail("fewer sequences");
    budget.take(3 * static_cast<int64_t>(seqs.size()), seqs.path());
    for (size_t i = 0; i < seqs.size(); ++i) {
      Node s = seqs[i];
      s.expect_object({"row", "start", "length"});
      IntendedSequence q;
      q.row = s.has("row") ? s.at("row").as_int(0, limits.max_dimension) : 0;
      q.start = s.at("start").as_int(0, limits.max_dimension);
      q.length = s.at("length").as_int(1, limits.max_dimension);
      in.sequences.push_back(q);
    }
    return in;
  }

  Expect expect(const Node& n) {
    n.expect_object({"first_violation", "violations", "exit_code", "prediction"});
    Expect e;
    if (auto f = n.get("first_violation")) {
      e.first_violation_given = true;
      if (!f->is_null()) e.first_violation = f->as_string();
    }
    if (auto v = n.get("violations")) e.violations = v->as_string_array();
    if (auto c = n.get("exit_code")) e.exit_code = static_cast<int>(c->as_int(0, 3));
    if (auto p = n.get("prediction")) {
      p->expect_object({"outcome", "pass"});
      ExpectedPrediction want;
      Node o = p->at("outcome");
      std::optional<Outcome> outcome = o.is_string() ? parse_outcome(o.raw().get<std::string>()) : std::nullopt;
      if (!outcome) {
        std::string classes;
        for (std::string_view c : outcome_names()) classes += (classes.empty() ? "\"" : ", \"") + std::string(c) + "\"";
        o.fail("an outcome class: one of " + classes);
      }
      want.outcome = *outcome;
      if (auto ps = p->get("pass")) want.pass = parse_pass(ps->as_enum({"forward", "backward"}));
      e.prediction = want;
    }
    return e;
  }

  // ---- collator (batch-format.md#collator) ---------------------------------------------

  CollatorResult last_collation;

  int64_t checked_add(int64_t a, int64_t b, const std::string& path) {
    if (auto r = checked::add(a, b); r && *r <= limits.max_dimension) return *r;
    throw InputError(file, path, "token counts of at most " + std::to_string(limits.max_dimension), "more");
  }
  int64_t checked_mul(int64_t a, int64_t b, const std::string& path) {
    if (auto r = checked::mul(a, b); r && *r <= limits.max_dimension) return *r;
    throw InputError(file, path, "token counts of at most " + std::to_string(limits.max_dimension), "more");
  }

  CollatorSpec collator_spec(const Node& n, const Environment& env) {
    n.expect_object({"name", "release", "options", "examples"});
    CollatorSpec s;
    s.name = n.at("name").as_string();
    if (auto r = n.get("release")) {
      s.release = parse_version(r->as_string());
      if (!s.release) r->fail("a PEP 440 version such as \"4.52.4\"");
      s.release_from = "collator.release";
    } else if (s.name.rfind("trl", 0) == 0 && env.trl) {
      s.release = env.trl;
      s.release_from = "environment.trl";
    } else if (s.name.rfind("transformers", 0) == 0 && env.transformers) {
      s.release = env.transformers;
      s.release_from = "environment.transformers";
    }
    if (auto o = n.get("options")) {
      o->expect_object({"return_position_ids", "return_flash_attn_kwargs", "return_seq_idx", "separator_id",
                        "position_ids_start", "padding_free", "packing", "packing_strategy", "pad_to_multiple_of",
                        "pad_token_id", "attn_implementation", "cutoff_len",
                        "squash_position_ids", "attention_mask", "position_ids", "knapsack", "fake_mm_tokens"});
      CollatorOptions& c = s.options;
      for (auto it = o->raw().begin(); it != o->raw().end(); ++it) c.given.push_back(it.key());
      auto flag = [&](const char* key, std::optional<bool>& out) {
        if (auto v = o->get(key)) out = v->as_bool();
      };
      auto integer = [&](const char* key, std::optional<int64_t>& out, int64_t lo, int64_t hi) {
        if (auto v = o->get(key)) out = v->as_int(lo, hi);
      };
      flag("return_position_ids", c.return_position_ids);
      flag("return_flash_attn_kwargs", c.return_flash_attn_kwargs);
      flag("return_seq_idx", c.return_seq_idx);
      flag("padding_free", c.padding_free);
      flag("packing", c.packing);
      flag("squash_position_ids", c.squash_position_ids);
      flag("attention_mask", c.attention_mask);
      flag("position_ids", c.position_ids);
      flag("knapsack", c.knapsack);
      integer("separator_id", c.separator_id, -kMaxIndex, kMaxIndex);
      integer("position_ids_start", c.position_ids_start, 0, int64_t{1} << 20);
      integer("pad_to_multiple_of", c.pad_to_multiple_of, 1, int64_t{1} << 20);
      integer("pad_token_id", c.pad_token_id, -kMaxIndex, kMaxIndex);
      integer("cutoff_len", c.cutoff_len, 1, limits.max_dimension);
      integer("fake_mm_tokens", c.fake_mm_tokens, 0, int64_t{1} << 20);
      if (auto v = o->get("packing_strategy")) c.packing_strategy = v->as_string();
      if (auto v = o->get("attn_implementation")) c.attn_implementation = v->as_string();
    }
    Node ex = n.at("examples");
    if (!ex.is_array() || ex.size() == 0)
      ex.fail("a non-empty array of examples (a length, an array of token ids, or an object)");
    if (static_cast<int64_t>(ex.size()) > limits.max_array_elements) ex.fail("fewer examples");
    int64_t total = 0, longest = 0;
    for (size_t i = 0; i < ex.size(); ++i) {
      Node e = ex[i];
      CollatorExample x;
      if (e.is_integer()) {
        x.length = e.as_int(0, limits.max_dimension);
      } else if (e.is_array()) {
        x.input_ids = e.as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
        x.length = static_cast<int64_t>(x.input_ids->size());
      } else if (e.is_object()) {
        e.expect_object({"length", "input_ids", "seq_lengths"});
        if (auto v = e.get("input_ids")) {
          x.input_ids = v->as_int_array(-kMaxIndex, kMaxIndex, limits.max_array_elements);
          x.length = static_cast<int64_t>(x.input_ids->size());
        }
        if (auto v = e.get("seq_lengths")) {
          x.seq_lengths = v->as_int_array(1, limits.max_dimension, limits.max_array_elements);
          if (x.seq_lengths.empty()) v->fail("a non-empty array of lengths, each at least 1");
          int64_t sum = 0;
          for (int64_t l : x.seq_lengths) sum = checked_add(sum, l, v->path());
          if (x.input_ids && sum != x.length)
            v->fail("lengths that add up to the example's " + std::to_string(x.length) + " token ids",
                    "a sum of " + std::to_string(sum));
          x.length = sum;
        }
        if (auto v = e.get("length")) {
          int64_t len = v->as_int(0, limits.max_dimension);
          if ((e.has("input_ids") || e.has("seq_lengths")) && len != x.length)
            v->fail("the length the example's other keys give (" + std::to_string(x.length) + ")", std::to_string(len));
          x.length = len;
        }
        if (!e.has("length") && !e.has("input_ids") && !e.has("seq_lengths"))
          e.fail("an example object with \"length\", \"input_ids\" or \"seq_lengths\"", "none of them");
      } else {
        e.fail("an example: a length, an array of token ids, or an object");
      }
      total = checked_add(total, x.length, e.path());
      longest = std::max(longest, x.length);
      s.examples.push_back(std::move(x));
    }
    // what the collator materialises: the flattened row, or the padded rows
    budget.take(total, ex.path());
    const int64_t pad = s.options.pad_to_multiple_of.value_or(1);
    budget.take(checked_mul(static_cast<int64_t>(s.examples.size()), checked_add(longest, pad, ex.path()), ex.path()),
                ex.path());
    if (s.options.cutoff_len)
      budget.take(checked_mul(static_cast<int64_t>(s.examples.size()),
                              checked_add(*s.options.cutoff_len + 1 + pad, s.options.fake_mm_tokens.value_or(0), ex.path()),
                              ex.path()),
                  ex.path());
    return s;
  }

  // Replays the collator and loads the batch it emits into `b.batch`.
  CollatorRecord collate(const Node& n, const CollatorSpec& spec, Batch& b) {
    last_collation = replay_collator(spec);
    if (last_collation.raised) {
      const CollatorRaise& r = *last_collation.raised;
      if (r.type.empty()) n.at("name").fail(r.message);
      n.fail("inputs the collator accepts (" + last_collation.record.name + " of " + last_collation.record.replayed_as +
                 " raises on these)",
             r.type + ": " + r.message);
    }
    if (const CollatorValue* ids = last_collation.find("input_ids"); ids && (ids->shape.size() != 2 || ids->shape[1] == 0))
      n.at("examples").fail("examples with at least one token in all",
                            "none: the collator emits an empty batch, which reaches no attention call");
    const std::string text = collator_batch_json(last_collation);
    json emitted = parse_json_text(text, file, limits);
    Node node(emitted, n.path(), file, limits);
    b.batch = inputs(node, b.model);
    return last_collation.record;
  }

  // environment.flash_attn_cute: the flash_attn/cute package a flash-attn 2 release bundles
  // (2.8.3, 2.8.3.post1 and 2.8.3.post2 ship it; the 2.8.0 - 2.8.2 tags have the folder but no
  // __init__.py, so find_packages leaves it out of their builds). One distribution owns the
  // import path flash_attn.cute: beside flash-attn-4 the copy is the one installed last, so the
  // file names one of the two; the copy belongs to the flash-attn it came with, so a
  // flash_attn given beside it is that release; and only a flash_attn.cute call reaches it.
  void bundled_cute(const Node& env, const Batch& b) {
    const Node key = env.at("flash_attn_cute");
    const Version& v = *b.environment.flash_attn_cute;
    if (v.release.empty() || v.release.front() != 2 || v < version_literal("2.8.3"))
      key.fail("a flash-attn 2 release that bundles flash_attn/cute (2.8.3 or a later 2.x)");
    if (b.environment.flash_attn_4)
      key.fail("one owner of flash_attn.cute: flash_attn_cute (the copy in flash-attn " + v.text +
                   ") or flash_attn_4 (a flash-attn-4 wheel installed over it), not both",
               "both");
    if (b.environment.flash_attn && !(*b.environment.flash_attn == v))
      key.fail("the installed flash-attn release, environment.flash_attn (" + b.environment.flash_attn->text +
               "): the copy comes with it");
    const bool cute_api = b.varlen && b.varlen->api &&
                          (*b.varlen->api == Api::flash_attn_4_varlen || *b.varlen->api == Api::flash_attn_4_dense);
    if (!cute_api)
      key.fail("a call through flash_attn.cute beside it (varlen.api \"flash_attn_4.varlen\" or \"flash_attn_4.dense\")",
               b.varlen && b.varlen->api ? "varlen.api \"" + to_string(*b.varlen->api) + "\""
                                         : std::string("no varlen.api"));
  }

  Batch batch(const Node& root) {
    root.expect_object({"format", "name", "description", "references", "pass", "environment", "model", "batch",
                        "varlen", "tensors", "rotary", "launch", "fla_op", "intent", "expect", "$schema", "collator", "layers",
                        "context_parallel", "dispatch"});
    Batch b;
    // the JSON Schema an editor validates the file against (docs/spec/batch.schema.json): a
    // string, otherwise ignored
    if (auto v = root.get("$schema")) v->as_string();
    auto format = root.at("format");
    if (format.as_string() != "attn-doctor/batch@1") format.fail("\"attn-doctor/batch@1\"");
    if (auto v = root.get("name")) b.name = v->as_string();
    if (auto v = root.get("description")) b.description = v->as_string();
    if (auto v = root.get("references")) b.references = v->as_string_array();
    if (auto v = root.get("pass")) b.pass = *parse_call_pass(v->as_enum({"forward", "training"}));
    if (auto v = root.get("environment")) b.environment = environment(*v);
    b.model = model(root.at("model"));
    if (!(root.has("batch") || root.has("varlen") || root.has("rotary") || root.has("launch") || root.has("collator") ||
          root.has("dispatch")))
      root.fail("at least one of \"batch\", \"varlen\", \"rotary\", \"launch\", \"collator\", \"dispatch\"", "none of them");
    if (auto v = root.get("batch")) b.batch = inputs(*v, b.model);
    std::optional<CollatorSpec> collated;
    if (auto v = root.get("collator")) {
      if (root.has("batch"))
        v->fail("a \"collator\" block or a \"batch\" block, not both (the collator emits the batch)",
                "both");
      collated = collator_spec(*v, b.environment);
      collated->remote_code = b.model.remote_code;
      b.collator = collate(*v, *collated, b);
    }
    if (auto v = root.get("varlen")) b.varlen = varlen(*v);
    if (auto v = root.get("tensors")) b.tensors = tensors(*v);
    if (auto v = root.get("rotary")) b.rotary = rotary(*v);
    if (auto v = root.get("launch")) b.launch = launch(*v);
    if (auto v = root.get("fla_op")) {
      b.fla_op = fla_op(*v);
      if (!b.batch && !b.varlen) v->fail("a \"varlen\" or \"batch\" block giving x's shape beside it", "neither");
    }
    if (auto v = root.get("layers")) {
      if (!b.batch) v->fail("a \"batch\" block beside \"layers\" (the layers are fed from it)", "no batch block");
      b.layers = layers(*v);
    }
    if (auto v = root.get("context_parallel")) b.context_parallel = context_parallel(*v, b.varlen);
    if (auto v = root.get("dispatch")) b.dispatch = dispatch(*v, b.varlen, b.environment);
    if (b.environment.flash_attn_cute) bundled_cute(root.at("environment"), b);
    if (auto v = root.get("expect")) b.expect = expect(*v);
    // dtype of explicit cu_seqlens: the override, else int32 (JSON) or the .npy dtype
    if (b.varlen) {
      if (auto* o = b.override_for("cu_seqlens_q"); o && o->dtype) b.varlen->cu_seqlens_q.dtype = *o->dtype;
      if (auto* o = b.override_for("cu_seqlens_k"); o && o->dtype) b.varlen->cu_seqlens_k.dtype = *o->dtype;
      else if (!b.varlen->cu_seqlens_k_given) b.varlen->cu_seqlens_k.dtype = b.varlen->cu_seqlens_q.dtype;
    }
    if (auto v = root.get("intent")) {
      b.intent = intent(*v);
      validate_intent(b, file, v->path() + "/sequences");
    } else if (collated && b.collator) {
      b.intent = collator_intent(*collated, last_collation);
      validate_intent(b, file, "/collator/examples");
    } else {
      b.intent = derive_intent(b);
    }
    return b;
  }
};

std::string read_file(const std::filesystem::path& path, const LoadLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path.string(), "", "a batch file", "a directory");
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(path.string(), "", "a readable batch file", ec.message());
  if (static_cast<int64_t>(size) > limits.max_json_bytes)
    throw InputError(path.string(), "", "a batch file of at most " + std::to_string(limits.max_json_bytes) + " bytes",
                     std::to_string(size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "a readable batch file", "it cannot be opened");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace

Batch parse_batch_text(std::string_view text, const std::filesystem::path& origin, const LoadLimits& limits) {
  std::string label = origin.string();
  json root = parse_json_text(text, label, limits);
  Loader loader{label, origin.has_parent_path() ? origin.parent_path() : std::filesystem::path("."), limits};
  Node node(root, "", label, limits);
  if (!root.is_object()) node.fail("a JSON object (a batch file)");
  Batch b = loader.batch(node);
  b.max_array_elements = limits.max_array_elements;
  b.file = origin;
  if (b.name.empty()) b.name = origin.stem().string();
  return b;
}

Batch load_batch_file(const std::filesystem::path& path, const LoadLimits& limits) {
  return parse_batch_text(read_file(path, limits), path, limits);
}

}  // namespace ad
