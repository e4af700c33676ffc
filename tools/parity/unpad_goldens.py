"""flash-attn bert_padding and FLA attention-layer unpadding goldens (parity.py flash-attn / fla).

flash-attn: the sdist of each release is fetched with pip (into .cache/, never committed) and its
own flash_attn/bert_padding.py is executed; the file only needs torch and einops.

FLA: `import fla` needs a GPU (Triton asks for an active driver at import), so the release's own
fla/layers/utils.py and fla/ops/utils/index.py are loaded inside a stub `fla` package whose
fla/utils.py provides only `tensor_cache` (identity: the real one memoises the last call) and
`autotune_cache_kwargs` (empty). Both stubs are listed in the golden.
"""

import json
import os
import shutil
import subprocess
import tarfile
import zipfile

FLASH_ATTN_RELEASES = ["2.6.3", "2.7.0.post2", "2.8.3"]
FLA_RELEASES = ["0.2.2", "0.3.2", "0.6.0"]
FLA_WHEELS = {"0.2.2": ["flash-linear-attention==0.2.2"],
              "0.3.2": ["flash-linear-attention==0.3.2", "fla-core==0.3.2"],
              "0.6.0": ["flash-linear-attention==0.6.0", "fla-core==0.6.0"]}
FLA_STUB = '''"""attn-doctor parity stub of fla.utils: only what fla/layers/utils.py and
fla/ops/utils/index.py import. tensor_cache is the identity (the real one memoises)."""


def tensor_cache(fn):
    return fn


autotune_cache_kwargs = {}
'''


def pip(python, *args):
    subprocess.run([python, "-m", "pip", *args], check=True, capture_output=True, text=True,
                   env=dict(os.environ, FLASH_ATTENTION_SKIP_CUDA_BUILD="TRUE"))


def fetch_bert_padding(python, cache, release):
    target = cache / f"flash_attn-{release}" / "bert_padding.py"
    if target.exists():
        return target
    sdist_dir = cache / "sdist"
    sdist_dir.mkdir(parents=True, exist_ok=True)
    archive = sdist_dir / f"flash_attn-{release}.tar.gz"
    if not archive.exists():
        # metadata preparation of this sdist imports torch and packaging: no build isolation
        pip(python, "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
            "-d", str(sdist_dir), f"flash-attn=={release}")
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("flash_attn/bert_padding.py"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(tar.extractfile(member).read())
    return target


def fla_package(python, cache, release):
    root = cache / f"fla-{release}"
    if (root / "fla" / "layers" / "utils.py").exists():
        return root
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for spec in FLA_WHEELS[release]:
        pip(python, "download", "--no-deps", "-d", str(wheels), spec)
    if root.exists():
        shutil.rmtree(root)
    for sub in ("fla", "fla/layers", "fla/ops", "fla/ops/utils"):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / "__init__.py").write_text("")
    (root / "fla" / "utils.py").write_text(FLA_STUB)
    for spec in FLA_WHEELS[release]:
        name, version = spec.split("==")
        wheel = next(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for member in ("fla/layers/utils.py", "fla/ops/utils/index.py"):
                if member in z.namelist():
                    (root / member).write_bytes(z.read(member))
    return root


def run(run_python, python_for_torch, cache, golden_dir, batch_files, dumps):
    base = python_for_torch("2.4")
    for release in FLASH_ATTN_RELEASES:
        module = fetch_bert_padding(base, cache, release)
        out = cache / f"flash_attn-{release}-out.json"
        run_python("driver_unpad.py", ["--lib", "flash_attn", "--module", str(module), "--out", str(out)]
                   + [str(p) for p in batch_files], [], python=base)
        data = json.loads(out.read_text())
        golden = {
            "format": "attn-doctor/golden-unpad@1", "library": "flash_attn", "release": release,
            "torch": data["environment"]["torch"], "torch_device": "cpu", "python": data["environment"]["python"],
            "loaded": "module", "module": "flash_attn/bert_padding.py from the release's sdist (not committed)",
            "stubs": [], "call": "unpad_input(k, attention_mask), k of shape (B, Lk, Hk, D)",
            "cases": data["cases"],
        }
        (golden_dir / f"flash_attn-{release}.json").write_text(dumps(golden) + "\n")
        print(f"wrote flash_attn-{release}.json ({len(data['cases'])} cases)")
    for release in FLA_RELEASES:
        root = fla_package(base, cache, release)
        out = cache / f"fla-{release}-out.json"
        run_python("driver_unpad.py", ["--lib", "fla", "--module", "fla.layers.utils", "--out", str(out)]
                   + [str(p) for p in batch_files], [root], python=base)
        data = json.loads(out.read_text())
        golden = {
            "format": "attn-doctor/golden-unpad@1", "library": "fla", "release": release,
            "torch": data["environment"]["torch"], "torch_device": "cpu", "python": data["environment"]["python"],
            "loaded": "module",
            "module": "fla/layers/utils.py and fla/ops/utils/index.py of the release's wheels",
            "stubs": ["fla/__init__.py, fla/layers/__init__.py, fla/ops/__init__.py, fla/ops/utils/__init__.py: empty "
                      "(the real ones import every layer and Triton kernel, which needs a GPU driver)",
                      "fla/utils.py: tensor_cache = identity (the real one memoises the last call), "
                      "autotune_cache_kwargs = {}"],
            "call": "unpad_input(q, (k, v), attention_mask, q_len): what fla.layers.attn.Attention calls",
            "cases": data["cases"],
        }
        (golden_dir / f"fla-{release}.json").write_text(dumps(golden) + "\n")
        print(f"wrote fla-{release}.json ({len(data['cases'])} cases)")
