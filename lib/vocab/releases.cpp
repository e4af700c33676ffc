// The published release lists (see releases.hpp). Each was read from PyPI's release history of
// the project (`pip index versions NAME --pre`, 2026-11-27); a release that PyPI no longer
// serves (flash-attn 2.7.4, 2.8.0: only their .post releases are listed) is not here, and a
// batch that names one is placed among these by version order.
#include "vocab/releases.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ad {

namespace {

constexpr std::string_view kFlashAttn[] = {
    "1.0.0",       "1.0.1",       "1.0.2",       "1.0.3.post0", "1.0.4",       "1.0.5",       "1.0.6",
    "1.0.7",       "1.0.8",       "1.0.9",       "2.0.0.post1", "2.0.1",       "2.0.2",       "2.0.3",
    "2.0.4",       "2.0.5",       "2.0.6",       "2.0.6.post2", "2.0.7",       "2.0.8",       "2.0.9",
    "2.1.0",       "2.1.1",       "2.1.2.post3", "2.2.0",       "2.2.1",       "2.2.2",       "2.2.3.post2",
    "2.2.4",       "2.2.4.post1", "2.2.5",       "2.3.0",       "2.3.1.post1", "2.3.2",       "2.3.3",
    "2.3.4",       "2.3.5",       "2.3.6",       "2.4.0.post1", "2.4.1",       "2.4.2",       "2.4.3.post1",
    "2.5.0",       "2.5.1.post1", "2.5.2",       "2.5.3",       "2.5.4",       "2.5.5",       "2.5.6",
    "2.5.7",       "2.5.8",       "2.5.9.post1", "2.6.0.post1", "2.6.1",       "2.6.2",       "2.6.3",
    "2.7.0.post2", "2.7.1.post4", "2.7.2.post1", "2.7.3",       "2.7.4.post1", "2.8.0.post2", "2.8.1",
    "2.8.2",       "2.8.3",       "2.8.3.post1", "2.8.3.post2",
};

constexpr std::string_view kFlashAttn3[] = {"3.0.0b1"};

constexpr std::string_view kFlashAttn4[] = {
    "4.0.0b3",  "4.0.0b4",  "4.0.0b5",  "4.0.0b7",  "4.0.0b8",  "4.0.0b9",  "4.0.0b10", "4.0.0b11",
    "4.0.0b12", "4.0.0b13", "4.0.0b14", "4.0.0b15", "4.0.0b16", "4.0.0b17", "4.0.0b18", "4.0.0b19",
    "4.0.0b20", "4.0.0b21", "4.0.0b22", "4.0.0b23", "4.0.0b24", "4.0.0b25", "4.0.0b26", "4.0.0b27",
    "4.0.0b28", "4.0.0b29", "4.0.0b30", "4.0.0b31", "4.0.0b32", "4.0.0b33", "4.0.0b34", "4.0.0b35",
    "4.0.0b36",
};

constexpr std::string_view kFla[] = {
    "0.1",   "0.1.1", "0.1.2", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "0.3.1",
    "0.3.2", "0.4.0", "0.4.1", "0.4.2", "0.5.0", "0.5.1", "0.5.2", "0.6.0",
};

constexpr std::string_view kTriton[] = {
    "2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.3.1", "3.0.0", "3.1.0", "3.2.0", "3.3.0",
    "3.3.1", "3.4.0", "3.5.0", "3.5.1", "3.6.0", "3.7.0", "3.7.1", "3.8.0", "3.9.0",
};

// from 2.10.0, the first release with torch.nn.attention.varlen
constexpr std::string_view kTorch[] = {
    "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0",
};

const PublishedReleases kLists[] = {
    {"flash-attn", "PyPI flash-attn, 1.0.0 - 2.8.3.post2 (0.2.x, before FA1's rule set, left out)", kFlashAttn},
    {"flash-attn-3", "not on PyPI: Dao-AILab/flash-attention hopper/ builds 3.0.0b1 (the FA3 rule set's release)",
     kFlashAttn3},
    {"flash-attn-4", "PyPI flash-attn-4, 4.0.0b3 - 4.0.0b36", kFlashAttn4},
    {"flash-linear-attention", "PyPI flash-linear-attention, 0.1 - 0.6.0 (fla-core from 0.3.2 has the same releases)",
     kFla},
    {"triton", "PyPI triton, 2.0.0 - 3.9.0 (as pip lists them for CPython 3.11 on Linux x86-64)", kTriton},
    {"torch", "PyPI torch, 2.10.0 - 2.15.0 (the releases with torch.nn.attention.varlen; older ones have no varlen_attn)",
     kTorch},
};

}  // namespace

std::span<const PublishedReleases> published_release_lists() { return kLists; }

const PublishedReleases& published_releases(std::string_view package) {
  for (const auto& l : kLists)
    if (l.package == package) return l;
  throw std::logic_error("no published release list for " + std::string(package));
}

std::vector<Version> release_versions(const PublishedReleases& list) {
  std::vector<Version> out;
  out.reserve(list.releases.size());
  for (std::string_view r : list.releases) out.push_back(version_literal(r));
  return out;
}

}  // namespace ad
