// The outcome vocabulary (vocab/outcome.hpp): names, parsing, loud or silent.
#include "vocab/outcome.hpp"

#include <array>

namespace ad {

namespace {

constexpr std::array<std::string_view, 8> kOutcomes = {"ok",           "raises",       "device_assert",  "illegal_address",
                                                       "out_of_bounds", "wrong_output", "wrong_gradient", "hang"};

}  // namespace

std::string to_string(Outcome o) { return std::string(kOutcomes[static_cast<size_t>(o)]); }
std::string to_string(Pass p) { return p == Pass::forward ? "forward" : "backward"; }
std::string to_string(CallPass p) { return p == CallPass::forward ? "forward" : "training"; }

std::span<const std::string_view> outcome_names() { return kOutcomes; }

std::optional<Outcome> parse_outcome(std::string_view s) {
  for (size_t i = 0; i < kOutcomes.size(); ++i)
    if (kOutcomes[i] == s) return static_cast<Outcome>(i);
  return std::nullopt;
}

std::optional<Pass> parse_pass(std::string_view s) {
  if (s == "forward") return Pass::forward;
  if (s == "backward") return Pass::backward;
  return std::nullopt;
}

std::optional<CallPass> parse_call_pass(std::string_view s) {
  if (s == "forward") return CallPass::forward;
  if (s == "training") return CallPass::training;
  return std::nullopt;
}

bool is_loud(Outcome o) {
  return o == Outcome::raises || o == Outcome::device_assert || o == Outcome::illegal_address || o == Outcome::hang;
}

}  // namespace ad
