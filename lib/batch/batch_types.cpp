// The batch model's small vocabulary (intent sources) and the loader's error type.
#include "batch/batch.hpp"
#include "util/text.hpp"

namespace ad {

std::string to_string(IntentSource s) {
  switch (s) {
    case IntentSource::given: return "given";
    case IntentSource::mask: return "mask";
    case IntentSource::position_ids: return "position_ids";
    case IntentSource::cu_seqlens_q: return "cu_seqlens_q";
    case IntentSource::none: return "none";
    case IntentSource::collator: return "collator";
  }
  return "?";
}

// The message quotes the user's file name, keys and values: escaped (escape_text), so control
// characters never reach the terminal and a NUL does not cut the message short. The accessors
// keep the text as given.
InputError::InputError(std::string file, std::string json_path, std::string expected, std::string found)
    : std::runtime_error(escape_text(file) + ": " + (json_path.empty() ? std::string("/") : escape_text(json_path)) +
                         ": expected " + escape_text(expected) + ", found " + escape_text(found)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      expected_(std::move(expected)),
      found_(std::move(found)) {}

std::optional<Version> kernel_release(const Batch& batch) {
  const Environment& e = batch.environment;
  if (e.flash_attn_cute) return e.flash_attn_cute;  // the loader admits it only beside a flash_attn.cute call
  if (!e.flash_attn_4) return e.flash_attn;
  const bool fa4_api = batch.varlen && batch.varlen->api &&
                       (*batch.varlen->api == Api::flash_attn_4_varlen || *batch.varlen->api == Api::flash_attn_4_dense);
  if (fa4_api || !e.flash_attn) return e.flash_attn_4;
  return e.flash_attn;
}

}  // namespace ad
