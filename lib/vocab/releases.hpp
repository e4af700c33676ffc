// The releases of the kernel packages that were published, oldest first, as PyPI lists them:
// what `attn-doctor bisect` walks for the flash-attn, FLA, Triton and torch axes (the transformers releases
// are lib/convert's table, generated from PyPI with the code fingerprints). A release the tool
// has no rule for still appears here: the rules map it to the nearest one at or below it.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "vocab/version.hpp"

namespace ad {

struct PublishedReleases {
  std::string_view package;                  // the PyPI project ("flash-attn")
  std::string_view source;                   // where the list was read, and when
  std::span<const std::string_view> releases;  // oldest first
};

// "flash-attn" (FA1 and FA2), "flash-attn-3" (FA3: the hopper/ build, not on PyPI; the
// release the contract table was read from), "flash-attn-4" (FA4, the CuTe DSL package),
// "flash-linear-attention" (FLA), "triton", "torch" (from 2.10.0: torch.nn.attention.varlen's
// releases). Throws std::logic_error for another name.
const PublishedReleases& published_releases(std::string_view package);
std::span<const PublishedReleases> published_release_lists();

// The releases of one list as versions, oldest first.
std::vector<Version> release_versions(const PublishedReleases& list);

}  // namespace ad
