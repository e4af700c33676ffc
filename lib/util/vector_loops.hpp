// How the vectorised CPU loops are compiled (exec/cpu/cpu_attention.cpp, exec/reference/attention.cpp), included
// first in those files so the settings cover everything after it:
//  - a * b + c contracted to FMA, as the GPU's MMA accumulates (GCC's optimize pragma; clang
//    contracts within an expression by default and has no such pragma);
//  - no psABI notes about the GCC vector types: their helpers are always inlined, no ABI
//    boundary is crossed;
//  - AD_CLONES: a hot loop compiled for x86-64, x86-64-v3 (AVX2) and x86-64-v4 (AVX-512),
//    picked at load time by the CPU (GCC builds only, and not sanitizer builds).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define AD_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define AD_CLONES
#endif
