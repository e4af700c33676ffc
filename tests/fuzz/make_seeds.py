#!/usr/bin/env python3
"""Writes the fuzz seeds that exercise the answer-time and memory limits (docs/limits.md): inputs
within the limits on which a super-linear path or an unbounded allocation would pass the
per-input budgets of the fuzz ctests (tests/fuzz/CMakeLists.txt), and inputs at the limits'
edges that the targets' own assertions catch. scripts/fuzz reads tests/fuzz/seeds/ (the loader
and the pipeline) and tests/fuzz/seeds-npy/ (the .npy parser) beside the corpus on every run.
Regenerate with: python3 tests/fuzz/make_seeds.py"""
import json, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))
F = {"format": "attn-doctor/batch@1"}
M = {"num_heads": 8, "head_dim": 64}


def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data


def batch(**kw):
    return json.dumps(dict(F, model=M, **kw)).encode()


def launch(n):
    names = ["p%d" % i for i in range(n)]
    return json.dumps(dict(F, environment={"triton": "3.1.0"}, model=M,
                           launch={"kernel": "k", "signature": names, "passed": names[::2],
                                   "config_params": names[1::2], "autotune_keys": names})).encode()


def many_keys(n):
    body = ", ".join('"k%d": 0' % i for i in range(n))
    return ('{"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64}, "name": {%s, "k0": 1}}'
            % body).encode()


SEEDS = {
    # Gemma-2 on 4.44.0: a 2 x 24 mask whose generate-time 4-D mask has 2 x 2^20 x 124 entries
    "gemma2-4d-mask-past-cap.json": json.dumps(dict(
        F, environment={"transformers": "4.44.0", "flash_attn": "2.6.3"},
        model={"num_heads": 8, "num_kv_heads": 4, "head_dim": 256, "sliding_window": 4096, "architecture": "gemma2"},
        batch={"attention_mask": {"lengths": [24, 17], "width": 24, "padding_side": "left"},
               "query_length": 1 << 20, "kv_length": 24, "cache": {"kind": "hybrid", "max_cache_len": 124}})).encode(),
    # a launch block of 3,000 names, every one an autotune key (cubic before)
    "launch-3000-names.json": launch(3000),
    # an object of 80,000 keys and a duplicate (a linear search per key before)
    "keys-80000-duplicate.json": many_keys(80000),
    # one object, then a NUL and garbage; B x L == 2^40
    "nul-after-object.json": batch(batch={"kv_length": 4}) + b"\0garbage{{",
    "batch-length-edge.json": batch(batch={"batch_size": 1 << 20, "kv_length": 1 << 20}),
}
NPY_SEEDS = {
    "zero-wide.npy": npy("|b1", "(0, %d)" % (1 << 62), b""),
}


def main():
    for folder, seeds in (("seeds", SEEDS), ("seeds-npy", NPY_SEEDS)):
        os.makedirs(os.path.join(HERE, folder), exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(HERE, folder, name), "wb") as f:
                f.write(data)
    print(f"{len(SEEDS) + len(NPY_SEEDS)} seeds written")


if __name__ == "__main__":
    main()
