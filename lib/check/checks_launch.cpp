// Launch: Triton's autotune key resolution (id 40).
//
// Triton <= 3.1 (python/triton/runtime/autotuner.py; read in the 3.0.0 wheel, and FLA #354 hit it
// on 3.1.0): at
// decoration `key_idx = [arg_names.index(k) for k in key]` (a key that is not a parameter raises
// ValueError), and at each call
//   _args = [all_args[name] for name in arg_names if name in all_args]
//   key = [_args[i] for i in key_idx]
// i.e. a key's position in the *full* signature indexes the list of parameters that *have a
// value* (passed, or filled by an outer @triton.heuristics). Every config-supplied parameter
// before a key shifts the lookup by one: past the end -> "IndexError: list index out of range"
// (FLA #354, chunk_scaled_dot_kkt_fwd_kernel: BK from the configs sits before the IS_VARLEN key);
// otherwise another parameter's value becomes the cache key.
//
// Triton PR#4808 (first released in 3.2.0; read in the 3.2.0 wheel) looks keys up by name:
//   key = [_args[key] for key in self.keys if key in _args]
// so a key without a value is silently left out of the cache key (the kernel keeps the config
// tuned for the first value it saw); a name that is no parameter is dropped the same way.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

// Evidence lists name at most this many parameters (and give the full count beside them): a
// launch block of thousands of names would otherwise repeat them in every violation.
constexpr size_t kMaxListed = 16;

nlohmann::json first_names(const std::vector<std::string>& names) {
  return std::vector<std::string>(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kMaxListed)));
}

}  // namespace

// Linear in the launch block's names: hash sets for "has a value" and "supplied by the
// configs", the signature's positions in a map, and a prefix count of the valueless
// parameters (a key's shifters are the valueless ones before it).
void launch_autotune_keys(Ctx& ctx) {
  if (!ctx.batch.launch) return;
  const Launch& l = *ctx.batch.launch;
  const auto& triton = ctx.batch.environment.triton;
  const bool positional = !triton || *triton < version_literal("3.2.0");
  const std::string rule = triton ? "Triton " + triton->text + (positional ? " (<= 3.1: keys by position)" : " (>= 3.2: keys by name)")
                                  : "no triton release given: Triton <= 3.1's positional lookup assumed";
  std::unordered_set<std::string> valued_set(l.passed.begin(), l.passed.end());
  valued_set.insert(l.heuristics.begin(), l.heuristics.end());
  const std::unordered_set<std::string> configs(l.config_params.begin(), l.config_params.end());
  auto valued = [&](const std::string& name) { return valued_set.count(name) > 0; };
  std::unordered_map<std::string, size_t> position;  // first occurrence, as list.index() finds it
  std::vector<std::string> valued_names;
  std::vector<size_t> unvalued;                       // signature indices without a value, in order
  for (size_t i = 0; i < l.signature.size(); ++i) {
    position.emplace(l.signature[i], i);
    if (valued(l.signature[i])) valued_names.push_back(l.signature[i]);
    else unvalued.push_back(i);
  }
  const nlohmann::json valued_listed = first_names(valued_names);
  const std::string kernel = l.kernel.empty() ? std::string("the kernel") : l.kernel;

  for (const auto& key : l.autotune_keys) {
    auto at = position.find(key);
    nlohmann::json ev = {{"kernel", kernel}, {"key", key}, {"rule", rule}, {"valued_parameters", valued_listed}};
    if (valued_names.size() > kMaxListed) ev["valued_count"] = valued_names.size();
    if (at == position.end()) {
      ctx.report(positional && triton ? Severity::error : Severity::warning,
                 "autotune key \"" + key + "\" is not a parameter of " + kernel +
                     (positional ? ": Triton <= 3.1 raises when the decorator is applied"
                                 : ": Triton >= 3.2 silently leaves it out of the cache key"),
                 ev, positional ? "ValueError: '" + key + "' is not in list" : "");
      continue;
    }
    const size_t index = at->second;
    ev["signature_index"] = index;
    if (!positional) {
      if (!valued(key)) {
        const char* why = configs.count(key) ? "supplied by the autotune configs" : "never given a value";
        ctx.report(Severity::warning,
                   "autotune key \"" + key + "\" has no value when the key is built (" + why +
                       "): Triton >= 3.2 leaves it out of the cache key, so the kernel never re-tunes when it changes",
                   ev);
      }
      continue;
    }
    // positional lookup: which parameters before the key have no value?
    const size_t shifter_count =
        static_cast<size_t>(std::lower_bound(unvalued.begin(), unvalued.end(), index) - unvalued.begin());
    if (shifter_count == 0 && valued(key)) continue;  // the lookup lands on the key itself
    std::vector<std::string> shifters;
    for (size_t k = 0; k < std::min(shifter_count, kMaxListed); ++k) shifters.push_back(l.signature[unvalued[k]]);
    ev["shifted_by"] = shifters;
    if (shifter_count > kMaxListed) ev["shifted_count"] = shifter_count;
    std::string shifter_text;
    if (shifter_count > 0) {
      const std::string& s = shifters.front();
      shifter_text = "\"" + s + "\" (" +
                     (configs.count(s) ? std::string("supplied by the autotune configs") : std::string("no value")) +
                     ") sits before it in the signature";
      if (shifter_count > 1) shifter_text += " with " + std::to_string(shifter_count - 1) + " more";
    } else {
      shifter_text = "the key itself has no value";
    }
    const Severity sev = triton ? Severity::error : Severity::warning;
    if (index >= valued_names.size()) {
      ev["valued_count"] = valued_names.size();
      ctx.report(sev,
                 "autotune key \"" + key + "\" of " + kernel + " is parameter " + std::to_string(index) +
                     " of the signature, but only " + std::to_string(valued_names.size()) +
                     " parameters have a value when the key is built: " + shifter_text +
                     ", so the positional lookup runs past the end",
                 ev, "IndexError: list index out of range");
    } else {
      ev["read_instead"] = valued_names[index];
      ctx.report(Severity::warning,
                 "autotune key \"" + key + "\" of " + kernel + " is looked up at position " + std::to_string(index) +
                     " among the valued parameters, which is \"" + valued_names[index] + "\": " + shifter_text +
                     ", so the cache key holds the wrong value",
                 ev);
    }
  }
}

}  // namespace ad::checks
