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

#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

void launch_autotune_keys(Ctx& ctx) {
  if (!ctx.batch.launch) return;
  const Launch& l = *ctx.batch.launch;
  const auto& triton = ctx.batch.environment.triton;
  const bool positional = !triton || *triton < version_literal("3.2.0");
  const std::string rule = triton ? "Triton " + triton->text + (positional ? " (<= 3.1: keys by position)" : " (>= 3.2: keys by name)")
                                  : "no triton release given: Triton <= 3.1's positional lookup assumed";
  auto valued = [&](const std::string& name) { return contains(l.passed, name) || contains(l.heuristics, name); };
  std::vector<std::string> valued_names;
  for (const auto& name : l.signature)
    if (valued(name)) valued_names.push_back(name);
  const std::string kernel = l.kernel.empty() ? std::string("the kernel") : l.kernel;

  for (const auto& key : l.autotune_keys) {
    auto at = std::find(l.signature.begin(), l.signature.end(), key);
    nlohmann::json ev = {{"kernel", kernel}, {"key", key}, {"rule", rule}, {"valued_parameters", valued_names}};
    if (at == l.signature.end()) {
      ctx.report(positional && triton ? Severity::error : Severity::warning,
                 "autotune key \"" + key + "\" is not a parameter of " + kernel +
                     (positional ? ": Triton <= 3.1 raises when the decorator is applied"
                                 : ": Triton >= 3.2 silently leaves it out of the cache key"),
                 ev, positional ? "ValueError: '" + key + "' is not in list" : "");
      continue;
    }
    const size_t index = static_cast<size_t>(at - l.signature.begin());
    ev["signature_index"] = index;
    if (!positional) {
      if (!valued(key)) {
        const char* why = contains(l.config_params, key) ? "supplied by the autotune configs" : "never given a value";
        ctx.report(Severity::warning,
                   "autotune key \"" + key + "\" has no value when the key is built (" + why +
                       "): Triton >= 3.2 leaves it out of the cache key, so the kernel never re-tunes when it changes",
                   ev);
      }
      continue;
    }
    // positional lookup: which parameters before the key have no value?
    std::vector<std::string> shifters;
    for (size_t i = 0; i < index; ++i)
      if (!valued(l.signature[i])) shifters.push_back(l.signature[i]);
    if (shifters.empty() && valued(key)) continue;  // the lookup lands on the key itself
    ev["shifted_by"] = shifters;
    std::string shifter_text;
    if (!shifters.empty()) {
      const std::string& s = shifters.front();
      shifter_text = "\"" + s + "\" (" +
                     (contains(l.config_params, s) ? std::string("supplied by the autotune configs") : std::string("no value")) +
                     ") sits before it in the signature";
      if (shifters.size() > 1) shifter_text += " with " + std::to_string(shifters.size() - 1) + " more";
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
