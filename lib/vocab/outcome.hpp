// The outcome vocabulary every phase speaks: what the user sees (Outcome), the pass it
// happens in (Pass), and what a batch describes (CallPass). The ground floor: the batch format
// reads them (`pass`, `expect.prediction`), the prediction and the report use them.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ad {

// What the user sees. Loud: raises, device_assert, illegal_address, hang (a kernel that does
// not return: the process stops making progress). Silent: the rest. New classes are appended.
enum class Outcome { ok, raises, device_assert, illegal_address, out_of_bounds, wrong_output, wrong_gradient, hang };
// The pass in which an outcome happens.
enum class Pass { forward, backward };
// What the batch describes: inference (forward only) or a training step (forward, backward).
enum class CallPass { forward, training };

std::string to_string(Outcome o);
std::string to_string(Pass p);
std::string to_string(CallPass p);
std::optional<Outcome> parse_outcome(std::string_view s);
std::optional<Pass> parse_pass(std::string_view s);
std::optional<CallPass> parse_call_pass(std::string_view s);
std::span<const std::string_view> outcome_names();  // every class, in declaration order
bool is_loud(Outcome o);

}  // namespace ad
