"""Goldens of the packing collators that bring their own unpadding: axolotl's multipack and
LlamaFactory's neat_packing.

    python collate_patched.py axolotl [--releases 0.8.0,0.19.0]       # collate-axolotl-<release>.json
    python collate_patched.py llamafactory [--releases 0.9.4]         # unpad-llamafactory-<release>.json

axolotl: importing `axolotl.utils.collators` pulls in the whole trainer stack (accelerate,
datasets, peft, the multimodal collators), none of which the multipack collator uses. So the
release's own module files are executed unchanged, each as a module of its own:
axolotl/utils/collators/batching.py (V2BatchSamplerDataCollatorForSeq2Seq and the
DataCollatorForSeq2Seq it pads with) and axolotl/monkeypatch/utils.py (get_unpad_data, the
function axolotl's patch_for_multipack installs as transformers'
modeling_flash_attention_utils._get_unpad_data). Their imports are numpy, torch and
transformers only; nothing is stubbed. The release's source lies under
$PARITY_VENVS/axolotl-<release>/axolotl (the wheel installed with --no-deps, or the
sdist's src/axolotl for releases published as sdists). Whether patch_for_multipack
(axolotl/monkeypatch/multipack.py) replaces transformers' _get_unpad_data for an in-tree model is
read from that function's own source (an assignment to
modeling_flash_attention_utils._get_unpad_data outside its remote-code branch).

Which models get the patch is also measured (`patch_for_multipack`): the release's package
(axolotl.monkeypatch.multipack, which imports accelerate) is imported and patch_for_multipack
called as the patch manager calls it (loaders/patch_manager.py _apply_multipack_patches), once
with has_remote_code=True on a remote-code checkpoint written to a temporary directory (a config
whose auto_map names an AutoModelForCausalLM, a modeling file of its own defining
_get_unpad_data, a one-parameter model; loaded with no download) and once for an in-tree model
type; the golden says whether the modeling file's and transformers' _get_unpad_data became the
release's get_unpad_data. `unpad_masks` holds that function on segment-id masks the collator
does not build (ids repeated or out of order), where 0.18.0's rewrite counts differently.

The collator is called as axolotl's trainer calls it: one list of examples per packed row
(the multipack sampler's bins), each example a dict of input_ids, attention_mask (all ones, the
tokenizer's), labels and position_ids (0 .. n-1, axolotl's add_position_ids), with
padding=True and the case's pad_to_multiple_of, on a right-padding tokenizer whose pad id is 0.
For every emitted attention_mask the patched get_unpad_data runs twice: on the mask as emitted
(int64; transformers <= 4.52 hands it to _get_unpad_data unchanged) and on the mask cast to
bool (transformers >= 4.53's masking_utils does that first).

LlamaFactory: the function configure_packing installs (llamafactory/model/model_utils/
packing.py get_unpad_data and get_seqlens_in_batch), executed from the release's file with
torch and F as the names it uses (its other import, the logging helper, is not used by them),
on segment-id masks as neat_packing builds them, int64 and cast to bool. The collator itself
is recorded by collate_llamafactory.py, which runs the release's template and processor.

The C++ replay (lib/batch/collate_axolotl.cpp, lib/convert/unpad_data.cpp patched_unpad_data)
must reproduce every case exactly (tests/test_collate_golden.cpp).
"""

import argparse
import ast
import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collate import VENVS, record_golden  # noqa: E402  (the collator drivers' shared start-up)
# the release trees lie under $PARITY_VENVS/<prefix>axolotl-<release>, <prefix>llamafactory-<release>
PREFIX = os.environ.get("PARITY_PATCHED_PREFIX", "")
PYTHON = os.environ.get("PARITY_PYTHON", str(VENVS / "torch26" / "bin" / "python"))
# the transformers the collator's tokenizer.pad and the module imports run on
TRANSFORMERS = os.environ.get("PARITY_AXOLOTL_TRANSFORMERS", "4.52.4")
# what importing axolotl/monkeypatch/multipack.py needs besides torch and transformers: accelerate
# (init_empty_weights), in the LlamaFactory drivers' shared dependencies
AXOLOTL_DEPS = [p for p in os.environ.get(
    "PARITY_AXOLOTL_DEPS", f"{VENVS}/{os.environ.get('PARITY_LF_PREFIX', '')}lf-deps").split(":") if p]

# every behaviour change of the multipack collator, of get_unpad_data and of
# patch_for_multipack, and releases beside them
AXOLOTL = ["0.8.0", "0.9.2", "0.10.0", "0.11.0", "0.12.2", "0.17.0", "0.18.0", "0.19.0"]
LLAMAFACTORY = ["0.9.3", "0.9.4"]


def bins(rows):
    """Packed rows of examples: row r, example e, token t -> 1000 * (r + 1) + 100 * (e + 1) + t."""
    out = []
    for r, lengths in enumerate(rows):
        out.append([[1000 * (r + 1) + 100 * (e + 1) + t for t in range(n)] for e, n in enumerate(lengths)])
    return out


def axolotl_cases():
    c = []

    def add(name, rows, **options):
        c.append({"name": name, "options": options, "rows": bins(rows)})

    add("one-row", [[3, 5, 2]])
    add("two-rows", [[3, 5], [4, 1, 2]])
    add("single-token", [[4, 1, 3]])
    add("multiple-of-8", [[3, 5, 2]], pad_to_multiple_of=8)
    add("two-rows-multiple-of-8", [[3, 2], [6, 4]], pad_to_multiple_of=8)
    add("no-attention-mask", [[3, 2], [4]], attention_mask=False)
    add("no-position-ids", [[3, 2], [4]], position_ids=False)
    add("squash", [[3, 2], [4, 1]], squash_position_ids=True, pad_to_multiple_of=4)
    add("one-example-rows", [[5], [2], [7]])
    add("exact-multiple", [[4, 4]], pad_to_multiple_of=8)
    return c


def llamafactory_masks():
    """Segment-id masks as neat_packing builds them (1, 2, ... per example, 0 for padding)."""
    def row(lengths, width):
        r = [s + 1 for s, n in enumerate(lengths) for _ in range(n)]
        return r + [0] * (width - len(r))
    return [
        {"name": "one-row", "mask": [row([2, 3], 8)]},
        {"name": "docstring", "mask": [[1, 1, 2, 2, 2, 0], [1, 2, 2, 3, 3, 3]]},
        {"name": "two-rows-padding", "mask": [row([3, 1], 6), row([2, 2, 2], 6)]},
        {"name": "single-token-documents", "mask": [row([1, 1, 1], 4)]},
        {"name": "no-padding", "mask": [row([4, 4], 8)]},
        {"name": "non-contiguous-ids", "mask": [[1, 1, 2, 2, 1, 1, 0, 0]]},
    ]


# ---- one release, in a fresh interpreter ------------------------------------------------

def describe(value):
    import torch
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "values": [int(x) for x in value.flatten().tolist()]}
    return {"dtype": type(value).__name__, "shape": [], "values": [int(value)] if isinstance(value, (int, bool)) else []}


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unpad(fn, mask):
    """The patched _get_unpad_data on a mask: indices, cu_seqlens and max_seqlen as it returns them."""
    import torch
    try:
        indices, cu, mx = fn(mask)
    except Exception as e:  # what the release raises is the golden
        return {"raised": {"type": type(e).__name__, "message": str(e)}}
    mx_type = type(mx).__name__
    return {"indices": describe(indices), "cu_seqlens": describe(cu),
            "max_seqlen": {"type": mx_type, "value": int(mx)}}


def unpad_both(fn, mask):
    import torch
    return {"as_given": unpad(fn, mask), "bool": unpad(fn, mask.to(torch.bool))}


def patches_transformers(source):
    """patch_for_multipack's assignments to modeling_flash_attention_utils._get_unpad_data that
    are not under its remote-code branch."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "patch_for_multipack":
            def walk(stmts, remote):
                for s in stmts:
                    if isinstance(s, ast.If):
                        cond = ast.unparse(s.test)
                        yield from walk(s.body, remote or "remote" in cond)
                        yield from walk(s.orelse, remote)
                    elif isinstance(s, ast.Assign):
                        for t in s.targets:
                            text = ast.unparse(t)
                            if text.endswith("modeling_flash_attention_utils._get_unpad_data") and not remote:
                                yield text
            hits = list(walk(node.body, False))
            return hits[0] if hits else None
    return None


# A remote-code checkpoint written locally: a config whose auto_map names an AutoModelForCausalLM,
# a modeling file of its own that defines _get_unpad_data (what patch_remote looks for), and a
# one-parameter model saved beside them, so that from_pretrained loads it with no download.
REMOTE_CONFIG = """from transformers import PretrainedConfig


class RemoteXConfig(PretrainedConfig):
    model_type = "remotex"
"""
REMOTE_MODELING = """import torch
from transformers import PreTrainedModel

from .configuration_remotex import RemoteXConfig


def _get_unpad_data(attention_mask):
    lengths = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten()).flatten()
    return indices, torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0)), int(lengths.max())


class RemoteXForCausalLM(PreTrainedModel):
    config_class = RemoteXConfig

    def __init__(self, config):
        super().__init__(config)
        self.w = torch.nn.Linear(1, 1)
"""


def patched_models():
    """Which _get_unpad_data the release's patch_for_multipack replaces with its get_unpad_data,
    measured: the release's axolotl.monkeypatch.multipack imported and called as the trainer's
    patch manager calls it, once for a remote-code checkpoint (has_remote_code=True) and once for
    an in-tree model type."""
    import importlib
    import tempfile

    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers import modeling_flash_attention_utils as fau
    with tempfile.TemporaryDirectory(prefix="remotex_") as d:
        Path(d, "configuration_remotex.py").write_text(REMOTE_CONFIG)
        Path(d, "modeling_remotex.py").write_text(REMOTE_MODELING)
        Path(d, "config.json").write_text(json.dumps({
            "model_type": "remotex", "architectures": ["RemoteXForCausalLM"],
            "auto_map": {"AutoConfig": "configuration_remotex.RemoteXConfig",
                         "AutoModelForCausalLM": "modeling_remotex.RemoteXForCausalLM"}}))
        config = AutoConfig.from_pretrained(d, trust_remote_code=True)
        AutoModelForCausalLM.from_config(config, trust_remote_code=True).save_pretrained(d)
        multipack = importlib.import_module("axolotl.monkeypatch.multipack")
        patch = importlib.import_module("axolotl.monkeypatch.utils").get_unpad_data
        original = fau._get_unpad_data
        multipack.patch_for_multipack("llama", model_name=d, has_remote_code=True)
        remote = importlib.import_module(type(config).__module__.replace("configuration_", "modeling_"))
        out = {"remote_code": {"modeling_file": remote._get_unpad_data is patch,
                               "transformers": fau._get_unpad_data is not original}}
        multipack.patch_for_multipack("llama", model_name="unused", has_remote_code=False)
        out["in_tree"] = {"transformers": fau._get_unpad_data is not original}
        fau._get_unpad_data = original
    return out


def run_axolotl(release):
    import warnings

    import numpy as np
    import torch
    import transformers
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
    warnings.simplefilter("ignore")
    root = VENVS / f"{PREFIX}axolotl-{release}" / "axolotl"
    batching = load_module(root / "utils" / "collators" / "batching.py", "axolotl_batching")
    patch_utils = load_module(root / "monkeypatch" / "utils.py", "axolotl_monkeypatch_utils")
    multipack_source = (root / "monkeypatch" / "multipack.py").read_text()
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"<pad>": 0, "<unk>": 1}, unk_token="<unk>")),
                                  pad_token="<pad>", unk_token="<unk>")
    tok.padding_side = "right"
    Collator = batching.V2BatchSamplerDataCollatorForSeq2Seq
    out = {"format": "attn-doctor/collate-golden@1", "library": "axolotl", "release": release,
           "collator": "axolotl.multipack", "torch": torch.__version__.split("+")[0],
           "transformers": transformers.__version__,
           "executed": f"axolotl/utils/collators/batching.py V2BatchSamplerDataCollatorForSeq2Seq and "
                       f"axolotl/monkeypatch/utils.py get_unpad_data from the axolotl {release} release, each "
                       f"loaded as a module file (no stubs; numpy, torch and transformers {transformers.__version__} "
                       f"are their imports); patch_for_multipack read from axolotl/monkeypatch/multipack.py, "
                       f"and called from the release's package (patch_for_multipack: a local remote-code checkpoint "
                       f"and an in-tree model type)",
           "patches_transformers_unpad": patches_transformers(multipack_source),
           "patch_for_multipack": patched_models(),
           # the release's get_unpad_data on segment-id masks axolotl's collator does not build
           # (ids out of order, repeated): where its algorithms differ
           "unpad_masks": [{"name": m["name"], "mask": m["mask"],
                            **unpad_both(patch_utils.get_unpad_data, torch.tensor(m["mask"], dtype=torch.int64))}
                           for m in llamafactory_masks()],
           "cases": []}
    for case in axolotl_cases():
        o = case["options"]
        rec = {"name": case["name"], "options": o,
               "examples": [{"input_ids": [t for e in row for t in e], "seq_lengths": [len(e) for e in row]}
                            for row in case["rows"]]}
        features = []
        for row in case["rows"]:
            feats = []
            for e in row:
                f = {"input_ids": list(e)}
                if o.get("attention_mask", True):
                    f["attention_mask"] = [1] * len(e)
                f["labels"] = list(e)
                if o.get("position_ids", True):
                    f["position_ids"] = list(range(len(e)))
                feats.append(f)
            features.append(feats)
        kwargs = {"padding": True, "return_tensors": "pt"}
        for k in ("pad_to_multiple_of", "squash_position_ids"):
            if k in o:
                kwargs[k] = o[k]
        try:
            batch = Collator(tok, **kwargs)(features)
            rec["emitted"] = [dict(key=k, **describe(v)) for k, v in batch.items()]
            if "attention_mask" in batch:
                rec["unpad"] = unpad_both(patch_utils.get_unpad_data, batch["attention_mask"])
        except Exception as e:
            rec["raised"] = {"type": type(e).__name__, "message": str(e)}
        out["cases"].append(rec)
    return out


def run_llamafactory(release):
    import torch
    import torch.nn.functional as F
    path = VENVS / f"{PREFIX}llamafactory-{release}" / "llamafactory" / "model" / "model_utils" / "packing.py"
    source = path.read_text()
    tree = ast.parse(source)
    code = "\n\n".join(ast.get_source_segment(source, n) for n in tree.body
                       if isinstance(n, ast.FunctionDef) and n.name in ("get_seqlens_in_batch", "get_unpad_data"))
    ns = {"torch": torch, "F": F}
    exec(compile(code, f"llamafactory-{release}", "exec"), ns)
    out = {"format": "attn-doctor/unpad-golden@1", "library": "llamafactory", "release": release,
           "function": "llamafactory.get_unpad_data", "torch": torch.__version__.split("+")[0],
           "executed": f"llamafactory/model/model_utils/packing.py get_seqlens_in_batch and get_unpad_data from the "
                       f"llamafactory {release} wheel, unchanged, with torch and torch.nn.functional as the names "
                       f"they use",
           "installed_by": "configure_packing" if "def configure_packing" in source else None,
           "cases": []}
    for case in llamafactory_masks():
        mask = torch.tensor(case["mask"], dtype=torch.int64)
        out["cases"].append({"name": case["name"], "mask": case["mask"], **unpad_both(ns["get_unpad_data"], mask)})
    return out


# ---- orchestration -----------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library", choices=["axolotl", "llamafactory"])
    ap.add_argument("--releases")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        json.dump(run_axolotl(a.one) if a.library == "axolotl" else run_llamafactory(a.one), sys.stdout)
        return
    releases = a.releases.split(",") if a.releases else (AXOLOTL if a.library == "axolotl" else LLAMAFACTORY)
    for release in releases:
        prefix = "collate" if a.library == "axolotl" else "unpad"
        path = [VENVS / f"tf-{TRANSFORMERS}"]
        if a.library == "axolotl":  # the release's package and accelerate, for patch_for_multipack
            path = [VENVS / f"{PREFIX}axolotl-{release}", *AXOLOTL_DEPS, *path]
        record_golden(PYTHON, [__file__, a.library, "--one", release], path,
                      f"{prefix}-{a.library}-{release}.json", f"{a.library} {release}", HF_HUB_OFFLINE="1")

if __name__ == "__main__":
    main()
