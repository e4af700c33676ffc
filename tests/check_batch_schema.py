#!/usr/bin/env python3
"""docs/spec/batch.schema.json against the loader and the shipped batch files.

1. Keys: every `expect_object({...})` list in lib/batch/loader.cpp equals the `properties` of
   the schema object it corresponds to (OBJECTS below), every strict object of the schema
   has a loader list, and every `as_enum({...})` list of the loader is an `enum` of the
   schema. A key added to one side only fails here, naming the object and the key.
2. Files: every batch file in the repository (a JSON file naming the format
   "attn-doctor/batch@...") that the loader accepts (`check --backend none` exits other than
   2) is valid under the schema. A file the loader rejects (the hostile inputs) must be
   rejected by the schema too, unless its rule is one a JSON Schema cannot state
   (CANNOT_EXPRESS, with the rule).

Usage: tests/check_batch_schema.py --binary build/attn-doctor      (from the repository root)
Needs the `jsonschema` package (Debian: python3-jsonschema, which scripts/bootstrap
installs); without it the test is skipped (exit 77) with the reason.
"""
import argparse
import json
import os
import re
import subprocess
import sys

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join("docs", "spec", "batch.schema.json")
LOADER = os.path.join("lib", "batch", "loader.cpp")

# Each expect_object call of the loader, by (its function in loader.cpp, the receiver), as
# (the object's JSON path in a batch file, the schema object that describes it).
OBJECTS = {
    ("batch", "root"): ("/", "#"),
    ("environment", "n"): ("/environment", "#/$defs/environment"),
    ("model", "n"): ("/model", "#/$defs/model"),
    ("inputs", "n"): ("/batch", "#/$defs/batch"),
    ("inputs", "c"): ("/batch/cache", "#/$defs/cache"),
    ("inputs", "k"): ("/batch/flash_kwargs", "#/$defs/flashKwargs"),
    ("mask", "n"): ("/batch/attention_mask", "#/$defs/mask"),
    ("position_ids", "n"): ("/batch/position_ids", "#/$defs/positionIds"),
    ("varlen", "n"): ("/varlen", "#/$defs/varlen"),
    ("max_seqlen", "n"): ("/varlen/max_seqlen_q", "#/$defs/maxSeqlenTensor"),
    ("tensors", "n"): ("/tensors", "#/$defs/tensors"),
    ("tensors", "t"): ("/tensors/q", "#/$defs/tensorOverride"),
    ("rotary", "n"): ("/rotary", "#/$defs/rotary"),
    ("launch", "n"): ("/launch", "#/$defs/launch"),
    ("fla_op", "n"): ("/fla_op", "#/$defs/flaOp"),
    ("layers", "e"): ("/layers/0", "#/$defs/layer"),
    ("intent", "n"): ("/intent", "#/$defs/intent"),
    ("intent", "s"): ("/intent/sequences/0", "#/$defs/intendedSequence"),
    ("expect", "n"): ("/expect", "#/$defs/expect"),
    ("expect", "p"): ("/expect/prediction", "#/$defs/expectedPrediction"),
    ("collator_spec", "n"): ("/collator", "#/$defs/collator"),
    ("collator_spec", "o"): ("/collator/options", "#/$defs/collatorOptions"),
    ("collator_spec", "e"): ("/collator/examples/0", "#/$defs/collatorExampleObject"),
    ("context_parallel", "n"): ("/context_parallel", "#/$defs/contextParallel"),
    ("dispatch", "n"): ("/dispatch", "#/$defs/dispatch"),
    ("fa3_extras", "q"): ("/varlen/qv", "#/$defs/qvArg"),
    ("fa3_extras", "t"): ("/varlen/page_table", "#/$defs/pageTable"),
}

# Rejected files whose rule a JSON Schema cannot state (the loader's checks beyond types,
# keys and ranges: batch-format.md lists them).
CANNOT_EXPRESS = {
    "batch-length-edge.json": "B x max(Lq, Lk) below 2^40",
    "te-cp-rank-out-of-range.json": "context_parallel.rank below its size",
    "te-cp-chunk-out-of-range.json": "a chunk index below 2 x context_parallel.size",
    "te-cp-chunks-per-sequence.json": "one chunk pair per sequence of cu_seqlens_q",
    "te-padded-offsets-without-te-api.json": "Transformer Engine's keys only with its api",
    "te-context-parallel-without-te-api.json": "context_parallel only beside a Transformer Engine varlen block",
    "dispatch-hunyuanvideo-partial-row.json": "HunyuanVideo's packed rows fill whole rows of max_seqlen_q",
    "dispatch-hunyuanvideo-without-varlen.json": "HunyuanVideo's dispatch only beside a varlen block",
    "dispatch-key-of-other-library.json": "a dispatch key only for its library",
    "dispatch-xformers-without-bias.json": "xformers' dispatch names its attn_bias",
    "dispatch-axolotl-without-backend.json": "axolotl's dispatch names its ring_attn_func",
    "dispatch-axolotl-zigzag-removed.json": "the ring_attn_func values of environment.axolotl's release",
    "fa3-page-table-beside-cu-seqlens-k.json": "a page table's keys come from its pages, not cu_seqlens_k",
    "fa3-page-table-fa2-api.json": "page_table, qv and attention_chunk only with a FlashAttention-3 / -4 api",
    "fa3-page-table-too-many-keys.json": "page_table rows x pages per sequence x page_size at most 2^62",
    "ragged.json": "arrays are not ragged",
    "ragged-mask.json": "arrays are not ragged",
    "hf-config-names-conflict.json": "a key given both ways has the same value",
    "four-d-huge.json": "elements of one array at most 2^25",
    "lengths-huge.json": "elements of one array at most 2^25",
    "packed-huge.json": "elements of one array at most 2^25",
    "gemma2-4.52-four-d-past-cap.json": "elements of one array at most 2^25",
    "length-beyond-width.json": "each length within the width",
    "intent-out-of-row.json": "a sequence within its row",
    "long-string.json": "one JSON string at most 1 MiB (bytes, not characters)",
    "path-escape.json": "a .npy file inside the batch file's folder",
    "path-absolute.json": "a .npy file inside the batch file's folder",
    "npy-missing.json": "a .npy file that exists",
    "npy-trailing.json": "the .npy file's contents",
    "npy-huge-shape.json": "the .npy file's contents",
    "npy-not-npy.json": "the .npy file's contents",
    "npy-truncated.json": "the .npy file's contents",
    "npy-zero-wide.json": "the .npy file's contents",
    "npy-float.json": "the .npy file's contents",
    "mask-level-model-rank1.json": "a model-level mask is 2-D (the rank of nested values)",
    "npy-bad-header.json": "the .npy file's contents",
    "npy-fortran.json": "the .npy file's contents",
    "npy-version.json": "the .npy file's contents",
    "collator-huge-examples.json": "elements of one array at most 2^25",
    "collator-option-too-new.json": "an option the collator's release accepts",
    "layers-seq-idx-narrow.json": "seq_idx one id per query token",
    "env-flash-attn-cute-before-2.8.3.json": "environment.flash_attn_cute a flash-attn 2 release from 2.8.3",
    "env-flash-attn-cute-beside-flash-attn-4.json": "environment.flash_attn_cute not beside flash_attn_4",
    "env-flash-attn-cute-other-flash-attn.json": "environment.flash_attn_cute equal to a flash_attn beside it",
    "env-flash-attn-cute-fa2-api.json": "environment.flash_attn_cute only beside a flash_attn.cute api",
}

SEARCHED = ("repro_cases", "tests", "bench", "docs", "python")


def fail(messages):
    for m in messages:
        print("check_batch_schema: " + m, file=sys.stderr)
    sys.exit(1)


def resolve(schema, pointer):
    node = schema
    for part in pointer.lstrip("#").strip("/").split("/"):
        if part:
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def loader_lists(text):
    """(function, receiver) -> keys of each expect_object call; and every as_enum list."""
    # Member functions of the Loader struct start at two spaces of indentation.
    starts = [(m.start(), m.group(1)) for m in
              re.finditer(r"^  (?:static )?[\w:<>, ]+?[ &*](\w+)\([^;{]*\)\s*(?:const\s*)?\{", text, re.M)]

    def function_at(offset):
        name = None
        for start, fn in starts:
            if start > offset:
                break
            name = fn
        return name

    def strings(body):
        return re.findall(r'"((?:[^"\\]|\\.)*)"', body)

    calls = {}
    for m in re.finditer(r"(\w+)(?:\.|->)expect_object\(\{(.*?)\}\)", text, re.S):
        where = (function_at(m.start()), m.group(1))
        if where in calls:
            fail([f"{LOADER}: two expect_object calls in {where[0]}() on '{where[1]}': "
                  "name the second one in OBJECTS of tests/check_batch_schema.py"])
        calls[where] = strings(m.group(2))
    enums = [strings(m.group(1)) for m in re.finditer(r"as_enum\(\{(.*?)\}\)", text, re.S)]
    return calls, enums


def schema_objects(node, pointer="#"):
    """Every subschema of the schema that lists its keys (additionalProperties false)."""
    if isinstance(node, dict):
        if node.get("additionalProperties") is False:
            yield pointer, node
        for key, value in node.items():
            yield from schema_objects(value, pointer + "/" + key.replace("~", "~0").replace("/", "~1"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from schema_objects(value, f"{pointer}/{i}")


def schema_enums(node):
    if isinstance(node, dict):
        if "enum" in node:
            yield node["enum"]
        for value in node.values():
            yield from schema_enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from schema_enums(value)


def check_keys(schema, loader_text):
    problems = []
    calls, enums = loader_lists(loader_text)
    for where in sorted(set(calls) - set(OBJECTS)):
        problems.append(f"{LOADER}: expect_object in {where[0]}() on '{where[1]}' has no schema object: "
                        f"add it to {SCHEMA} and to OBJECTS in tests/check_batch_schema.py")
    for where in sorted(set(OBJECTS) - set(calls)):
        problems.append(f"{LOADER}: no expect_object in {where[0]}() on '{where[1]}' any more: "
                        "update OBJECTS in tests/check_batch_schema.py")
    for where, (path, pointer) in sorted(OBJECTS.items()):
        if where not in calls:
            continue
        try:
            obj = resolve(schema, pointer)
        except KeyError:
            problems.append(f"{SCHEMA}: no object at {pointer} (the batch file's {path})")
            continue
        if obj.get("additionalProperties") is not False:
            problems.append(f"{SCHEMA}: {pointer} (the batch file's {path}) does not set additionalProperties "
                            "to false, but the loader rejects unknown keys there")
        keys = set(obj.get("properties", {}))
        loader = set(calls[where])
        for key in sorted(loader - keys):
            problems.append(f"object {path}: the loader accepts the key \"{key}\" ({where[0]}() in {LOADER}) "
                            f"but the schema's {pointer} has no such property")
        for key in sorted(keys - loader):
            problems.append(f"object {path}: the schema's {pointer} has the property \"{key}\" "
                            f"but the loader does not accept it ({where[0]}() in {LOADER})")
    mapped = {pointer for _, pointer in OBJECTS.values()}
    for pointer, _ in schema_objects(schema):
        if pointer not in mapped:
            problems.append(f"{SCHEMA}: {pointer} lists its keys but no expect_object of {LOADER} "
                            "corresponds to it (OBJECTS in tests/check_batch_schema.py)")
    schema_sets = [set(e) for e in schema_enums(schema)]
    for values in enums:
        if set(values) not in schema_sets:
            problems.append(f"{LOADER}: as_enum({{{', '.join(values)}}}) is not an enum of {SCHEMA}")
    return problems, len(calls)


def batch_files():
    found = []
    for top in SEARCHED:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build")) and d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(".json"):
                    continue
                path = os.path.join(folder, name)
                with open(path, "rb") as fh:
                    head = fh.read()
                if re.search(rb'"format"\s*:\s*"attn-doctor/batch@', head):
                    found.append(os.path.relpath(path, ROOT))
    return found


def loader_rejects(binary, path):
    run = subprocess.run([binary, "check", path, "--backend", "none", "--format", "json"],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    return run.returncode == 2, run.stderr.decode("utf-8", "replace").strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the attn-doctor binary")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    try:
        import jsonschema
    except ImportError:
        print(f"SKIPPED: the Python package jsonschema is not installed for {sys.executable} "
              "(Debian: python3-jsonschema; scripts/bootstrap installs it)")
        sys.exit(SKIP)

    with open(os.path.join(ROOT, SCHEMA)) as fh:
        schema = json.load(fh)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    with open(os.path.join(ROOT, LOADER)) as fh:
        problems, objects = check_keys(schema, fh.read())

    accepted = rejected = 0
    unexpressed = set(CANNOT_EXPRESS)
    for path in batch_files():
        rejects, message = loader_rejects(binary, path)
        try:
            with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
                document = json.load(fh)
        except (ValueError, UnicodeDecodeError):
            document = None  # not JSON at all: only the loader can say so
        if not rejects:
            accepted += 1
            if document is None:
                problems.append(f"{path}: the loader accepts it but it is not JSON to Python")
                continue
            for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))[:3]:
                problems.append(f"{path}: the loader accepts it, the schema does not: {error.json_path}: "
                                f"{error.message[:300]}")
            continue
        rejected += 1
        name = os.path.basename(path)
        if name in CANNOT_EXPRESS:
            unexpressed.discard(name)
            if document is not None and not validator.is_valid(document):
                problems.append(f"{path}: the schema rejects it now: remove it from CANNOT_EXPRESS in "
                                "tests/check_batch_schema.py")
            continue
        if document is None:
            continue
        if validator.is_valid(document):
            problems.append(f"{path}: the loader rejects it ({message[:200]}) but the schema accepts it: tighten "
                            f"{SCHEMA}, or add it to CANNOT_EXPRESS in tests/check_batch_schema.py with the rule")
    for name in sorted(unexpressed):
        problems.append(f"CANNOT_EXPRESS in tests/check_batch_schema.py names {name}, which is no batch file the "
                        "loader rejects")
    if accepted == 0:
        problems.append("no batch file found that the loader accepts: is --binary the attn-doctor binary?")
    if problems:
        fail(problems)
    print(f"check_batch_schema: {objects} loader objects match the schema's keys; {accepted} batch files the loader "
          f"accepts are valid under {SCHEMA}; {rejected} it rejects ({len(CANNOT_EXPRESS)} for rules a schema cannot "
          "state)")


if __name__ == "__main__":
    main()
