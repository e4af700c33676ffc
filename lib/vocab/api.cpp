// The call vocabulary (vocab/api.hpp): ids, qualified names, sets.
#include "vocab/api.hpp"

#include <array>

namespace ad {

namespace {

struct ApiRow {
  std::string_view id;
  std::string_view qualified;
  std::string_view function;
  int family;
  bool varlen;
};

// In declaration order of Api.
constexpr std::array<ApiRow, kApiCount> kApis = {{
    {"flash_attn_2.varlen", "flash_attn.flash_attn_varlen_func", "flash_attn_varlen_func", 2, true},
    {"flash_attn_2.dense", "flash_attn.flash_attn_func", "flash_attn_func", 2, false},
    {"flash_attn_2.kvcache", "flash_attn.flash_attn_with_kvcache", "flash_attn_with_kvcache", 2, false},
    {"flash_attn_3.varlen", "flash_attn_interface.flash_attn_varlen_func", "flash_attn_varlen_func", 3, true},
    {"flash_attn_3.dense", "flash_attn_interface.flash_attn_func", "flash_attn_func", 3, false},
    {"flash_attn_4.varlen", "flash_attn.cute.flash_attn_varlen_func", "flash_attn_varlen_func", 4, true},
    {"flash_attn_4.dense", "flash_attn.cute.flash_attn_func", "flash_attn_func", 4, false},
    {"torch.varlen_attn", "torch.nn.attention.varlen.varlen_attn", "varlen_attn", 0, true},
    {"transformer_engine.dot_product_attention", "transformer_engine.pytorch.DotProductAttention",
     "DotProductAttention", 0, true},
    {"fla.ops", "fla.ops", "fla.ops", 0, true},
    {"fla.layers", "fla.layers", "fla.layers", 0, true},
    // takes cu_seqlens_q (varlen queries); its keys come from the cache (paged or not)
    {"flash_attn_3.kvcache", "flash_attn_interface.flash_attn_with_kvcache", "flash_attn_with_kvcache", 3, true},
}};

// What `attn-doctor list apis` shows: the releases whose contract the tool models for each
// API and the page that writes it down ("" where the API is not modelled). In declaration order.
constexpr std::array<ApiContract, kApiCount> kContracts = {{
    {Api::flash_attn_2_varlen, "flash-attn 2.0.0 - 2.8.3", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_2_dense, "flash-attn 2.0.0 - 2.8.3", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_2_kvcache, "flash-attn 2.0.0 - 2.8.3", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_3_varlen, "flash-attn 3 (hopper/, as of v2.8.3)", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_3_dense, "flash-attn 3 (hopper/, as of v2.8.3)", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_4_varlen, "flash-attn-4 4.0.0b0 -", "docs/spec/flash-attn-features.md"},
    {Api::flash_attn_4_dense, "flash-attn-4 4.0.0b0 -", "docs/spec/flash-attn-features.md"},
    {Api::torch_varlen_attn, "torch 2.10.0 - 2.15.0", "docs/spec/torch-varlen-attn.md"},
    {Api::te_dot_product_attention, "transformer-engine 1.13.0 - 2.12.0 (qkv_format thd)", "docs/spec/transformer-engine-thd.md"},
    {Api::fla_ops, "fla (the releases conversions.md names)", "docs/spec/conversions.md"},
    {Api::fla_layers, "fla (the releases conversions.md names)", "docs/spec/conversions.md"},
    {Api::flash_attn_3_kvcache, "flash-attn 3 (hopper/, as of v2.8.3)", "docs/spec/flash-attn-features.md"},
}};

constexpr std::array<std::string_view, kApiCount> ids() {
  std::array<std::string_view, kApiCount> out{};
  for (size_t i = 0; i < kApiCount; ++i) out[i] = kApis[i].id;
  return out;
}
constexpr std::array<std::string_view, kApiCount> kIds = ids();

const ApiRow& row(Api a) { return kApis[static_cast<size_t>(a)]; }

}  // namespace

std::string to_string(Api a) { return std::string(row(a).id); }
std::span<const std::string_view> api_names() { return kIds; }
std::string_view qualified_name(Api a) { return row(a).qualified; }
std::string_view function_name(Api a) { return row(a).function; }
int flash_attn_family(Api a) { return row(a).family; }
bool is_varlen(Api a) { return row(a).varlen; }

std::optional<Api> parse_api(std::string_view s) {
  for (size_t i = 0; i < kApiCount; ++i)
    if (kIds[i] == s) return static_cast<Api>(i);
  return std::nullopt;
}

std::vector<Api> ApiSet::members() const {
  std::vector<Api> out;
  for (size_t i = 0; i < kApiCount; ++i)
    if (contains(static_cast<Api>(i))) out.push_back(static_cast<Api>(i));
  return out;
}

std::string to_string(const ApiSet& s) {
  if (s == kAllApis) return "every API";
  std::string out;
  for (Api a : s.members()) out += (out.empty() ? "" : ", ") + to_string(a);
  return out;
}

std::span<const ApiContract> api_contracts() { return kContracts; }

std::string to_string(Bound b) { return b == Bound::positional ? "positional" : "keyword"; }

}  // namespace ad
