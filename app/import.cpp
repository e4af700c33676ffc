// `attn-doctor import INPUTS... -o BATCH.json`: turns the call dumps users paste into issues
// into a batch file (docs/spec/import.md):
//  - `.npy` dumps of the varlen arguments, named as the arguments are (cu_seqlens_q.npy,
//    max_seqlen_k.npy, q.npy, ...), the form of Dao-AILab/flash-attention#1311; the values of
//    cu_seqlens / max_seqlen / seqused_k are read, of every other tensor only the header;
//  - per-call JSON records (rank, call_index, operator, input_shapes, positional_args with
//    shape / dtype / device / stride / is_contiguous / requires_grad per tensor), the form
//    MinghuasLab/flash-attention-npu#44 shows.
// Every input field lands in one of three lists that the command prints: mapped (to which
// batch key), defaulted (a batch key the inputs did not give, with the value written), not
// mapped (and why). The written batch is loaded back before the command exits 0.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "batch/json_node.hpp"
#include "batch/npy.hpp"
#include "cli.hpp"
#include "util/text.hpp"
#include "vocab/dtype.hpp"
#include "vocab/version.hpp"

namespace ad::cli {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// Above this many entries a cu_seqlens goes to a side .npy (cu_seqlens_file / _k_file).
constexpr size_t kInlineCuSeqlens = 256;

// Positional order of flash_attn_varlen_func's first seven parameters: flash-attn 2.x
// (flash_attn/flash_attn_interface.py) and FA3 (hopper/flash_attn_interface.py) agree on it.
const char* const kVarlenOrder[] = {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"};

// What one input says about one argument of the call.
struct TensorFacts {
  std::optional<std::vector<int64_t>> shape;
  std::optional<DType> dtype;
  std::string dtype_text;  // as written, for messages
  std::optional<std::string> device;
  std::optional<bool> contiguous;
  std::optional<bool> requires_grad;
  std::optional<IntTensor> values;  // cu_seqlens / seqused_k / a 0-d max_seqlen
  std::string from;                 // where the facts came from, for the report
  std::string file, path;           // the same for an error: the input file and the JSON path in it
  std::string values_from;          // the .npy (or record path) the values came from
};

struct Line {
  std::string source;  // input field
  std::string key;     // batch key (mapped, defaulted) or "" (not mapped)
  std::string note;    // value written, or why not
};

struct Report {
  std::vector<Line> mapped, defaulted, not_mapped;
  std::vector<std::string> side_files;
  void map(std::string source, std::string key, std::string note) {
    mapped.push_back({std::move(source), std::move(key), std::move(note)});
  }
  void dflt(std::string key, std::string note) { defaulted.push_back({"", std::move(key), std::move(note)}); }
  void skip(std::string source, std::string why) { not_mapped.push_back({std::move(source), "", std::move(why)}); }
};

struct Args {
  std::vector<std::string> inputs;
  std::string output;
  std::optional<int64_t> call_index;
  std::optional<int64_t> num_heads, num_kv_heads, head_dim;
  std::string dtype, causal, pass, flash_attn, name;
  std::string format = "text";
};

// All that the inputs told, by argument name.
struct Call {
  std::map<std::string, TensorFacts> tensors;  // q k v cu_seqlens_q cu_seqlens_k seqused_k ...
  std::map<std::string, std::pair<int64_t, std::string>> scalars;  // max_seqlen_q/k: value, from
  std::optional<std::pair<bool, std::string>> causal;
  std::optional<std::pair<double, std::string>> dropout, softcap;
  std::optional<std::pair<bool, std::string>> deterministic;
  std::optional<std::pair<std::pair<int64_t, int64_t>, std::string>> window;  // window_size as passed
  std::optional<std::pair<bool, std::string>> pack_gqa;
  std::optional<std::pair<int64_t, std::string>> num_splits;
  std::optional<std::string> positional_from;  // more than q, k, v passed by position
  std::optional<std::string> backward_from;  // a backward-only tensor was dumped (dout, dq, ...)
  std::vector<std::string> description;
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The argument a dumped name stands for: flash-attn's own names, transformers' kwargs names
// (cu_seq_lens_q, max_length_q) and the qkvpacked `cu_seqlens` / `max_seqlen` (both sides).
std::vector<std::string> canonical_names(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> aliases = {
      {"cu_seq_lens_q", {"cu_seqlens_q"}}, {"cu_seq_lens_k", {"cu_seqlens_k"}},
      {"max_length_q", {"max_seqlen_q"}},  {"max_length_k", {"max_seqlen_k"}},
      {"cu_seqlens", {"cu_seqlens_q", "cu_seqlens_k"}}, {"max_seqlen", {"max_seqlen_q", "max_seqlen_k"}},
      {"query", {"q"}}, {"key", {"k"}}, {"value", {"v"}}};
  if (auto it = aliases.find(name); it != aliases.end()) return it->second;
  return {name};
}

bool is_index_name(const std::string& n) {
  return n == "cu_seqlens_q" || n == "cu_seqlens_k" || n == "seqused_k" || n == "seqused_q";
}
bool is_scalar_name(const std::string& n) { return n == "max_seqlen_q" || n == "max_seqlen_k"; }
bool is_qkv(const std::string& n) { return n == "q" || n == "k" || n == "v"; }
bool is_backward_only(const std::string& n) {
  return n == "dout" || n == "dq" || n == "dk" || n == "dv" || n == "softmax_lse" || n == "out" || n == "rng_state";
}

// The devices the batch format accepts: cpu, cuda, meta, cuda:N.
bool batch_device(const std::string& d) {
  if (d == "cpu" || d == "cuda" || d == "meta") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() < 6 || d.size() > 9) return false;
  return std::all_of(d.begin() + 5, d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<DType> npy_float_dtype(const std::string& descr) {
  std::string code = descr.size() > 1 ? descr.substr(1) : descr;
  if (code == "f2") return DType::fp16;
  return std::nullopt;
}

// ---- .npy inputs ----------------------------------------------------------------------

void read_npy_input(const std::string& name, const fs::path& path, Call& call, Report& rep, const LoadLimits& limits) {
  const std::string label = path.filename().string();
  const auto names = canonical_names(name);
  const std::string& first = names.front();
  if (is_index_name(first)) {
    IntTensor t = read_npy_file(path, "", limits);
    if (t.dtype == DType::boolean) throw InputError(path.string(), "", "integer cu_seqlens", "a bool array");
    for (const auto& n : names) {
      // beside a record's description of the same argument: the values only (the record says
      // which dtype and device the kernel got)
      TensorFacts& f = call.tensors[n];
      if (f.shape && *f.shape != t.shape)
        throw InputError(path.string(), "", "the shape " + f.from + " gives, " + shape_text(*f.shape),
                         "shape " + shape_text(t.shape));
      f.values = t;
      f.values_from = label;
      f.shape = t.shape;
      if (f.dtype_text.empty()) f.dtype = t.dtype;
      if (f.from.empty()) f.from = label, f.file = path.string();
    }
    return;
  }
  if (is_scalar_name(first)) {
    IntTensor t = read_npy_file(path, "", limits);
    if (t.numel() != 1 || t.dtype == DType::boolean)
      throw InputError(path.string(), "", "one integer (a 0-d or 1-element array) for " + name,
                       "shape " + shape_text(t.shape) + " of " + to_string(t.dtype));
    // np.save writes a host int and a 0-d tensor alike: written as a host int, and said so
    for (const auto& n : names)
      call.scalars[n] = {t.values[0], label + " (" + to_string(t.dtype) + ", shape " + shape_text(t.shape) +
                                          "; np.save writes an int and a 0-d tensor alike: written as an int)"};
    return;
  }
  NpyHeader h = read_npy_header(path, "", limits);
  if (is_qkv(first)) {
    TensorFacts& f = call.tensors[first];
    f.shape = h.shape;
    f.from = label;
    f.file = path.string();
    if (auto d = npy_float_dtype(h.descr)) {
      f.dtype = d;
      f.dtype_text = h.descr;
    } else {
      rep.skip(label + " dtype '" + h.descr + "'",
               "not the call's dtype: numpy holds no bfloat16, so dumps of bf16 tensors are widened (give --dtype)");
    }
    return;
  }
  if (is_backward_only(first)) {
    call.backward_from = call.backward_from ? *call.backward_from + ", " + label : label;
    return;
  }
  rep.skip(label, "not an argument the batch format describes");
}

// ---- JSON records -----------------------------------------------------------------------

std::optional<DType> record_dtype(const std::string& s) {
  std::string t = s.rfind("torch.", 0) == 0 ? s.substr(6) : s;
  return parse_dtype(t);
}

// One tensor or scalar entry of positional_args / keyword_args.
void read_entry(const Node& e, const std::string& name, Call& call, Report& rep, const std::string& label) {
  const std::string where = label + ":" + e.path();
  if (!e.is_object()) {
    // a bare value (keyword_args {"causal": true})
    const json& v = e.raw();
    if (v.is_null()) return;
    if ((name == "causal" || name == "is_causal") && v.is_boolean()) {
      call.causal = {v.get<bool>(), where};
      return;
    }
    if (name == "deterministic" && v.is_boolean()) {
      call.deterministic = {v.get<bool>(), where};
      return;
    }
    if ((name == "dropout_p" || name == "softcap") && v.is_number()) {
      double x = v.get<double>();
      if (!std::isfinite(x) || x < 0 || x > (name == "dropout_p" ? 1.0 : 1e9))
        e.fail(name == "dropout_p" ? "a dropout in [0, 1]" : "a softcap in [0, 1e9]");
      (name == "dropout_p" ? call.dropout : call.softcap) = std::make_pair(x, where);
      return;
    }
    if (is_scalar_name(canonical_names(name).front()) && v.is_number_integer()) {
      for (const auto& n : canonical_names(name)) call.scalars[n] = {e.as_int(-(int64_t{1} << 62), int64_t{1} << 62), where};
      return;
    }
    if (name == "window_size" && v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer()) {
      const int64_t left = v[0].get<int64_t>(), right = v[1].get<int64_t>();
      if (left < 0 && right < 0) return;  // (-1, -1): no window, what the batch says by omitting it
      if (left >= -1 && right >= -1 && left <= (int64_t{1} << 62) && right <= (int64_t{1} << 62)) {
        call.window = {{left, right}, where};
        return;
      }
    }
    if (name == "pack_gqa" && v.is_boolean()) {
      call.pack_gqa = {v.get<bool>(), where};
      return;
    }
    if (name == "num_splits" && v.is_number_integer()) {
      call.num_splits = {e.as_int(0, int64_t{1} << 20), where};
      return;
    }
    std::string why = name == "softmax_scale" ? "no invariant reads the scale; the batch format has no key for it"
                      : name == "window_size" ? "not a [left, right] pair of ints >= -1"
                                              : "not an argument the batch format describes";
    rep.skip(where + " " + name + "=" + v.dump(-1, ' ', false, json::error_handler_t::replace), why);
    return;
  }
  // a described tensor or a {"name", "value"} scalar
  const auto names = canonical_names(name);
  const std::string& canon = names.front();
  if (e.has("value") && !e.has("shape")) {
    read_entry(e.at("value"), name, call, rep, label);
    return;
  }
  TensorFacts f;
  f.from = where;
  f.file = label;
  f.path = e.path();
  for (auto it = e.raw().begin(); it != e.raw().end(); ++it) {
    const std::string k = it.key();
    Node v = e.at(k);
    if (k == "name") continue;
    if (k == "shape") {
      f.shape = v.as_int_array(0, e.limits().max_dimension, 8);
    } else if (k == "dtype") {
      f.dtype_text = v.as_string();
      f.dtype = record_dtype(f.dtype_text);
      if (!f.dtype) rep.skip(where + "/dtype \"" + escape_text(f.dtype_text) + "\"", "not a dtype the batch format knows");
    } else if (k == "device") {
      f.device = v.as_string();
    } else if (k == "is_contiguous") {
      f.contiguous = v.as_bool();
    } else if (k == "requires_grad") {
      f.requires_grad = v.as_bool();
    } else if (k == "stride") {
      (void)v.as_int_array(-e.limits().max_dimension, e.limits().max_dimension, 8);  // validated; is_contiguous says it
      if (!e.has("is_contiguous")) rep.skip(where + "/stride", "the batch records contiguity (is_contiguous), not strides");
    } else if (k == "values" && is_index_name(canon)) {
      IntTensor t;
      t.values = v.as_int_array(-(int64_t{1} << 62), int64_t{1} << 62, e.limits().max_array_elements);
      t.shape = {static_cast<int64_t>(t.values.size())};
      t.dtype = DType::int32;
      f.values = t;
    } else {
      rep.skip(where + "/" + escape_text(k), "not a fact the batch format records");
    }
  }
  if (is_scalar_name(canon)) {
    rep.skip(where, "a tensor-valued " + canon + " without its value (the shape alone does not give it)");
    return;
  }
  if (!is_qkv(canon) && !is_index_name(canon)) {
    if (is_backward_only(canon)) {
      call.backward_from = call.backward_from ? *call.backward_from + ", " + where : where;
      return;
    }
    rep.skip(where + " " + escape_text(name), "not an argument the batch format describes");
    return;
  }
  for (const auto& n : names) {
    TensorFacts& into = call.tensors[n];
    if (f.values) f.values_from = where + "/values";
    if (!f.values && into.values) {
      // keep the values an .npy gave; take the record's description
      if (f.shape && *f.shape != into.values->shape)
        e.fail("the shape of " + into.values_from + ", " + shape_text(into.values->shape), shape_text(*f.shape));
      f.values = into.values;
      f.values_from = into.values_from;
    }
    into = f;
  }
}

void read_record(const fs::path& path, const Args& args, Call& call, Report& rep, const LoadLimits& limits) {
  const std::string label = path.string();
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) throw InputError(label, "", "a readable call record", ec.message());
  if (static_cast<int64_t>(size) > limits.max_json_bytes)
    throw InputError(label, "", "a file of at most " + std::to_string(limits.max_json_bytes) + " bytes",
                     std::to_string(size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json doc = parse_json_text(text, label, limits);
  Node root(doc, "", label, limits);
  // one record, or an array of records (one per call): --call picks one by call_index
  std::optional<Node> rec;
  if (root.is_array()) {
    std::vector<int64_t> seen;
    for (size_t i = 0; i < root.size(); ++i) {
      Node r = root[i];
      if (!r.is_object()) r.fail("a call record (an object)");
      int64_t idx = r.has("call_index") ? r.at("call_index").as_int(0, int64_t{1} << 62) : static_cast<int64_t>(i);
      seen.push_back(idx);
      if (args.call_index && *args.call_index == idx) rec = r;
    }
    if (!rec) {
      std::string list;
      for (size_t i = 0; i < seen.size() && i < 20; ++i) list += (i ? ", " : "") + std::to_string(seen[i]);
      if (seen.size() > 20) list += ", ...";
      if (seen.size() == 1 && !args.call_index) rec = root[0];
      else
        root.fail(args.call_index ? "a record with call_index " + std::to_string(*args.call_index)
                                  : "one record, or --call N to pick one of several",
                  std::to_string(seen.size()) + " records (call_index " + list + ")");
    }
  } else if (root.is_object()) {
    rec = root;
    if (args.call_index && root.has("call_index") && root.at("call_index").as_int() != *args.call_index)
      root.at("call_index").fail("call_index " + std::to_string(*args.call_index) + " (--call)");
  } else {
    root.fail("a call record (an object) or an array of them");
  }
  const Node& r = *rec;
  if (!r.has("positional_args") && !r.has("input_shapes") && !r.has("keyword_args") && !r.has("kwargs"))
    r.fail("a call record with \"positional_args\", \"keyword_args\" or \"input_shapes\"", "none of them");
  for (const char* key : {"operator", "function_name"}) {
    if (auto op = r.get(key)) {
      std::string s = op->as_string();
      if (s.find("varlen") == std::string::npos)
        op->fail("a varlen call (flash_attn_varlen_func): the batch format describes no other", "\"" + escape_text(s) + "\"");
    }
  }
  std::string desc;
  for (auto it = r.raw().begin(); it != r.raw().end(); ++it) {
    const std::string k = it.key();
    Node v = r.at(k);
    if (k == "positional_args") {
      if (!v.is_array()) v.fail("an array of arguments");
      if (v.size() > 3) call.positional_from = label + ":" + v.path();
      for (size_t i = 0; i < v.size(); ++i) {
        Node e = v[i];
        std::string name;
        if (e.is_object() && e.has("name")) name = e.at("name").as_string();
        else if (i < std::size(kVarlenOrder)) name = kVarlenOrder[i];
        else {
          rep.skip(label + ":" + e.path(), "an unnamed argument past max_seqlen_k (its parameter depends on the release)");
          continue;
        }
        read_entry(e, name, call, rep, label);
      }
    } else if (k == "keyword_args" || k == "kwargs") {
      if (v.is_object()) {
        for (auto kt = v.raw().begin(); kt != v.raw().end(); ++kt) read_entry(v.at(kt.key()), kt.key(), call, rep, label);
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          Node e = v[i];
          if (!e.is_object() || !e.has("name")) e.fail("a keyword argument with a \"name\"");
          read_entry(e, e.at("name").as_string(), call, rep, label);
        }
      } else {
        v.fail("an object or array of keyword arguments");
      }
    } else if (k == "input_shapes") {
      if (!v.is_object()) v.fail("an object of argument shapes");
      for (auto kt = v.raw().begin(); kt != v.raw().end(); ++kt) {
        Node s = v.at(kt.key());
        const auto names = canonical_names(kt.key());
        if (s.is_array()) {
          auto shape = s.as_int_array(0, limits.max_dimension, 8);
          for (const auto& n : names)
            if (is_qkv(n) || is_index_name(n)) {
              auto& f = call.tensors[n];
              if (!f.shape) f.shape = shape, f.from = label + ":" + s.path(), f.file = label, f.path = s.path();
              else if (*f.shape != shape)
                s.fail("the shape positional_args gives, " + shape_text(*f.shape), shape_text(shape));
            }
          if (!is_qkv(names.front()) && !is_index_name(names.front()))
            rep.skip(label + ":" + s.path(), "not an argument the batch format describes");
        } else {
          read_entry(s, kt.key(), call, rep, label);
        }
      }
    } else if (k == "rank" || k == "call_index" || k == "function_module" || k == "operator" || k == "function_name") {
      desc += (desc.empty() ? "" : ", ") + k + " " + (v.is_string() ? escape_text(v.as_string()) : v.raw().dump());
    } else {
      rep.skip(label + ":" + v.path(), "not a field of the call records this importer reads");
    }
  }
  if (!desc.empty()) call.description.push_back(path.filename().string() + ": " + desc);
  if (auto m = r.get("function_module"))
    rep.skip(label + ":/function_module", "no flash-attn release follows from a module name (give --flash-attn VERSION)");
}

// ---- the batch -----------------------------------------------------------------------------

ojson int_array(const IntTensor& t) {
  ojson a = ojson::array();
  for (int64_t v : t.values) a.push_back(v);
  return a;
}

// Writes the batch file and its side files; returns the batch's JSON.
ojson build_batch(const Args& args, Call& call, Report& rep, const fs::path& out) {
  ojson b;
  b["format"] = "attn-doctor/batch@1";
  b["name"] = args.name.empty() ? out.stem().string() : args.name;
  std::string desc = "Imported by attn-doctor import from";
  for (const auto& in : args.inputs) desc += " " + fs::path(in.substr(in.find('=') == std::string::npos ? 0 : in.find('=') + 1)).filename().string();
  for (const auto& d : call.description) desc += "; " + d;
  b["description"] = desc + ".";

  TensorFacts* q = call.tensors.count("q") ? &call.tensors["q"] : nullptr;
  TensorFacts* k = call.tensors.count("k") ? &call.tensors["k"] : nullptr;
  TensorFacts* v = call.tensors.count("v") ? &call.tensors["v"] : nullptr;
  for (auto* t : {q, k, v})
    if (t && t->shape && t->shape->size() != 3)
      throw InputError(t->file, t->path, "a packed (total, heads, head_dim) tensor of rank 3 for a varlen call",
                       "shape " + shape_text(*t->shape));

  // pass: a training step when q requires grad or a backward input was dumped
  std::string pass = "forward";
  if (!args.pass.empty()) {
    pass = args.pass;
    rep.map("--pass", "pass", pass);
  } else if (q && q->requires_grad && *q->requires_grad) {
    pass = "training";
    rep.map(q->from + "/requires_grad", "pass", "\"training\" (q requires grad; grad mode is not recorded)");
  } else if (call.backward_from) {
    pass = "training";
    rep.map(*call.backward_from, "pass", "\"training\" (inputs of the backward were dumped)");
  } else {
    rep.dflt("pass", "\"forward\" (nothing in the inputs says a backward ran; give --pass training)");
  }
  b["pass"] = pass;

  ojson env = ojson::object();
  if (!args.flash_attn.empty()) {
    if (!parse_version(args.flash_attn)) throw InputError("--flash-attn", "", "a PEP 440 version", "\"" + escape_text(args.flash_attn) + "\"");
    env["flash_attn"] = args.flash_attn;
    rep.map("--flash-attn", "environment.flash_attn", args.flash_attn);
  }
  if (q && q->device) {
    if (batch_device(*q->device)) {
      env["device"] = *q->device;
      rep.map(q->from + "/device", "environment.device", *q->device);
    } else {
      rep.skip(q->from + "/device \"" + escape_text(*q->device) + "\"",
               "not a device the batch format names (cpu, cuda, cuda:N, meta): environment.device is the default cuda:0");
    }
  }
  if (!env.empty()) b["environment"] = env;

  // model: heads and head_dim from the flags, else q's and k's shapes
  ojson model;
  auto from_flag_or_shape = [&](const char* key, const char* flag, const std::optional<int64_t>& given, TensorFacts* t,
                                int axis) -> std::optional<int64_t> {
    if (given) {
      rep.map(flag, std::string("model.") + key, std::to_string(*given));
      if (t && t->shape && (*t->shape)[axis] != *given)
        rep.skip(t->from + " shape " + shape_text(*t->shape), std::string(flag) + " overrides its axis " + std::to_string(axis));
      return given;
    }
    if (t && t->shape) {
      rep.map(t->from + " shape " + shape_text(*t->shape), std::string("model.") + key, std::to_string((*t->shape)[axis]));
      return (*t->shape)[axis];
    }
    return std::nullopt;
  };
  auto heads = from_flag_or_shape("num_heads", "--num-heads", args.num_heads, q, 1);
  if (!heads) throw InputError(out.string(), "/model/num_heads", "q's shape (q.npy or a record) or --num-heads", "neither");
  if (*heads < 1 || *heads > (int64_t{1} << 20)) throw InputError(out.string(), "/model/num_heads", "1 to 2^20 heads", std::to_string(*heads));
  model["num_heads"] = *heads;
  if (auto kv = from_flag_or_shape("num_kv_heads", "--num-kv-heads", args.num_kv_heads, k, 1)) {
    if (*kv < 1 || *kv > (int64_t{1} << 20)) throw InputError(out.string(), "/model/num_kv_heads", "1 to 2^20 heads", std::to_string(*kv));
    model["num_kv_heads"] = *kv;
  } else {
    rep.dflt("model.num_kv_heads", std::to_string(*heads) + " (num_heads: no k shape in the inputs)");
  }
  auto dim = from_flag_or_shape("head_dim", "--head-dim", args.head_dim, q, 2);
  if (!dim) throw InputError(out.string(), "/model/head_dim", "q's shape (q.npy or a record) or --head-dim", "neither");
  if (*dim < 1 || *dim > (int64_t{1} << 20)) throw InputError(out.string(), "/model/head_dim", "1 to 2^20", std::to_string(*dim));
  model["head_dim"] = *dim;
  if (v && v->shape && q && q->shape && (*v->shape)[2] != (*q->shape)[2])
    rep.skip(v->from + " shape " + shape_text(*v->shape), "a value head_dim other than q's is not describable");

  // dtype: the flag, else q's dtype when it is one a kernel takes
  if (!args.dtype.empty()) {
    auto d = parse_dtype(args.dtype);
    if (!d || !(*d == DType::fp16 || *d == DType::bf16 || *d == DType::fp32 || *d == DType::fp8_e4m3))
      throw InputError("--dtype", "", "fp16, bf16, fp32 or fp8_e4m3", "\"" + escape_text(args.dtype) + "\"");
    model["dtype"] = to_string(*d);
    rep.map("--dtype", "model.dtype", to_string(*d));
  } else if (q && q->dtype && (*q->dtype == DType::fp16 || *q->dtype == DType::bf16 || *q->dtype == DType::fp32 ||
                               *q->dtype == DType::fp8_e4m3)) {
    model["dtype"] = to_string(*q->dtype);
    rep.map(q->from + " dtype " + (q->dtype_text.empty() ? to_string(*q->dtype) : q->dtype_text), "model.dtype",
            to_string(*q->dtype));
  } else {
    model["dtype"] = "bf16";
    rep.dflt("model.dtype", "bf16 (the inputs give no q dtype a kernel takes; give --dtype)");
  }
  if (!args.causal.empty()) {
    model["causal"] = args.causal == "true";
    rep.map("--causal", "model.causal", args.causal);
  } else if (call.causal) {
    model["causal"] = call.causal->first;
    rep.map(call.causal->second, "model.causal", call.causal->first ? "true" : "false");
  } else {
    model["causal"] = true;
    rep.dflt("model.causal", "true (the batch format's default; flash_attn_varlen_func's own is false: give --causal)");
  }
  if (call.dropout) {
    model["dropout"] = call.dropout->first;
    rep.map(call.dropout->second, "model.dropout", std::to_string(call.dropout->first));
  }
  if (call.softcap && call.softcap->first > 0) {
    model["softcap"] = call.softcap->first;
    rep.map(call.softcap->second, "model.softcap", std::to_string(call.softcap->first));
  }
  if (call.deterministic) {
    model["deterministic"] = call.deterministic->first;
    rep.map(call.deterministic->second, "model.deterministic", call.deterministic->first ? "true" : "false");
  }
  b["model"] = model;

  // varlen: cu_seqlens values from an .npy or the record, else one segment over q's rows
  ojson varlen;
  ojson tensors = ojson::object();
  auto cu = [&](const std::string& name, const char* inline_key, const char* file_key, TensorFacts* rows_of) -> bool {
    auto it = call.tensors.find(name);
    if (it == call.tensors.end()) return false;
    TensorFacts& f = it->second;
    if (!f.values) {
      if (f.shape && f.shape->size() == 1 && (*f.shape)[0] == 2 && rows_of && rows_of->shape) {
        IntTensor t;
        t.shape = {2};
        t.values = {0, (*rows_of->shape)[0]};
        t.dtype = f.dtype.value_or(DType::int32);
        f.values = t;
        rep.dflt(std::string("varlen.") + inline_key,
                 "[0, " + std::to_string((*rows_of->shape)[0]) + "] (the record holds its shape [2], not its values: one segment over all rows assumed)");
      } else {
        throw InputError(f.file, f.path, "the values of " + name + " (give them as " + name + "=FILE.npy)",
                         f.shape ? "only its shape " + shape_text(*f.shape) : "no values");
      }
    } else {
      rep.map(f.values_from, std::string("varlen.") + (f.values->numel() > static_cast<int64_t>(kInlineCuSeqlens) ? file_key : inline_key),
              std::to_string(f.values->numel()) + " values, " + to_string(f.values->dtype));
    }
    if (f.values->numel() > static_cast<int64_t>(kInlineCuSeqlens)) {
      fs::path side = out.parent_path() / (out.stem().string() + "." + name + ".npy");
      std::ofstream o(side, std::ios::binary | std::ios::trunc);
      const std::string bytes = make_npy(*f.values);
      o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!o) throw InputError(side.string(), "", "a writable file", "a write error");
      varlen[file_key] = side.filename().string();
      rep.side_files.push_back(side.string());
    } else {
      varlen[inline_key] = int_array(*f.values);
      if (f.values->dtype != DType::int32) tensors[name]["dtype"] = to_string(f.values->dtype);
    }
    if (f.dtype && !f.dtype_text.empty()) {
      // a record's dtype (also beside values from an .npy): what the kernel got
      tensors[name]["dtype"] = to_string(*f.dtype);
      rep.map(f.from + "/dtype", "tensors." + name + ".dtype", to_string(*f.dtype));
    }
    if (f.device) {
      if (batch_device(*f.device)) {
        tensors[name]["device"] = *f.device;
        rep.map(f.from + "/device", "tensors." + name + ".device", *f.device);
      } else {
        rep.skip(f.from + "/device \"" + escape_text(*f.device) + "\"", "not a device the batch format names");
      }
    }
    return true;
  };
  if (!cu("cu_seqlens_q", "cu_seqlens_q", "cu_seqlens_file", q))
    throw InputError(out.string(), "/varlen/cu_seqlens_q", "cu_seqlens_q (an .npy or a call record naming it)", "none in the inputs");
  if (!cu("cu_seqlens_k", "cu_seqlens_k", "cu_seqlens_k_file", k ? k : q))
    rep.dflt("varlen.cu_seqlens_k", "cu_seqlens_q (none in the inputs)");
  for (const char* m : {"max_seqlen_q", "max_seqlen_k"}) {
    if (auto it = call.scalars.find(m); it != call.scalars.end()) {
      varlen[m] = it->second.first;
      rep.map(it->second.second, std::string("varlen.") + m, std::to_string(it->second.first));
    } else {
      rep.dflt(std::string("varlen.") + m, std::string(m) == "max_seqlen_q" ? "the largest cu_seqlens_q segment (none in the inputs)"
                                                                          : "max_seqlen_q (none in the inputs)");
    }
  }
  if (auto it = call.tensors.find("seqused_k"); it != call.tensors.end()) {
    if (it->second.values && it->second.values->rank() == 1) {
      varlen["seqused_k"] = int_array(*it->second.values);
      rep.map(it->second.values_from, "varlen.seqused_k", std::to_string(it->second.values->numel()) + " values");
    } else {
      rep.skip(it->second.from, "seqused_k without its values (the shape alone does not give them)");
    }
  }
  if (auto it = call.tensors.find("seqused_q"); it != call.tensors.end()) {
    if (it->second.values && it->second.values->rank() == 1) {
      varlen["seqused_q"] = int_array(*it->second.values);
      rep.map(it->second.values_from, "varlen.seqused_q", std::to_string(it->second.values->numel()) + " values");
    } else {
      rep.skip(it->second.from, "seqused_q without its values (the shape alone does not give them)");
    }
  }
  // call-site facts as passed
  if (call.window) {
    varlen["window_size"] = ojson::array({call.window->first.first, call.window->first.second});
    rep.map(call.window->second, "varlen.window_size",
            "[" + std::to_string(call.window->first.first) + ", " + std::to_string(call.window->first.second) + "]");
  }
  if (call.pack_gqa) {
    varlen["pack_gqa"] = call.pack_gqa->first;
    rep.map(call.pack_gqa->second, "varlen.pack_gqa", call.pack_gqa->first ? "true" : "false");
  }
  if (call.num_splits) {
    varlen["num_splits"] = call.num_splits->first;
    rep.map(call.num_splits->second, "varlen.num_splits", std::to_string(call.num_splits->first));
  }
  if (call.positional_from) {
    varlen["binding"] = "positional";
    rep.map(*call.positional_from, "varlen.binding", "\"positional\" (more than q, k, v passed by position)");
  }
  // rows: q's and k's first dimension
  if (q && q->shape) {
    varlen["total_q"] = (*q->shape)[0];
    rep.map(q->from + " shape " + shape_text(*q->shape), "varlen.total_q", std::to_string((*q->shape)[0]));
  } else {
    rep.dflt("varlen.total_q", "cu_seqlens_q[-1] (no q shape in the inputs)");
  }
  if (k && k->shape) {
    varlen["total_k"] = (*k->shape)[0];
    rep.map(k->from + " shape " + shape_text(*k->shape), "varlen.total_k", std::to_string((*k->shape)[0]));
  }
  // per-tensor facts the batch records
  for (auto* t : {q, k, v}) {
    if (!t) continue;
    const std::string n = t == q ? "q" : t == k ? "k" : "v";
    if (t->contiguous) {
      tensors[n]["contiguous"] = *t->contiguous;
      rep.map(t->from + "/is_contiguous", "tensors." + n + ".contiguous", *t->contiguous ? "true" : "false");
    }
    if (t != q && t->dtype && q && q->dtype && *t->dtype != *q->dtype) {
      tensors[n]["dtype"] = to_string(*t->dtype);
      rep.map(t->from + "/dtype", "tensors." + n + ".dtype", to_string(*t->dtype));
    }
    if (t != q && t->device && q && q->device && *t->device != *q->device && batch_device(*t->device)) {
      tensors[n]["device"] = *t->device;
      rep.map(t->from + "/device", "tensors." + n + ".device", *t->device);
    }
  }
  b["varlen"] = varlen;
  if (!tensors.empty()) b["tensors"] = tensors;
  return b;
}

// "NAME=PATH" names an .npy whose file name is not the argument's; NAME=INTEGER gives a scalar.
void read_inputs(const Args& args, Call& call, Report& rep, const LoadLimits& limits) {
  for (const auto& in : args.inputs) {
    std::string name, value = in;
    if (auto eq = in.find('='); eq != std::string::npos && in.find('/') > eq) {
      name = in.substr(0, eq);
      value = in.substr(eq + 1);
      if (name.empty()) throw InputError(in, "", "NAME=FILE.npy or NAME=INTEGER", "an empty NAME");
      if (is_scalar_name(canonical_names(name).front()) && !value.empty() &&
          value.find_first_not_of("0123456789") == std::string::npos && value.size() < 19) {
        for (const auto& n : canonical_names(name)) call.scalars[n] = {std::stoll(value), "command line " + name};
        continue;
      }
    }
    fs::path path(value);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw InputError(value, "", "an existing .npy or .json file", ec ? ec.message() : "no such regular file");
    const std::string ext = path.extension().string();
    if (ext == ".json") {
      if (!name.empty()) throw InputError(in, "", "a call record given as FILE.json (no NAME=)", "NAME=" + escape_text(name));
      read_record(path, args, call, rep, limits);
    } else if (ext == ".npy") {
      read_npy_input(name.empty() ? path.stem().string() : name, path, call, rep, limits);
    } else {
      throw InputError(value, "", "a .npy dump or a .json call record", "the extension \"" + escape_text(ext) + "\"");
    }
  }
}

void print_text(const Report& rep, const fs::path& out, const std::vector<std::string>& records) {
  std::cout << "wrote " << escape_text(out.string());
  for (const auto& s : rep.side_files) std::cout << " and " << escape_text(s);
  std::cout << "\n";
  // a record's fields by their JSON path alone when one record file was read
  auto shown = [&](const std::string& source) {
    if (records.size() == 1 && source.rfind(records[0] + ":", 0) == 0) return source.substr(records[0].size() + 1);
    return source;
  };
  if (records.size() == 1) std::cout << "from " << escape_text(records[0]) << " (fields by JSON path)\n";
  auto section = [&](const char* title, const std::vector<Line>& lines, bool with_key) {
    if (lines.empty()) return;
    std::cout << "\n" << title << ":\n";
    for (const auto& l : lines) {
      if (with_key && !l.source.empty()) std::cout << "  " << shown(l.source) << " -> " << l.key << ": " << l.note << "\n";
      else if (with_key) std::cout << "  " << l.key << ": " << l.note << "\n";
      else std::cout << "  " << shown(l.source) << ": " << l.note << "\n";
    }
  };
  section("mapped", rep.mapped, true);
  section("defaulted (not in the inputs)", rep.defaulted, true);
  section("not mapped", rep.not_mapped, false);
}

ojson report_json(const Report& rep, const fs::path& out) {
  ojson j;
  j["written"] = out.string();
  j["side_files"] = rep.side_files;
  auto lines = [](const std::vector<Line>& ls, bool keyed) {
    ojson a = ojson::array();
    for (const auto& l : ls) {
      ojson e;
      if (!l.source.empty()) e["input"] = l.source;
      if (keyed) e["key"] = l.key;
      e[keyed ? "value" : "why"] = l.note;
      a.push_back(e);
    }
    return a;
  };
  j["mapped"] = lines(rep.mapped, true);
  j["defaulted"] = lines(rep.defaulted, true);
  j["not_mapped"] = lines(rep.not_mapped, false);
  return j;
}

}  // namespace

Subcommand add_import(CLI::App& root, const Globals&) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand(
      "import", "write a batch file from a call dump: .npy files of the varlen arguments, or a per-call JSON record");
  sub->add_option("INPUTS", args->inputs,
                  "cu_seqlens_q.npy, max_seqlen_k.npy, q.npy ... (named by the argument; NAME=FILE.npy or "
                  "max_seqlen_q=N otherwise), or a call record FILE.json")
      ->required();
  sub->add_option("-o,--output", args->output, "the batch file to write (side .npy files go beside it)")->required();
  sub->add_option("--call", args->call_index, "the call_index to import from a record file holding several calls");
  sub->add_option("--num-heads", args->num_heads, "H, when no q shape is in the inputs (overrides it otherwise)");
  sub->add_option("--num-kv-heads", args->num_kv_heads, "Hk, when no k shape is in the inputs");
  sub->add_option("--head-dim", args->head_dim, "D, when no q shape is in the inputs");
  sub->add_option("--dtype", args->dtype, "dtype of q, k, v (fp16, bf16, fp32, fp8_e4m3)");
  sub->add_option("--causal", args->causal, "the call's causal flag")->check(CLI::IsMember({"true", "false"}));
  sub->add_option("--pass", args->pass, "forward, or training (forward then backward)")
      ->check(CLI::IsMember({"forward", "training"}));
  sub->add_option("--flash-attn", args->flash_attn, "the flash-attn release the call went through");
  sub->add_option("--name", args->name, "the batch's name (default: the output file's stem)");
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    const LoadLimits limits;
    Call call;
    Report rep;
    read_inputs(*args, call, rep, limits);
    const fs::path out(args->output);
    ojson batch = build_batch(*args, call, rep, out);
    {
      std::ofstream o(out, std::ios::binary | std::ios::trunc);
      o << batch.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
      if (!o) throw InputError(out.string(), "", "a writable file", "a write error");
    }
    // what was written must load: the loader's limits and rules apply to imported values too
    try {
      (void)load_batch_file(out, limits);
    } catch (const InputError&) {
      std::error_code ec;
      fs::remove(out, ec);
      for (const auto& side : rep.side_files) fs::remove(side, ec);
      throw;
    }
    if (args->format == "json")
      std::cout << report_json(rep, out).dump(2, ' ', false, json::error_handler_t::replace) << std::endl;
    else {
      std::vector<std::string> records;
      for (const auto& in : args->inputs)
        if (fs::path(in).extension() == ".json") records.push_back(in);
      print_text(rep, out, records);
    }
    return 0;
  };
  return s;
}

}  // namespace ad::cli
