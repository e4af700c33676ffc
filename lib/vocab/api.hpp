// The call vocabulary: which API received the attention call (Api), how its arguments were
// bound to that API's parameters (BoundArgument), and sets of APIs an invariant applies to
// (ApiSet). The ground floor: the conversions produce a call of one API (lib/convert), the
// static checks skip an invariant whose APIs do not include it (lib/check), the execution plan
// reads it (lib/exec). docs/spec/conversions.md ("The call") lists every value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vocab/version.hpp"

namespace ad {

// The API that received the call. Ids (to_string, parse_api) are stable; new APIs are
// appended.
enum class Api : uint8_t {
  flash_attn_2_varlen,       // flash_attn.flash_attn_varlen_func (FA2)
  flash_attn_2_dense,        // flash_attn.flash_attn_func (FA2)
  flash_attn_2_kvcache,      // flash_attn.flash_attn_with_kvcache (FA2)
  flash_attn_3_varlen,       // flash_attn_interface.flash_attn_varlen_func (FA3, hopper/)
  flash_attn_3_dense,        // flash_attn_interface.flash_attn_func (FA3, hopper/)
  flash_attn_4_varlen,       // flash_attn.cute.flash_attn_varlen_func (FA4)
  flash_attn_4_dense,        // flash_attn.cute.flash_attn_func (FA4)
  torch_varlen_attn,         // torch.nn.attention.varlen.varlen_attn
  te_dot_product_attention,  // transformer_engine.pytorch.DotProductAttention
  fla_ops,                   // fla.ops (FLA's kernels called directly, e.g. its rotary)
  fla_layers,                // fla.layers (FLA's modules)
  flash_attn_3_kvcache,      // flash_attn_interface.flash_attn_with_kvcache (FA3, hopper/)
};
inline constexpr size_t kApiCount = 12;

std::string to_string(Api a);                         // "flash_attn_2.varlen", "torch.varlen_attn", ...
std::optional<Api> parse_api(std::string_view s);      // the inverse of to_string
std::span<const std::string_view> api_names();         // every id, in declaration order
std::string_view qualified_name(Api a);                // "flash_attn.flash_attn_varlen_func"
std::string_view function_name(Api a);                 // the callable's own name: "flash_attn_varlen_func"
int flash_attn_family(Api a);                          // 2, 3, 4; 0 for an API that is not flash-attn's
bool is_varlen(Api a);                                 // takes cu_seqlens (packed rows)

// The contract the tool models for an API: the releases it covers and the page in docs/spec/
// that writes it down (both "" where the API is not modelled). `attn-doctor list apis`.
struct ApiContract {
  Api api;
  std::string_view releases;  // "torch 2.10.0 - 2.15.0"
  std::string_view page;      // "docs/spec/torch-varlen-attn.md"
};
std::span<const ApiContract> api_contracts();  // one per API, in declaration order

// A set of APIs (what an invariant applies to).
class ApiSet {
 public:
  constexpr ApiSet() = default;
  constexpr ApiSet(std::initializer_list<Api> apis) {
    for (Api a : apis) bits_ |= bit(a);
  }
  static constexpr ApiSet all() {
    ApiSet s;
    s.bits_ = (uint32_t{1} << kApiCount) - 1;
    return s;
  }
  constexpr bool contains(Api a) const { return (bits_ & bit(a)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const ApiSet&) const = default;
  std::vector<Api> members() const;

 private:
  static constexpr uint32_t bit(Api a) { return uint32_t{1} << static_cast<unsigned>(a); }
  uint32_t bits_ = 0;
};

// flash-attn 2's functions; every flash-attn family (2, 3, 4) whose host checks and kernel
// contract the release table (lib/check/flash_attn_rules) describes.
inline constexpr ApiSet kFlashAttn2Apis{Api::flash_attn_2_varlen, Api::flash_attn_2_dense, Api::flash_attn_2_kvcache};
inline constexpr ApiSet kFlashAttnApis{Api::flash_attn_2_varlen, Api::flash_attn_2_dense, Api::flash_attn_2_kvcache,
                                       Api::flash_attn_3_varlen, Api::flash_attn_3_dense, Api::flash_attn_4_varlen,
                                       Api::flash_attn_4_dense, Api::flash_attn_3_kvcache};
inline constexpr ApiSet kAllApis = ApiSet::all();
std::string to_string(const ApiSet& s);  // "flash_attn_2.varlen, flash_attn_2.dense" / "every API"

// How one argument reached the API: by position or by keyword, against the parameter names of
// the release's signature.
enum class Bound : uint8_t { positional, keyword };
std::string to_string(Bound b);  // "positional" | "keyword"

struct BoundArgument {
  std::string parameter;  // the signature's name: "q", "cu_seqlens_q", "causal"
  Bound how = Bound::keyword;
  bool operator==(const BoundArgument&) const = default;
};

}  // namespace ad
