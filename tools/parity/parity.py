"""Regenerate the parity goldens under tests/golden/ (tools/parity/README.md).

    python parity.py hf [--releases 4.44.0,4.44.1]   # transformers-<release>.json
    python parity.py gemma2                          # Gemma-2 generate on every release with Gemma-2
    python parity.py qwen2vl                         # Qwen2-VL forward: which position ids reach FA
    python parity.py model                           # Llama forward: a model-level mask's preparation
    python parity.py hybrid                          # Qwen3-Next forward: each layer's boundaries
    python parity.py fla-layer                       # FLA's GatedDeltaNet: its kernels' cu_seqlens
    python parity.py unpad                           # flash_attn-<ver>.json (real bert_padding.py)
                                                     # and fla-<ver>.json (real fla/layers/utils.py)

Each release runs in a fresh interpreter (the base venv's python, so the same torch) whose
PYTHONPATH holds the stand-in flash_attn (with a dist-info for the impersonated version) and the
release installed by setup_envs.sh under $PARITY_VENVS/tf-<release>.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = HERE / ".cache"
GOLDEN = REPO / "tests" / "golden"
BATCHES = GOLDEN / "batches"
VENVS = Path(os.environ.get("PARITY_VENVS", "/work/venvs"))
PYTHON = os.environ.get("PARITY_PYTHON", str(VENVS / "torch24" / "bin" / "python"))

RELEASES = [
    "4.36.2", "4.40.2", "4.42.4", "4.43.4", "4.44.0", "4.44.1", "4.44.2", "4.45.2", "4.46.3", "4.47.1",
    "4.48.3", "4.49.0", "4.50.3", "4.52.4", "4.53.0", "4.53.1", "4.53.3", "4.54.0", "4.54.1", "4.55.0", "4.55.4",
    "4.56.2", "4.57.6", "5.0.0", "5.4.0", "5.5.0", "5.14.1", "5.16.0", "5.20.0", "5.23.0",
    # one release of every other code version (releases.py: docs/spec/releases.md)
    "4.51.3", "4.55.2", "5.1.0", "5.2.0", "5.3.0", "5.6.0", "5.6.2", "5.9.0", "5.11.0", "5.12.1", "5.13.1",
    "5.15.1", "5.17.0", "5.18.0", "5.19.0", "5.21.1", "5.22.2", "5.24.0", "4.48.1",
]
DEFAULT_FLASH_ATTN = "2.6.3"


def standin(version):
    """A directory holding the stand-in package and a dist-info that names `version`."""
    root = CACHE / f"standin-{version}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    shutil.copytree(HERE / "standin" / "flash_attn", root / "flash_attn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    info = root / f"flash_attn-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\n")
    (info / "top_level.txt").write_text("flash_attn\n")
    (info / "INSTALLER").write_text("attn-doctor-parity\n")
    (info / "RECORD").write_text("")
    return root


def installed(prefix, package, release):
    """Where setup_envs.sh installed a release (<prefix>-<release>, holding the `package`
    directory), else one installed beside it by hand as <name>-<prefix>-<release>."""
    for site in [VENVS / f"{prefix}-{release}"] + sorted(VENVS.glob(f"*-{prefix}-{release}")):
        if (site / package).is_dir():
            return site
    raise SystemExit(f"{package} {release} is not installed under {VENVS}: run setup_envs.sh")


def site_for(release):
    """Where a transformers release is installed (tf-<release>)."""
    return installed("tf", "transformers", release)


def python_for(release, what="hf"):
    """The interpreter (and so the torch) a release runs under: torch 2.4 (the base venv) unless the
    release requires a newer torch (transformers >= 5.20: torch>=2.6) or cannot run a model on 2.4
    although it declares support (4.52.x: ALL_PARALLEL_STYLES is None below torch 2.5; 5.8.1:
    torch 2.4 cannot infer the schema of integrations/moe.py's custom op, so 5.6 - 5.8 run on 2.6; 5.9+:
    generation/continuous_batching imports torch.distributed.tensor.device_mesh, 5.14+:
    core_model_loading imports torch.distributed.tensor.DTensor, both torch >= 2.5)."""
    table = site_for(release) / "transformers" / "dependency_versions_table.py"
    requirement = re.search(r'"torch": "torch>=([\d.]+)"', table.read_text())
    needs = tuple(int(x) for x in requirement.group(1).split(".")) if requirement else (0,)
    model_needs_newer = release.startswith("4.52.") or tuple(int(x) for x in release.split(".")[:2]) >= (5, 6)
    # the hybrid driver's Qwen3-Next (an MoE model) runs on 2.6 on every release
    if needs > (2, 4) or (what in ("gemma2", "model") and model_needs_newer) or what == "hybrid":
        return str(VENVS / "torch26" / "bin" / "python")
    return PYTHON


def run_python(script, args, paths, python=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
    env["PYTHONHASHSEED"] = "0"
    env["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    env["HF_HUB_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    cmd = [python or PYTHON, str(HERE / script)] + args
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{script} failed for {args[:2]}")
    return proc


def batch_files():
    return sorted(BATCHES.glob("*.json"))


def flash_attn_version(path):
    doc = json.loads(path.read_text())
    return doc.get("environment", {}).get("flash_attn", DEFAULT_FLASH_ATTN)


def run_hf(releases):
    groups = defaultdict(list)
    for path in batch_files():
        groups[flash_attn_version(path)].append(path)
    for release in releases:
        site = site_for(release)
        cases, environments = [], {}
        for version, paths in sorted(groups.items()):
            out = CACHE / f"hf-{release}-{version}.json"
            run_python("driver_hf.py", ["--out", str(out)] + [str(p) for p in paths],
                       [standin(version), site], python=python_for(release))
            part = json.loads(out.read_text())
            environments[version] = part["environment"]
            cases.extend(part["cases"])
        cases.sort(key=lambda c: c["batch"])
        env = environments[DEFAULT_FLASH_ATTN]
        golden = {
            "format": "attn-doctor/golden@1",
            "library": "transformers",
            "release": release,
            "torch": env["torch"],
            "torch_device": "cpu",
            "python": env["python"],
            "loaded": env["loaded"],
            "entry_point": env["entry_point"],
            "stubs": [],
            "patches": env["patches"],
            "flash_attn_standin": sorted(environments),
            "default_flash_attn": DEFAULT_FLASH_ATTN,
            "cases": cases,
        }
        if "note" in env:
            golden["note"] = env["note"]
        target = GOLDEN / f"transformers-{release}.json"
        target.write_text(dumps(golden) + "\n")
        print(f"wrote {target.relative_to(REPO)} ({len(cases)} cases)")


def dumps(obj):
    """JSON with arrays of numbers kept on one line, so goldens stay readable."""
    text = json.dumps(obj, indent=1)
    numbers = re.compile(r"\[\s+((?:-?[\d.eE+]+,\s*)*-?[\d.eE+]+)\s+\]")
    return numbers.sub(lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["hf", "gemma2", "qwen2vl", "model", "hybrid", "fla-layer", "unpad", "all"])
    ap.add_argument("--releases", help="only these releases (default: every release of RELEASES)")
    args = ap.parse_args()
    CACHE.mkdir(exist_ok=True)
    releases = args.releases.split(",") if args.releases else RELEASES
    only = set(releases) if args.releases else None
    if args.what in ("hf", "all"):
        run_hf(releases)
    if args.what in ("gemma2", "all"):
        import gemma2
        gemma2.run(run_python, standin, python_for, site_for, GOLDEN, BATCHES, dumps, CACHE, only)
    if args.what in ("qwen2vl", "all"):
        import qwen2vl
        qwen2vl.run(run_python, standin, python_for, site_for, GOLDEN, dumps, CACHE, only)
    if args.what in ("model", "all"):
        import llama_mask
        llama_mask.run(run_python, standin, python_for, site_for, GOLDEN, BATCHES, dumps, CACHE, only)
    if args.what in ("hybrid", "all"):
        import hybrid
        hybrid.run(run_python, standin, python_for, site_for, GOLDEN, BATCHES, dumps, CACHE, only)
    if args.what in ("fla-layer", "all"):
        import fla_layer
        fla_layer.run(run_python, str(VENVS / "torch26" / "bin" / "python"), lambda r: installed("fla", "fla", r), site_for,
                      VENVS / "buildhelpers", GOLDEN, BATCHES, dumps, CACHE, only)
    if args.what in ("unpad", "all"):
        import unpad_goldens
        unpad_goldens.run(run_python, lambda _: PYTHON, CACHE, GOLDEN, batch_files(), dumps)

if __name__ == "__main__":
    main()
