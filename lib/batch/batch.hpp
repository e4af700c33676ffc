// The parsed batch file (docs/spec/batch-format.md, version 1) as a plain value type.
//
// Everything downstream (conversion replay, invariant checks, execution backends, reports)
// takes a `Batch` and nothing else from the input: no stage re-reads JSON. The loader fills
// every default the spec defines, so consumers never have to guess (`query_length` is always
// set once `batch` is present, `num_kv_heads` always set, the intent is always resolved).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vocab/api.hpp"
#include "vocab/dtype.hpp"
#include "vocab/gpu_arch.hpp"
#include "vocab/outcome.hpp"
#include "vocab/version.hpp"

namespace ad {

// A small dense integer tensor (masks, position ids, cu_seqlens, indices). Row-major.
// Values are widened to int64 whatever the source dtype; `dtype` remembers the source.
struct IntTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
  DType dtype = DType::int64;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? rank() + i : i)); }
};

// ---------------------------------------------------------------------------------------
// environment / model

struct Environment {
  std::optional<Version> transformers;
  std::optional<Version> flash_attn;
  std::optional<Version> triton;
  std::optional<Version> torch;
  std::optional<Version> fla;           // flash-linear-attention (fla-core)
  std::optional<Version> flash_attn_4;  // the separately installed flash-attn 4 package (CuTe DSL)
  std::optional<Version> flash_attn_cute;  // the flash-attn 2 release whose bundled flash_attn/cute took the call
  std::optional<Version> trl;           // TRL: the release whose collator a `collator` block replays
  std::string device = "cuda:0";
  std::optional<GpuArch> gpu_arch;      // the GPU the call ran on (FA4 and cuDNN pick kernels by it)
  std::optional<Version> transformer_engine;  // Transformer Engine (DotProductAttention, qkv_format "thd")
  // The execution context and the libraries around the call (batch-format.md `environment`):
  std::string compile = "none";         // torch.compile around the model: none | default | fullgraph
  std::optional<Version> diffusers;     // diffusers (its attention dispatcher: `dispatch`)
  std::optional<Version> xformers;      // xformers (fmha and its attn_bias objects: `dispatch`)
  std::optional<Version> axolotl;       // axolotl (its ring_attn_func under context parallelism: `dispatch`)
};

struct Model {
  int64_t num_heads = 0;     // H
  int64_t num_kv_heads = 0;  // Hk (defaults to H)
  int64_t head_dim = 0;      // D
  std::optional<int64_t> hidden_size;
  DType dtype = DType::bf16;
  bool causal = true;
  std::optional<int64_t> sliding_window;  // W tokens
  std::optional<double> softcap;
  double dropout = 0.0;
  bool deterministic = false;  // flash_attn's deterministic backward (a training step's dq_accum splits)
  std::string architecture;  // "" when not given; lower-case as written
  int64_t position_origin = 0;
  bool position_origin_given = false;
  // the checkpoint's own modeling file (trust_remote_code), which calls its own _get_unpad_data
  // on the mask the model received (model.remote_code)
  bool remote_code = false;
};

// ---------------------------------------------------------------------------------------
// batch: mask, position ids, lengths

enum class MaskEncoding { dense, lengths, file, four_d };

// How to read `Mask::tensor`:
//  - values:   what a 2-D (or explicitly written N-D) mask holds: 0/1, booleans, segment ids.
//  - boolean:  a 4-D boolean mask, 1 = attended.
//  - additive: a 4-D additive float mask; the tensor stores 1 where the real tensor holds the
//              large negative value (dtype minimum) and 0 where it holds 0.0 (attended).
//              `torch.nonzero` on the real tensor therefore selects the masked entries.
enum class MaskStyle { values, boolean, additive };

struct Mask {
  MaskEncoding encoding = MaskEncoding::dense;
  MaskStyle style = MaskStyle::values;
  IntTensor tensor;                      // materialised (size capped by LoadLimits)
  std::optional<IntTensor> from;         // 4-D: the 2-D mask it was built from
  bool four_d_causal = false;            // 4-D: causal structure included
  std::optional<int> asserted_rank;      // "rank" key, checked by the loader
  std::string padding_side;              // lengths encoding: "left" | "right"
  std::filesystem::path file;            // file encoding: resolved path
  // "level": "model": the mask given to the model's forward, before the release's mask
  // preparation (docs/spec/conversions.md "The model's mask preparation"); false: the mask
  // handed to the attention function
  bool model_level = false;
};

enum class PositionEncoding { dense, file, from_mask, packed, arange };

struct PositionIds {
  PositionEncoding encoding = PositionEncoding::dense;
  bool mrope = false;                    // replicated to (3, B, S)
  // docs/spec/batch-format.md: "level": "attention" (default:
  // the ids handed to the attention function) or "model" (the ids given to the model's
  // forward; the replay then derives what the model hands on, e.g. Qwen2-VL's text axis).
  bool model_level = false;
  IntTensor tensor;                      // rank 1 (S), 2 (B, S) or 3 (3, B, S)
  std::vector<int64_t> packed_lengths;   // packed encoding
  std::filesystem::path file;
};

struct Cache {
  std::string kind;  // dynamic | static | hybrid | sliding
  std::optional<int64_t> max_cache_len;
  std::optional<int64_t> past_length;
};

enum class CallStage { prefill, decode };

// `batch.flash_kwargs` (docs/spec/batch-format.md): the keyword arguments
// transformers >= 4.47 accepts in `_flash_attention_forward` (`cu_seq_lens_q/k`,
// `max_length_q/k`), as a data collator or trainer passes them.
struct FlashKwargs {
  std::optional<std::vector<int64_t>> cu_seq_lens_q;
  std::optional<std::vector<int64_t>> cu_seq_lens_k;
  std::optional<int64_t> max_length_q;
  std::optional<int64_t> max_length_k;
};

struct BatchInputs {
  std::optional<Mask> attention_mask;
  std::optional<PositionIds> position_ids;
  // Resolved by the loader: given values, else derived (B from mask/position ids/batch_size,
  // Lk from the mask width or position-ids width, Lq = Lk for prefill, 1 for decode).
  int64_t batch_size = 0;
  int64_t query_length = 0;
  int64_t kv_length = 0;
  bool batch_size_given = false, query_length_given = false, kv_length_given = false;
  std::optional<Cache> cache;
  CallStage stage = CallStage::prefill;
  bool stage_given = false;
  std::optional<FlashKwargs> flash_kwargs;
  // `batch.seq_idx` (docs/spec/batch-format.md): the `seq_idx` model kwarg a collator passes
  // (transformers' DataCollatorWithFlattening `return_seq_idx`), (B or 1, Lq) as written.
  std::optional<IntTensor> seq_idx;
};

// ---------------------------------------------------------------------------------------
// explicit varlen arguments, tensor overrides, rotary, launch

struct MaxSeqlenArg {
  int64_t value = 0;
  bool is_tensor = false;  // given as {"tensor": N}: a 0-d tensor
};

// FlashAttention-3's paged KV cache (`varlen.page_table`, flash_attn_with_kvcache's page_table):
// k_cache / v_cache hold `num_pages` pages of `page_size` rows; row b of the table lists the
// pages of sequence b in order. `values` holds the table when the batch gives it, else only its
// shape is known.
struct PageTable {
  int64_t page_size = 0;
  int64_t num_pages = 0;      // k_cache.shape[0]
  int64_t rows = 0;           // page_table.shape[0] (batch_size_k)
  int64_t pages_per_seq = 0;  // page_table.shape[1] (max_num_pages_per_seq)
  std::optional<std::vector<int64_t>> values;  // rows * pages_per_seq, row-major
  DType dtype = DType::int32;
};

// `varlen.qv` (FA3): the extra query tensor q_v, (total_q, num_heads, head_dim) as passed.
struct QvArg {
  int64_t head_dim = 0;
  std::optional<DType> dtype;  // absent: q's
};

struct ExplicitVarlen {
  // As written (JSON arrays are 1-D or 2-D; a .npy keeps its own shape). dtype: the
  // `tensors` override if given, the .npy dtype, else int32 (what a correct call passes).
  IntTensor cu_seqlens_q;
  IntTensor cu_seqlens_k;                   // defaults to cu_seqlens_q
  bool cu_seqlens_k_given = false;
  MaxSeqlenArg max_seqlen_q;                // defaults to the largest q segment
  MaxSeqlenArg max_seqlen_k;                // defaults to max_seqlen_q
  bool max_seqlen_q_given = false, max_seqlen_k_given = false;
  std::optional<std::vector<int64_t>> seqused_k;
  int64_t total_q = 0, total_k = 0;         // default cu[-1]
  bool total_q_given = false, total_k_given = false;
  std::filesystem::path cu_seqlens_file;    // when cu_seqlens_q came from a .npy
  std::filesystem::path cu_seqlens_k_file;  // when cu_seqlens_k came from a .npy
  // Call-site facts (absent: not known, the API's defaults apply).
  std::optional<Api> api;                   // the API that received the call
  std::optional<std::vector<int64_t>> seqused_q;  // FA3 / FA4 / TE
  std::optional<std::pair<int64_t, int64_t>> window_size;  // (left, right) as passed; -1 = unlimited
  std::optional<Bound> binding;             // how the caller passed the arguments
  std::optional<bool> pack_gqa;             // FA3 / FA4
  std::optional<int64_t> num_splits;        // FA3 / FA4 / torch varlen_attn
  std::optional<bool> enable_gqa;           // torch varlen_attn (2.12.0 on)
  // Transformer Engine's THD arguments (docs/spec/transformer-engine-thd.md): the offsets of
  // each sequence's first row with the padding after it (absent: not passed), whether padding
  // lies between sequences (absent: TE infers it), and attn_mask_type as passed ("" absent).
  std::optional<std::vector<int64_t>> cu_seqlens_q_padded;
  std::optional<std::vector<int64_t>> cu_seqlens_kv_padded;
  std::optional<bool> pad_between_seqs;
  std::string attn_mask_type;
  // FlashAttention-3's page_table, qv and attention_chunk (absent: not passed)
  std::optional<PageTable> page_table;
  std::optional<QvArg> qv;
  std::optional<int64_t> attention_chunk;
};

// `context_parallel` (docs/spec/transformer-engine-thd.md): the rank of a context-parallel
// group that made this call. The varlen block holds the call's global offsets (TE divides
// them by `size` itself); q's rows are this rank's shard.
struct ContextParallel {
  int64_t size = 1;
  int64_t rank = 0;
  std::string comm_type = "p2p";  // p2p | all_gather | a2a | a2a+p2p
  std::string call;               // names the call: the captures of one call share it ("" absent)
  // per sequence, the two chunks (of 2 * size) this rank's rows hold, when the caller knows it
  std::optional<std::vector<std::pair<int64_t, int64_t>>> chunks;
};

// How a framework outside flash-attn's and transformers' own paths dispatched the attention
// call (batch-format.md `dispatch`): diffusers' attention dispatcher, xformers' attn_bias
// objects, HunyuanVideo's attention modes.
struct Dispatch {
  std::string library;                  // diffusers | xformers | hunyuanvideo | axolotl
  std::string backend;                  // diffusers' AttentionBackendName value, HunyuanVideo's mode,
                                        // axolotl's ring_attn_func ("" absent)
  int64_t ring_degree = 1;              // diffusers ContextParallelConfig; axolotl's context_parallel_size
  int64_t ulysses_degree = 1;
  std::string attn_bias;                // xformers: the attn_bias class passed ("" absent)
  bool attn_bias_moved = false;         // xformers: the bias went through `.to(device)` before the call
  std::optional<std::vector<int64_t>> seqlens;  // xformers: the q lengths `from_seqlens` was given
};

struct TensorOverride {
  std::optional<DType> dtype;
  std::optional<std::string> device;
  std::optional<int64_t> rows;
  std::optional<bool> contiguous;
  std::optional<bool> aligned16;  // base pointer and row strides multiples of 16 bytes
};

struct Rotary {
  std::string implementation = "flash_attn";  // fla | flash_attn | hf
  int64_t dim = 0;
  double base = 10000.0;
  bool interleaved = false;
  std::optional<int64_t> table_length;
  std::vector<int64_t> seqlen_offset;         // empty, one value, or one per sequence
  bool seqlen_offset_per_sequence = false;
  std::optional<bool> varlen;
  std::string layout = "BTHD";                // BTHD | BHTD | THD
};

struct Launch {
  std::string kernel;
  std::vector<std::string> signature;
  std::vector<std::string> passed;
  std::vector<std::string> heuristics;
  std::vector<std::string> config_params;
  std::vector<std::string> autotune_keys;
};

// `fla_op` (docs/spec/batch-format.md): one call of an FLA op other than attention, on the
// packed x the `varlen` block (cu_seqlens_q: its documents, total_q: its T) or, without one,
// the `batch` block ((B, query_length)) describes.
struct FlaOp {
  std::string name;               // "token_shift" (fla.modules.token_shift.token_shift)
  int64_t multiprocessors = 132;  // the device's SM count FLA sizes its chunks by (H100, H200: 132)
};

// `layers` (docs/spec/batch-format.md): the layers of a hybrid model the batch reaches, each
// with where it takes its sequence boundaries from.
struct Layer {
  std::string kind;            // "attention" | "gated_deltanet"
  std::string implementation;  // gated_deltanet: "transformers" (the model's own layer) | "fla" | "areal"; attention: ""
  int64_t count = 1;           // consecutive layers of this kind (recorded)
  std::optional<std::vector<int64_t>> cu_seqlens;  // fla, areal: the `cu_seqlens` keyword the caller passes
  bool attention_mask = true;  // the layer is handed the batch's 2-D attention mask
  bool causal_conv1d = true;   // transformers, areal: the causal-conv1d package is installed (its conv reads seq_idx)
};

// ---------------------------------------------------------------------------------------
// intent and expectations

struct IntendedSequence {
  int64_t row = 0;
  int64_t start = 0;   // token offset within the row
  int64_t length = 0;
};

enum class IntentSource { given, mask, position_ids, cu_seqlens_q, none, collator };
std::string to_string(IntentSource s);

struct Intent {
  std::vector<IntendedSequence> sequences;
  IntentSource source = IntentSource::none;
};

// expect.prediction: pins the report's prediction.outcome (and prediction.pass when given).
struct ExpectedPrediction {
  Outcome outcome = Outcome::ok;
  std::optional<Pass> pass;
};

struct Expect {
  bool first_violation_given = false;
  std::optional<std::string> first_violation;  // nullopt with _given = all hold
  std::vector<std::string> violations;
  std::optional<int> exit_code;
  std::optional<ExpectedPrediction> prediction;
};

// ---------------------------------------------------------------------------------------
// collator (batch-format.md#collator; the replay is batch/collate.hpp)

// One key a collator emitted: a tensor (dtype "int64", "int32") or a Python int ("int").
struct CollatorValue {
  std::string key;
  std::string dtype;
  std::vector<int64_t> shape;  // empty for a Python int
  std::vector<int64_t> values;
  bool values_known = true;    // false: token ids of examples given by their length only
};

// What a `collator` block replayed: the report's `collator` key.
struct CollatorRecord {
  std::string name;            // the collator replayed (canonical name)
  std::string requested;       // the name as written
  std::string release;         // the release asked for ("" when none)
  std::string release_from;    // where it came from: "collator.release", "environment.trl", ...
  std::string replayed_as;     // the release read whose behaviour was replayed
  std::string rule;            // the behaviour replayed, e.g. "flattening-4.52"
  std::vector<CollatorValue> emitted;  // in the collator's key order
  std::vector<std::string> handed_on;  // the batch keys the emitted values became
  std::vector<std::string> notes;
  // The trainer replaces transformers' _get_unpad_data with its own (docs/spec/conversions.md#collators):
  // "axolotl.get_unpad_data" or "llamafactory.get_unpad_data"; "" when the model keeps its own.
  std::string unpad_patch;
};

// ---------------------------------------------------------------------------------------

struct Batch {
  std::filesystem::path file;  // where it was read from (empty for in-memory batches)
  std::string name;            // "name", else the file stem
  std::string description;
  std::vector<std::string> references;
  CallPass pass = CallPass::forward;  // "pass": inference, or a training step (forward + backward)
  Environment environment;
  Model model;
  std::optional<BatchInputs> batch;
  std::optional<ExplicitVarlen> varlen;
  std::map<std::string, TensorOverride> tensors;  // q k v out cu_seqlens_q cu_seqlens_k ...
  std::optional<Rotary> rotary;
  std::optional<Launch> launch;
  std::optional<FlaOp> fla_op;
  std::vector<Layer> layers;                       // hybrid models; empty: not described
  std::optional<ContextParallel> context_parallel; // one rank of a context-parallel call
  std::optional<Dispatch> dispatch;                // a framework's own attention dispatch
  Intent intent;                                   // given, or derived by the loader
  std::optional<Expect> expect;
  std::optional<CollatorRecord> collator;          // the `collator` block's replay, when given
  // The element cap the batch was loaded under (LoadLimits::max_array_elements): a stage that
  // builds an array from the batch's numbers rather than its elements (the replay's 4-D
  // generate masks) holds it to the same cap, and describes what it did not build.
  int64_t max_array_elements = int64_t{1} << 25;

  const TensorOverride* override_for(const std::string& tensor) const {
    auto it = tensors.find(tensor);
    return it == tensors.end() ? nullptr : &it->second;
  }
};

// The flash-attn release whose rules the call follows: `environment.flash_attn_4` (the
// separately installed FlashAttention-4 package) when the call names an FA4 API
// (`varlen.api` "flash_attn_4.*") or no `environment.flash_attn` is given; else
// `environment.flash_attn`. A call through the flash_attn/cute copy a flash-attn 2 release
// bundles names that release (`environment.flash_attn_cute`; its rules: resolve_flash_attn_cute).
std::optional<Version> kernel_release(const Batch& batch);

// ---------------------------------------------------------------------------------------
// loading

// Explicit caps on hostile input (docs/limits.md). Beyond them: InputError, exit 2.
struct LoadLimits {
  int64_t max_json_bytes = 64ll << 20;       // the batch file itself
  int64_t max_npy_bytes = (1ll << 28) + 65536;  // each .npy file (2^25 int64 values + header)
  int64_t max_array_elements = 1ll << 25;    // any one materialised array (33.5M entries)
  int64_t max_total_elements = 1ll << 26;    // all materialised arrays of one batch together
  int max_nesting = 64;                      // JSON nesting depth
  int64_t max_string_bytes = 1ll << 20;      // any one JSON string
  int64_t max_dimension = int64_t{1} << 40;  // heads, lengths, dims: each at most this
};

// An invalid input: names the file, the JSON path, what was expected and what was found.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string json_path, std::string expected, std::string found);
  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& expected() const { return expected_; }
  const std::string& found() const { return found_; }

 private:
  std::string file_, json_path_, expected_, found_;
};

Batch load_batch_file(const std::filesystem::path& path, const LoadLimits& limits = {});
// Parse from text; `origin` names the file in messages and anchors relative .npy paths.
Batch parse_batch_text(std::string_view text, const std::filesystem::path& origin,
                       const LoadLimits& limits = {});

}  // namespace ad
