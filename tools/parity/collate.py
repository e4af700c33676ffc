"""Collator goldens: the real collators of each release on a matrix of example sets.

    python collate.py transformers [--releases 4.44.2,5.24.0]   # collate-transformers-<release>.json
    python collate.py trl [--releases 0.19.0,1.16.0]            # collate-trl-<release>.json

transformers: `DataCollatorWithFlattening` of the release installed under
$PARITY_VENVS/tf-<release> (setup_envs.sh), imported from the package and
called as a trainer calls it (`collator(features)`, return_tensors "pt").

TRL: importing `trl.trainer.sft_trainer` needs accelerate, datasets and the trainer stack, none
of which the collator uses. So the release's own source (the wheel, `pip download trl==X
--no-deps`, kept in $PARITY_WHEELS) is read and only these definitions are executed, unchanged:
the class `DataCollatorForLanguageModeling` and the function `pad` (trl/trainer/utils.py), with
torch, numpy and transformers' `DataCollatorMixin` as the names they use. The two SFTTrainer
decisions that shape the collator are also taken from that source, by evaluating its own
expressions: `self.padding_free = ...` (on the case's SFTConfig values) and
`use_flash_attention = ...` (on the case's attention implementation), and whether the trainer
passes `return_position_ids=use_flash_attention` to the collator. The golden lists what was
executed (`executed`).

Every golden names the torch that ran it. The C++ replay (lib/batch/collate_*.cpp) must
reproduce every case exactly (tests/test_collate_golden.cpp).
"""

import argparse
import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GOLDEN = REPO / "tests" / "golden"
VENVS = Path(os.environ.get("PARITY_VENVS", "/work/venvs"))
WHEELS = Path(os.environ.get("PARITY_WHEELS", str(VENVS / "wheels")))
PYTHON = os.environ.get("PARITY_PYTHON", str(VENVS / "torch24" / "bin" / "python"))

# every behaviour change of DataCollatorWithFlattening, and the releases on either side of it
TRANSFORMERS = ["4.44.2", "4.45.2", "4.51.3", "4.52.4", "4.57.6", "5.15.0", "5.24.0"]
# every behaviour change of TRL's collator or of the trainer's list, and releases beside them
TRL = ["0.19.0", "0.20.0", "0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.26.0", "1.10.0", "1.11.0", "1.16.0"]
# the transformers whose DataCollatorMixin the TRL collator runs on
TRL_TRANSFORMERS = os.environ.get("PARITY_TRL_TRANSFORMERS", "4.44.2")


def ids(lengths):
    """Token ids for examples of these lengths: example e, token t -> 100 * (e + 1) + t."""
    return [[100 * (e + 1) + t for t in range(n)] for e, n in enumerate(lengths)]


def hf_cases():
    c = []
    add = lambda name, lengths, **options: c.append({"name": name, "options": options, "examples": ids(lengths)})
    add("three", [3, 5, 2])
    add("single-token", [4, 1, 3])
    add("empty-example", [3, 0, 2])
    add("all-empty", [0, 0])
    add("no-position-ids", [3, 5, 2], return_position_ids=False)
    add("separator", [3, 5, 2], separator_id=7)
    add("flash-kwargs", [3, 5, 2], return_flash_attn_kwargs=True)
    add("seq-idx", [3, 5, 2], return_seq_idx=True)
    add("kwargs-empty-example", [2, 0, 3], return_flash_attn_kwargs=True, return_seq_idx=True)
    add("kwargs-no-position-ids", [3, 5], return_flash_attn_kwargs=True, return_position_ids=False)
    add("position-ids-start", [3, 2], position_ids_start=2)
    add("everything", [4, 1, 0, 3], return_flash_attn_kwargs=True, return_seq_idx=True, separator_id=-1,
        position_ids_start=1)
    return c


def trl_cases():
    c = []

    def add(name, lengths, packed=None, **options):
        examples = ids(lengths)
        if packed:  # already packed rows: their seq_lengths (and the position ids 0.19 reads)
            examples = [{"input_ids": e, "seq_lengths": s,
                         "position_ids": [t for n in s for t in range(n)]} for e, s in zip(examples, packed)]
        c.append({"name": name, "options": options, "examples": examples})

    add("padding-free-fa2", [3, 5, 2], padding_free=True, attn_implementation="flash_attention_2")
    add("padding-free-sdpa", [3, 5, 2], padding_free=True, attn_implementation="sdpa")
    add("padding-free-fa3", [3, 5, 2], padding_free=True, attn_implementation="flash_attention_3")
    add("padding-free-vllm-fa3", [3, 5, 2], padding_free=True,
        attn_implementation="kernels-community/vllm-flash-attn3")
    add("padding-free-single-token", [4, 1, 3], padding_free=True, attn_implementation="flash_attention_2")
    add("padding-free-multiple", [3, 2], padding_free=True, pad_to_multiple_of=4,
        attn_implementation="flash_attention_2")
    add("padded", [3, 5, 2], attn_implementation="flash_attention_2")
    add("padded-multiple", [3, 5, 2], pad_to_multiple_of=4, attn_implementation="flash_attention_2")
    add("packing-bfd", [5, 4], packed=[[2, 3], [4]], packing=True, packing_strategy="bfd",
        attn_implementation="flash_attention_2")
    add("packing-bfd-sdpa", [5, 4], packed=[[2, 3], [4]], packing=True, packing_strategy="bfd",
        attn_implementation="sdpa")
    add("padded-position-ids", [3, 2], return_position_ids=True, attn_implementation="flash_attention_2")
    return c


# ---- one release, in a fresh interpreter ------------------------------------------------

def describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "values": [int(x) for x in value.flatten().tolist()]}
    if isinstance(value, bool) or value is None:
        return {"dtype": type(value).__name__, "shape": [], "values": []}
    if isinstance(value, int):
        return {"dtype": "int", "shape": [], "values": [value]}
    return {"dtype": type(value).__name__, "shape": [], "values": []}


def emitted(batch):
    return [dict(key=k, **describe(v)) for k, v in batch.items()]


def run_hf(release):
    import warnings

    import torch
    import transformers
    from transformers import DataCollatorWithFlattening
    warnings.simplefilter("ignore")
    out = {"format": "attn-doctor/collate-golden@1", "library": "transformers", "release": transformers.__version__,
           "collator": "transformers.DataCollatorWithFlattening", "torch": torch.__version__.split("+")[0],
           "executed": "transformers.data.data_collator.DataCollatorWithFlattening, imported from the release",
           "cases": []}
    for case in hf_cases():
        rec = dict(case)
        try:
            collator = DataCollatorWithFlattening(**case["options"])
            batch = collator([{"input_ids": e} for e in case["examples"]])
            rec["emitted"] = emitted(batch)
        except Exception as e:  # what the release raises is the golden
            rec["raised"] = {"type": type(e).__name__, "message": str(e)}
        out["cases"].append(rec)
    return out


def definitions(source, names):
    """The top-level definitions `names` of a module's source, as source text."""
    tree = ast.parse(source)
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in names:
            parts.append(ast.get_source_segment(source, node))
            # keep its decorators (dataclass)
            if getattr(node, "decorator_list", None):
                decos = "\n".join("@" + ast.get_source_segment(source, d) for d in node.decorator_list)
                parts[-1] = decos + "\n" + parts[-1]
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            parts.append(ast.get_source_segment(source, node))
    return "\n\n".join(parts)


def trainer_expressions(source):
    """SFTTrainer.__init__'s own expressions: padding_free, use_flash_attention, and the
    return_position_ids it constructs the collator with (absent from 0.24)."""
    tree = ast.parse(source)
    found = {"padding_free": None, "use_flash_attention": None, "return_position_ids": None}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == "padding_free" and getattr(t.value, "id", "") == "self":
                found["padding_free"] = ast.unparse(node.value)
            if isinstance(t, ast.Name) and t.id == "use_flash_attention":
                found["use_flash_attention"] = ast.unparse(node.value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "DataCollatorForLanguageModeling":
            for kw in node.keywords:
                if kw.arg == "return_position_ids":
                    found["return_position_ids"] = ast.unparse(kw.value)
    return found


def run_trl(release):
    import dataclasses
    import types
    import typing
    import warnings

    import numpy as np
    import torch
    from transformers.data.data_collator import DataCollatorMixin
    warnings.simplefilter("ignore")
    wheel = WHEELS / f"trl-{release}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        sft = z.read("trl/trainer/sft_trainer.py").decode()
        utils = z.read("trl/trainer/utils.py").decode()
    ns = {"torch": torch, "np": np, "DataCollatorMixin": DataCollatorMixin, "dataclass": dataclasses.dataclass,
          "Optional": typing.Optional, "Union": typing.Union, "Any": typing.Any, "__name__": "trl_collator"}
    code = definitions(utils, {"pad"}) + "\n\n" + definitions(sft, {"DataCollatorForLanguageModeling",
                                                                     "FLASH_ATTENTION_VARIANTS"})
    exec(compile(code, f"trl-{release}", "exec"), ns)
    Collator = ns["DataCollatorForLanguageModeling"]
    fields = {f.name for f in dataclasses.fields(Collator)}
    trainer = trainer_expressions(sft)
    out = {"format": "attn-doctor/collate-golden@1", "library": "trl", "release": release,
           "collator": "trl.DataCollatorForLanguageModeling", "torch": torch.__version__.split("+")[0],
           "executed": "trl/trainer/sft_trainer.py DataCollatorForLanguageModeling and trl/trainer/utils.py pad from "
                       f"the trl {release} wheel, on transformers {TRL_TRANSFORMERS}'s DataCollatorMixin; the "
                       "SFTTrainer's own padding_free and use_flash_attention expressions",
           "trainer": trainer,
           "position_ids_implementations": sorted(ns["FLASH_ATTENTION_VARIANTS"]) if "FLASH_ATTENTION_VARIANTS" in ns
           else None,
           "cases": []}
    if out["position_ids_implementations"] is None:
        # the list is written into the expression (before 0.24): the strings it compares against
        expr = trainer["use_flash_attention"] or trainer["return_position_ids"]
        if expr:
            out["position_ids_implementations"] = sorted(
                n.value for n in ast.walk(ast.parse(expr)) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    for case in trl_cases():
        rec = dict(case)
        o = dict(case["options"])
        impl = o.pop("attn_implementation", "flash_attention_2")
        config = types.SimpleNamespace(padding_free=o.pop("padding_free", False), packing=o.pop("packing", False),
                                       packing_strategy=o.pop("packing_strategy", "bfd" if release >= "0.20" else "ffd"))
        try:
            scope = {"args": config, "model": types.SimpleNamespace(config=types.SimpleNamespace(
                _attn_implementation=impl)), "attn_implementation": impl, **ns}
            padding_free = bool(eval(trainer["padding_free"], scope)) if trainer["padding_free"] else config.padding_free
            kwargs = {"pad_token_id": 0, "padding_free": padding_free}
            if trainer["use_flash_attention"]:
                scope["use_flash_attention"] = bool(eval(trainer["use_flash_attention"], scope))
            if trainer["return_position_ids"] and "return_position_ids" not in o:
                kwargs["return_position_ids"] = bool(eval(trainer["return_position_ids"], scope))
            kwargs.update(o)
            batch = Collator(**kwargs)(case["examples"] if isinstance(case["examples"][0], dict)
                                       else [{"input_ids": e} for e in case["examples"]])
            rec["emitted"] = emitted(batch)
        except Exception as e:
            rec["raised"] = {"type": type(e).__name__, "message": str(e)}
        out["cases"].append(rec)
    out["collator_fields"] = sorted(fields)
    return out


# ---- orchestration -----------------------------------------------------------------------

def record_golden(python, argv, pythonpath, name, what, **env):
    """The parity drivers' shared start-up: run `python argv` (a driver's `--one` mode) in a fresh
    interpreter on PYTHONPATH `pythonpath` (deterministic hashing, one thread, `env` added), and
    write the JSON it prints to tests/golden/<name>."""
    full = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", **env)
    full["PYTHONPATH"] = ":".join(str(p) for p in pythonpath)
    proc = subprocess.run([python, *(str(a) for a in argv)], env=full, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{what}: {proc.stderr[-3000:]}")
    data = json.loads(proc.stdout)
    path = GOLDEN / name
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path.relative_to(REPO)}: {len(data['cases'])} cases")
    return data


def site(release):
    path = VENVS / f"tf-{release}"
    if not (path / "transformers").is_dir():
        raise SystemExit(f"transformers {release} is not installed under {VENVS} (tf-{release}: setup_envs.sh)")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library", choices=["transformers", "trl"])
    ap.add_argument("--releases")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        result = run_hf(a.one) if a.library == "transformers" else run_trl(a.one)
        json.dump(result, sys.stdout)
        return
    releases = a.releases.split(",") if a.releases else (TRANSFORMERS if a.library == "transformers" else TRL)
    for release in releases:
        record_golden(PYTHON, [__file__, a.library, "--one", release],
                      [site(release if a.library == "transformers" else TRL_TRANSFORMERS)],
                      f"collate-{a.library}-{release}.json", f"{a.library} {release}")

if __name__ == "__main__":
    main()
