#!/usr/bin/env python3
"""Writes the hostile-input fixture: files attn-doctor must reject with exit 2 and a precise
message. Each NAME.json (and any .npy it references) comes with NAME.expect: one line, text
the error message must contain. Regenerate with: python3 tests/data/hostile/make_hostile.py"""
import json, os, struct

HERE = os.path.dirname(os.path.abspath(__file__))
M = '"model": {"num_heads": 8, "head_dim": 64}'
F = '"format": "attn-doctor/batch@1"'
TE = ('"varlen": {"api": "transformer_engine.dot_product_attention", "cu_seqlens_q": [0, 8, 16], '
      '"cu_seqlens_q_padded": [0, 8, 16], "cu_seqlens_kv_padded": [0, 8, 16], "total_q": 8, "total_k": 8}')


def npy(descr, shape, data, fortran=False, magic=b"\x93NUMPY", major=1):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return magic + bytes([major, 0]) + struct.pack("<H", len(h)) + h.encode() + data


def mask_file(name):
    return "{%s, %s, \"batch\": {\"attention_mask\": {\"file\": \"%s\"}}}" % (F, M, name)


CASES = {
    # name: (batch file bytes, expected text, {sidecar: bytes})
    "empty": (b"", "found an empty file", {}),
    "whitespace-only": (b" \n\t\n", "found an empty file", {}),
    "truncated": (("{%s, %s, \"batch\": {\"attention_mask\": {\"lengths\": [3, " % (F, M)).encode(), "expected valid JSON", {}),
    "not-an-object": (b"[1, 2, 3]", "expected a JSON object (a batch file)", {}),
    "wrong-format": (b'{"format": "attn-doctor/batch@7", "model": {}}', 'expected "attn-doctor/batch@1"', {}),
    "unknown-key": (("{%s, %s, \"batch\": {\"atention_mask\": {\"lengths\": [1], \"width\": 1}}}" % (F, M)).encode(),
                    'did you mean "attention_mask"?', {}),
    "duplicate-key": (("{%s, %s, %s}" % (F, M, M)).encode(), 'the key "model" twice', {}),
    "wrong-type": (('{%s, "model": {"num_heads": "eight", "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 1]}}' % F).encode(),
                   '/model/num_heads: expected an integer', {}),
    "huge-float": (('{%s, "model": {"num_heads": 8, "head_dim": 64, "softcap": 1e999}, "varlen": {"cu_seqlens_q": [0, 1]}}' % F).encode(),
                   "finite numbers", {}),
    "integer-overflow": (('{%s, %s, "varlen": {"cu_seqlens_q": [0, 99999999999999999999999]}}' % (F, M)).encode(),
                         "/varlen/cu_seqlens_q/1: expected an integer", {}),
    "int64-min": (('{%s, %s, "varlen": {"cu_seqlens_q": [0, -9223372036854775808]}}' % (F, M)).encode(),
                  "/varlen/cu_seqlens_q/1: expected a value within +-2^62", {}),
    "negative-head-dim": (('{%s, "model": {"num_heads": 8, "head_dim": -64}, "varlen": {"cu_seqlens_q": [0, 1]}}' % F).encode(),
                          "/model/head_dim: expected an integer in [1,", {}),
    "nan-literal": (('{%s, "model": {"num_heads": NaN, "head_dim": 64}}' % F).encode(), "expected valid JSON", {}),
    "invalid-utf8": (('{%s, %s, "name": "' % (F, M)).encode() + b"\xc3\x28\xff" + b'", "varlen": {"cu_seqlens_q": [0, 1]}}',
                     "expected valid JSON (UTF-8)", {}),
    "deep-nesting": (b"[" * 5000 + b"]" * 5000, "nested at most 64 levels", {}),
    "ragged-mask": (('{%s, %s, "batch": {"attention_mask": {"values": [[1,1,1],[1,1],[1]]}}}' % (F, M)).encode(),
                    "(ragged array)", {}),
    "mixed-mask-values": (('{%s, %s, "batch": {"attention_mask": {"values": [[1, true]]}}}' % (F, M)).encode(),
                          "expected an integer (the array's first element is an integer)", {}),
    "length-beyond-width": (('{%s, %s, "batch": {"attention_mask": {"lengths": [3, 9], "width": 8}}}' % (F, M)).encode(),
                            "a length at most the width 8", {}),
    "lengths-huge": (('{%s, %s, "batch": {"attention_mask": {"lengths": [1099511627776], "width": 1099511627776}}}' % (F, M)).encode(),
                     "at most 33554432 entries", {}),
    "packed-huge": (('{%s, %s, "batch": {"position_ids": {"from": "packed", "lengths": [1000000000000, 1000000000000]}}}' % (F, M)).encode(),
                    "at most 33554432 elements", {}),
    "four-d-huge": (('{%s, %s, "batch": {"attention_mask": {"shape": [4, 1, 65536, 65536], "from": {"lengths": [1,1,1,1], "width": 1}}}}' % (F, M)).encode(),
                    "at most 33554432 elements", {}),
    "path-escape": (mask_file("../../../../etc/passwd").encode(), "resolves outside it", {}),
    "path-absolute": (mask_file("/etc/hostname").encode(), "resolves outside it", {}),
    "npy-missing": (mask_file("missing.npy").encode(), "an existing regular file", {}),
    "npy-not-npy": (mask_file("npy-not-npy.npy").encode(), "expected a .npy file (magic", {"npy-not-npy.npy": b"this is text, not numpy\n"}),
    "npy-truncated": (mask_file("npy-truncated.npy").encode(), "(truncated file)",
                      {"npy-truncated.npy": npy("<i8", "(2, 4)", struct.pack("<5q", 1, 1, 1, 1, 1))}),
    "npy-trailing": (mask_file("npy-trailing.npy").encode(), "(trailing bytes)",
                     {"npy-trailing.npy": npy("<i8", "(1, 2)", struct.pack("<3q", 1, 1, 1))}),
    "npy-float": (mask_file("npy-float.npy").encode(), "an integer or bool dtype",
                  {"npy-float.npy": npy("<f4", "(1, 2)", struct.pack("<2f", 1.0, 0.0))}),
    "npy-fortran": (mask_file("npy-fortran.npy").encode(), "C-order",
                    {"npy-fortran.npy": npy("<i8", "(2, 2)", struct.pack("<4q", 1, 1, 1, 0), fortran=True)}),
    "npy-huge-shape": (mask_file("npy-huge-shape.npy").encode(), "at most 33554432 elements",
                       {"npy-huge-shape.npy": npy("<i8", "(4294967296, 4294967296)", b"")}),
    "npy-bad-header": (mask_file("npy-bad-header.npy").encode(), "a .npy header",
                       {"npy-bad-header.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': __import__\n" + b"\0" * 8}),
    "npy-version": (mask_file("npy-version.npy").encode(), "found version 7.0",
                    {"npy-version.npy": npy("<i8", "(1,)", struct.pack("<q", 1), major=7)}),
    "long-string": (('{%s, %s, "description": "%s", "varlen": {"cu_seqlens_q": [0, 1]}}' % (F, M, "x" * (2 << 20))).encode(),
                    "a string of at most 1048576 bytes", {}),
    "bad-version": (('{%s, %s, "environment": {"transformers": "4.44.0; rm -rf /"}, "varlen": {"cu_seqlens_q": [0, 1]}}' % (F, M)).encode(),
                    "a PEP 440 version", {}),
    "intent-out-of-row": (('{%s, %s, "batch": {"attention_mask": {"lengths": [4], "width": 4}}, '
                           '"intent": {"sequences": [{"row": 0, "start": 3, "length": 9}]}}' % (F, M)).encode(),
                          "within the row width 4", {}),
    "binary-garbage": (bytes(range(256)) * 4, "expected valid JSON", {}),
    # the limits at their edges (docs/limits.md): one object and nothing after it, a NUL byte
    # included (nlohmann's lexer reads a NUL as the end of the input); a width past 2^40 beside a
    # zero; B x max(Lq, Lk) equal to 2^40
    "nul-after-object": (('{%s, %s, "batch": {"kv_length": 4}}' % (F, M)).encode() + b"\0garbage{{",
                         "found a NUL byte (line 1, column", {}),
    "npy-zero-wide": (mask_file("npy-zero-wide.npy").encode(), "dimensions of at most 1099511627776",
                      {"npy-zero-wide.npy": npy("|b1", "(0, 4611686018427387904)", b"")}),
    "batch-length-edge": (('{%s, %s, "batch": {"batch_size": 1048576, "kv_length": 1048576}}' % (F, M)).encode(),
                          "expected batch_size x length below 1099511627776, found 1048576 x 1048576", {}),
    # Gemma-2's generate on transformers 4.52 builds a (B, 1, Lq, max_cache_len - 1) mask: past
    # the cap of a 4-D mask once built the batch is refused before anything is built
    "gemma2-4.52-four-d-past-cap": (
        (b'{"format": "attn-doctor/batch@1", "environment": {"transformers": "4.52.0", "flash_attn": "2.6.3"}, '
         b'"model": {"num_heads": 8, "num_kv_heads": 4, "head_dim": 256, "sliding_window": 4096, '
         b'"architecture": "gemma2"}, "batch": {"attention_mask": {"values": [[0, 0, 1, 1], [1, 1, 1, 1]]}, '
         b'"query_length": 1048576, "kv_length": 4, "cache": {"kind": "hybrid", "max_cache_len": 124}}}'),
        "/batch/query_length: expected a generate call whose 4-D mask", {}),
    # the pass, the FLA / FA4 releases and the pinned prediction
    "pass-backward": (('{%s, "pass": "backward", %s, "batch": {"query_length": 4}}' % (F, M)).encode(),
                      '/pass: expected one of "forward", "training", found the string "backward"', {}),
    "pass-boolean": (('{%s, "pass": true, %s, "batch": {"query_length": 4}}' % (F, M)).encode(),
                     '/pass: expected one of "forward", "training", found true', {}),
    "env-fla-not-a-version": (('{%s, "environment": {"fla": "zero.six"}, %s, "batch": {"query_length": 4}}' % (F, M)).encode(),
                              '/environment/fla: expected a PEP 440 version', {}),
    "env-flash-attn-4-number": (('{%s, "environment": {"flash_attn_4": 4}, %s, "batch": {"query_length": 4}}' % (F, M)).encode(),
                                '/environment/flash_attn_4: expected a string', {}),
    "expect-prediction-unknown-outcome": (
        ('{%s, %s, "batch": {"query_length": 4}, "expect": {"prediction": {"outcome": "crash"}}}' % (F, M)).encode(),
        '/expect/prediction/outcome: expected an outcome class: one of "ok", "raises", "device_assert", '
        '"illegal_address", "out_of_bounds", "wrong_output", "wrong_gradient", "hang", found the string "crash"', {}),
    "expect-prediction-pass-training": (
        ('{%s, %s, "batch": {"query_length": 4}, "expect": {"prediction": {"outcome": "ok", "pass": "training"}}}'
         % (F, M)).encode(), '/expect/prediction/pass: expected one of "forward", "backward", found the string "training"', {}),
    "expect-prediction-no-outcome": (
        ('{%s, %s, "batch": {"query_length": 4}, "expect": {"prediction": {"pass": "forward"}}}' % (F, M)).encode(),
        '/expect/prediction/outcome', {}),
    "expect-prediction-unknown-key": (
        ('{%s, %s, "batch": {"query_length": 4}, "expect": {"prediction": {"outcome": "ok", "rowz": []}}}' % (F, M)).encode(),
        '/expect/prediction/rowz', {}),
    # the mask given to the model ("level": "model"): 2-D masks only
    "mask-level-model-4d": (('{%s, %s, "batch": {"attention_mask": {"shape": [1, 1, 4, 4], "from": {"values": '
                             '[[1, 1, 2, 2]]}, "level": "model"}}}' % (F, M)).encode(),
                            '"model" only on a 2-D (B, S) mask, found a mask of rank 4', {}),
    "mask-level-model-rank1": (('{%s, %s, "batch": {"attention_mask": {"values": [1, 1, 2, 2], "level": "model"}}}'
                                % (F, M)).encode(), '"model" only on a 2-D (B, S) mask, found a mask of rank 1', {}),
    "mask-level-unknown": (('{%s, %s, "batch": {"attention_mask": {"values": [[1, 1, 2, 2]], "level": "user"}}}'
                            % (F, M)).encode(), 'expected one of "attention", "model"', {}),
    # collator blocks (batch-format.md#collator)
    "collator-and-batch": (
        ('{%s, %s, "batch": {"query_length": 4}, "collator": {"name": "transformers.DataCollatorWithFlattening", '
         '"examples": [4]}}' % (F, M)).encode(),
        '/collator: expected a "collator" block or a "batch" block, not both', {}),
    "collator-unknown-library": (
        ('{%s, %s, "collator": {"name": "megatron.PackedSequenceCollator", "examples": [4]}}'
         % (F, M)).encode(), '/collator/name: expected a collator the replay knows', {}),
    "collator-huge-examples": (
        ('{%s, %s, "collator": {"name": "transformers.DataCollatorWithFlattening", "examples": [%s]}}'
         % (F, M, ", ".join(["1099511627776"] * 40))).encode(), '/collator/examples', {}),
    "collator-option-too-new": (
        ('{%s, %s, "collator": {"name": "transformers.DataCollatorWithFlattening", "release": "4.51.3", '
         '"options": {"return_seq_idx": true}, "examples": [4]}}' % (F, M)).encode(),
        "TypeError: DefaultDataCollator.__init__() got an unexpected keyword argument 'return_seq_idx'", {}),
    # LlamaFactory's fake multimodal tokens: a negative count, and a count past the bound
    "collator-fake-mm-tokens-negative": (
        ('{%s, %s, "collator": {"name": "llamafactory.neat_packing", "release": "0.9.5", '
         '"options": {"cutoff_len": 15, "attn_implementation": "sdpa", "fake_mm_tokens": -1}, "examples": [4]}}'
         % (F, M)).encode(), "/collator/options/fake_mm_tokens", {}),
    "collator-knapsack-not-bool": (
        ('{%s, %s, "collator": {"name": "llamafactory.neat_packing", "release": "0.9.5", '
         '"options": {"cutoff_len": 15, "knapsack": "yes"}, "examples": [4]}}' % (F, M)).encode(),
        "/collator/options/knapsack", {}),
    # hybrid models: a key of another kind of layer, and a seq_idx that is not one id per query token
    "layers-attention-cu-seqlens": (
        ('{%s, %s, "batch": {"query_length": 4}, "layers": [{"kind": "attention", "cu_seqlens": [0, 4]}]}' % (F, M)).encode(),
        '/layers/0/cu_seqlens: expected no "cu_seqlens" on an attention layer', {}),
    "layers-seq-idx-narrow": (
        ('{%s, %s, "batch": {"query_length": 4, "seq_idx": [[0, 0, 1]]}, "layers": [{"kind": "gated_deltanet"}]}' % (F, M)).encode(),
        '/batch/seq_idx: expected seq_idx 4 wide (the query length), found 3 wide', {}),
    # AReaL's GatedDeltaNet layer takes cu_seqlens, no attention mask
    "layers-areal-attention-mask": (
        ('{%s, %s, "batch": {"query_length": 4}, "layers": [{"kind": "gated_deltanet", "implementation": "areal", '
         '"cu_seqlens": [0, 4], "attention_mask": false}]}' % (F, M)).encode(),
        '/layers/0/attention_mask: expected no attention_mask (AReaL\'s layer takes cu_seqlens only)', {}),
    # Transformer Engine THD and context parallelism (transformer-engine-thd.md)
    "te-cp-rank-out-of-range": (('{%s, %s, %s, "context_parallel": {"size": 2, "rank": 2}}' % (F, M, TE)).encode(),
                                "/context_parallel/rank: expected a rank from 0 to 1 (size 2), found the integer 2", {}),
    "te-padded-offsets-without-te-api": (
        ('{%s, %s, "varlen": {"api": "flash_attn_2.varlen", "cu_seqlens_q": [0, 8, 16], "cu_seqlens_q_padded": [0, 8, 16]}}'
         % (F, M)).encode(),
        '/varlen/cu_seqlens_q_padded: expected "api": "transformer_engine.dot_product_attention" beside cu_seqlens_q_padded '
        "(a Transformer Engine argument), found api flash_attn_2.varlen", {}),
    "te-context-parallel-without-te-api": (
        ('{%s, %s, "varlen": {"cu_seqlens_q": [0, 8, 16]}, "context_parallel": {"size": 2, "rank": 0}}' % (F, M)).encode(),
        '/context_parallel: expected a "varlen" block with "api": "transformer_engine.dot_product_attention" beside it, '
        "found no api", {}),
    "te-cp-chunks-per-sequence": (
        ('{%s, %s, %s, "context_parallel": {"size": 2, "rank": 0, "chunks": [[0, 3]]}}' % (F, M, TE)).encode(),
        "/context_parallel/chunks: expected 2 pairs (one per sequence of cu_seqlens_q), found 1 pairs", {}),
    "te-cp-chunk-out-of-range": (
        ('{%s, %s, %s, "context_parallel": {"size": 2, "rank": 0, "chunks": [[0, 4], [0, 3]]}}' % (F, M, TE)).encode(),
        "/context_parallel/chunks/0/1", {}),
    "torch-enable-gqa-not-bool": (
        ('{%s, %s, "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 8, 16], "enable_gqa": "yes"}}' % (F, M)).encode(),
        '/varlen/enable_gqa: expected true or false, found the string "yes"', {}),
    "tensor-aligned-not-bool": (
        ('{%s, %s, "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 8, 16]}, "tensors": {"q": {"aligned": 16}}}'
         % (F, M)).encode(),
        "/tensors/q/aligned: expected true or false, found the integer 16", {}),
    # dispatch: a framework's own attention dispatch (batch-format.md#dispatch)
    "dispatch-hunyuanvideo-partial-row": (
        ('{%s, %s, "varlen": {"cu_seqlens_q": [0, 296, 500], "max_seqlen_q": 512}, '
         '"dispatch": {"library": "hunyuanvideo", "backend": "torch"}}' % (F, M)).encode(),
        "/dispatch/backend: expected a varlen block whose 1-D cu_seqlens_q fills rows of max_seqlen_q tokens", {}),
    "dispatch-hunyuanvideo-without-varlen": (
        ('{%s, %s, "dispatch": {"library": "hunyuanvideo", "backend": "vanilla"}}' % (F, M)).encode(),
        '/dispatch: expected a "varlen" block beside it', {}),
    "dispatch-key-of-other-library": (
        ('{%s, %s, "dispatch": {"library": "diffusers", "attn_bias": "BlockDiagonalCausalMask"}}' % (F, M)).encode(),
        '/dispatch/attn_bias: expected "library": "xformers" beside attn_bias, found library diffusers', {}),
    "dispatch-unknown-backend": (
        ('{%s, %s, "dispatch": {"library": "diffusers", "backend": "flash_attn_5"}}' % (F, M)).encode(),
        '/dispatch/backend: expected one of "eager", "flash"', {}),
    "dispatch-xformers-without-bias": (
        ('{%s, %s, "dispatch": {"library": "xformers", "attn_bias_moved": true}}' % (F, M)).encode(),
        '/dispatch: expected "attn_bias": the xformers attn_bias class the call passed, found none', {}),
    # axolotl's ring_attn_func by release (batch-format.md#dispatch)
    "dispatch-axolotl-zigzag-removed": (
        ('{%s, %s, "environment": {"axolotl": "0.18.0"}, "batch": {"position_ids": {"from": "packed", "lengths": [3, 5]}}, '
         '"dispatch": {"library": "axolotl", "backend": "batch_zigzag", "ring_degree": 2}}' % (F, M)).encode(),
        '/dispatch/backend: expected "batch_ring" or "varlen_llama3" (axolotl 0.10.0 onwards: RingAttnFunc has no '
        'batch_zigzag), found "batch_zigzag" with axolotl 0.18.0', {}),
    "dispatch-axolotl-without-backend": (
        ('{%s, %s, "batch": {"position_ids": {"from": "packed", "lengths": [3, 5]}}, '
         '"dispatch": {"library": "axolotl", "ring_degree": 2}}' % (F, M)).encode(),
        '/dispatch: expected "backend": axolotl\'s ring_attn_func', {}),
    "environment-compile-not-a-mode": (
        ('{%s, %s, "environment": {"compile": true}, "dispatch": {"library": "diffusers"}}' % (F, M)).encode(),
        '/environment/compile: expected one of "none", "default", "fullgraph", found true', {}),
    # model.remote_code: a bool (batch-format.md#model)
    "model-remote-code-not-bool": (
        ('{%s, "model": {"num_heads": 8, "head_dim": 64, "remote_code": "trust"}, "collator": {"name": '
         '"axolotl.multipack", "release": "0.19.0", "examples": [{"seq_lengths": [3, 2]}]}}' % F).encode(),
        '/model/remote_code: expected true or false, found the string "trust"', {}),
    # FlashAttention-3's page_table, qv and attention_chunk
    "fa3-page-table-index-not-int": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.kvcache", "cu_seqlens_q": [0, 1, 2], '
         '"page_table": {"page_size": 16, "num_pages": 4, "table": [[0, 1], [2, "3"]]}}}' % (F, M)).encode(),
        "/varlen/page_table/table/1/1: expected an integer", {}),
    "fa3-page-table-fa2-api": (
        ('{%s, %s, "varlen": {"api": "flash_attn_2.varlen", "cu_seqlens_q": [0, 1, 2], '
         '"page_table": {"page_size": 16, "num_pages": 4, "table": [[0, 1], [2, 3]]}}}' % (F, M)).encode(),
        '/varlen/page_table: expected "api": a FlashAttention-3 / -4 API', {}),
    "fa3-page-table-beside-cu-seqlens-k": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.kvcache", "cu_seqlens_q": [0, 1, 2], "cu_seqlens_k": [0, 16, 32], '
         '"page_table": {"page_size": 16, "num_pages": 4, "table": [[0, 1], [2, 3]]}}}' % (F, M)).encode(),
        "/varlen/page_table: expected no cu_seqlens_k beside page_table", {}),
    "fa3-page-table-too-many-keys": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.kvcache", "cu_seqlens_q": [0, 1, 2], '
         '"page_table": {"page_size": 2147483647, "num_pages": 4, "shape": [2147483647, 2147483647]}}}' % (F, M)).encode(),
        "/varlen/page_table: expected a page table whose rows x pages per sequence x page_size fits 2^62 key rows", {}),
    "fa3-page-table-table-and-shape": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.kvcache", "cu_seqlens_q": [0, 1, 2], '
         '"page_table": {"page_size": 16, "num_pages": 4, "table": [[0], [1]], "shape": [2, 1]}}}' % (F, M)).encode(),
        '/varlen/page_table: expected exactly one of "table" and "shape", found both', {}),
    "fa3-page-size-zero": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.kvcache", "cu_seqlens_q": [0, 1, 2], '
         '"page_table": {"page_size": 0, "num_pages": 4, "table": [[0], [1]]}}}' % (F, M)).encode(),
        "/varlen/page_table/page_size: expected", {}),
    "fa3-attention-chunk-negative": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.varlen", "cu_seqlens_q": [0, 8, 16], "attention_chunk": -4}}'
         % (F, M)).encode(),
        "/varlen/attention_chunk: expected", {}),
    "fa3-qv-without-head-dim": (
        ('{%s, %s, "varlen": {"api": "flash_attn_3.varlen", "cu_seqlens_q": [0, 8, 16], "qv": {"dtype": "bf16"}}}'
         % (F, M)).encode(),
        '/varlen/qv/head_dim: expected the required key "head_dim"', {}),
    # environment.flash_attn_cute: the flash_attn/cute copy a flash-attn 2 release bundles
    "env-flash-attn-cute-before-2.8.3": (
        ('{%s, %s, "environment": {"flash_attn_cute": "2.8.2"}, "varlen": {"api": "flash_attn_4.varlen", '
         '"cu_seqlens_q": [0, 8, 16]}}' % (F, M)).encode(),
        '/environment/flash_attn_cute: expected a flash-attn 2 release that bundles flash_attn/cute (2.8.3 or a later '
        '2.x), found the string "2.8.2"', {}),
    "env-flash-attn-cute-beside-flash-attn-4": (
        ('{%s, %s, "environment": {"flash_attn_cute": "2.8.3", "flash_attn_4": "4.0.0b3"}, "varlen": {"api": '
         '"flash_attn_4.varlen", "cu_seqlens_q": [0, 8, 16]}}' % (F, M)).encode(),
        "/environment/flash_attn_cute: expected one owner of flash_attn.cute", {}),
    "env-flash-attn-cute-other-flash-attn": (
        ('{%s, %s, "environment": {"flash_attn_cute": "2.8.3", "flash_attn": "2.8.3.post1"}, "varlen": {"api": '
         '"flash_attn_4.varlen", "cu_seqlens_q": [0, 8, 16]}}' % (F, M)).encode(),
        "/environment/flash_attn_cute: expected the installed flash-attn release, environment.flash_attn "
        "(2.8.3.post1)", {}),
    "env-flash-attn-cute-fa2-api": (
        ('{%s, %s, "environment": {"flash_attn_cute": "2.8.3"}, "varlen": {"api": "flash_attn_2.varlen", '
         '"cu_seqlens_q": [0, 8, 16]}}' % (F, M)).encode(),
        '/environment/flash_attn_cute: expected a call through flash_attn.cute beside it (varlen.api '
        '"flash_attn_4.varlen" or "flash_attn_4.dense"), found varlen.api "flash_attn_2.varlen"', {}),
    "env-flash-attn-cute-number": (
        ('{%s, %s, "environment": {"flash_attn_cute": 2.83}, "varlen": {"api": "flash_attn_4.varlen", '
         '"cu_seqlens_q": [0, 8, 16]}}' % (F, M)).encode(),
        "/environment/flash_attn_cute: expected a string", {}),
}


def main():
    for name, (body, expect, sidecars) in CASES.items():
        with open(os.path.join(HERE, name + ".json"), "wb") as f:
            f.write(body)
        with open(os.path.join(HERE, name + ".expect"), "w") as f:
            f.write(expect + "\n")
        for side, data in sidecars.items():
            with open(os.path.join(HERE, side), "wb") as f:
                f.write(data)
    print(f"{len(CASES)} hostile files written")


if __name__ == "__main__":
    main()
