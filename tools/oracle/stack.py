"""Loading the real stack's pieces inside one case's process (tools/oracle/README.md).

- the stand-in flash_attn (tools/oracle/standin) with a generated dist-info naming the batch's
  flash-attn release, so transformers' version checks see that release;
- a transformers release: the trimmed copy unpacked from the carry (tools/oracle/pack.py), or
  the device's own installation when the batch names none;
- FLA's rotary (`fla.modules.rotary`) from a carried FLA wheel;
- flash-attn's Triton rotary (`flash_attn/ops/triton/rotary.py`, `flash_attn/layers/rotary.py`)
  taken from the release's sdist by pack.py.

Every change to upstream behaviour is appended to PATCHES and lands in the golden.
"""

import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PATCHES = []


def stack_root():
    return Path(os.environ.get("ORACLE_STACK", "/tmp/oracle-stack"))


def install_standin(version, workdir):
    """Put the stand-in and a dist-info for `version` first on sys.path."""
    info_root = Path(workdir) / f"standin-dist-{version}"
    info = info_root / f"flash_attn-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\n")
    (info / "top_level.txt").write_text("flash_attn\n")
    (info / "RECORD").write_text("")
    sys.path[:0] = [str(HERE / "standin"), str(info_root), str(HERE), str(REPO / "tools" / "parity")]


def _stub_version_check():
    """transformers' __init__ checks the installed versions of tokenizers, huggingface_hub, ...
    against the release's pins (dependency_versions_check). The device holds transformers 5.17's
    dependencies, outside older releases' ranges; the conversion uses none of them."""
    name = "transformers.dependency_versions_check"
    module = types.ModuleType(name)
    module.dep_version_check = lambda pkg, hint=None: None
    sys.modules[name] = module
    PATCHES.append("transformers.dependency_versions_check replaced by a module whose checks do nothing "
                   "(the device's tokenizers/huggingface_hub/... are newer than older releases pin)")


def load_transformers(release):
    """-> (module transformers, where it came from). `release` None = the installed one."""
    if release is not None:
        root = stack_root() / f"transformers-{release}"
        if not (root / "transformers").is_dir():
            raise FileNotFoundError(f"transformers {release} is not in the oracle stack ({root}): run tools/oracle/pack.py")
        sys.path.insert(0, str(root))
        _stub_version_check()
    import transformers
    if release is not None and transformers.__version__ != release:
        raise RuntimeError(f"loaded transformers {transformers.__version__}, wanted {release}")
    return transformers, ("trimmed copy of the release (tools/oracle/pack.py)" if release else "the device's installation")


def ensure_flash_attn_available(dry):
    """On the GPU the release's own is_flash_attn_2_available() sees the stand-in and CUDA; it is
    only forced on the CPU (dry runs), as tools/parity does."""
    import transformers.utils as tu
    if not dry and tu.is_flash_attn_2_available():
        return
    sys.path.insert(0, str(REPO / "tools" / "parity"))
    import tracing
    tracing.patch_availability()
    PATCHES.extend(p for p in tracing.PATCHES if p not in PATCHES)


def _stub_package(name, path):
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    module.__file__ = None
    sys.modules[name] = module
    PATCHES.append(f"{name}: package __init__ not run (stub package over {path.name}/); its submodules are the release's")
    return module


def load_fla_rotary(version):
    """FLA's RotaryEmbedding of a carried release. `import fla` imports every layer and model
    (and transformers' model classes); the rotary module needs none of them, so the packages
    `fla`, `fla.modules` (and `fla.ops`, `fla.layers`) are stubs whose submodules load from the
    wheel as they are."""
    root = stack_root() / f"fla-{version}"
    while not (root / "fla").is_dir() and version.endswith(".0") and version.count(".") > 1:
        version = version[:-2]  # 0.1.0 is the release published as 0.1
        root = stack_root() / f"fla-{version}"
    if not (root / "fla").is_dir():
        raise FileNotFoundError(f"FLA {version} is not in the oracle stack ({root}): run tools/oracle/pack.py")
    sys.path.insert(0, str(root))
    for name in ("fla", "fla.modules", "fla.ops", "fla.layers", "fla.models"):
        path = root.joinpath(*name.split("."))
        if path.is_dir():
            stub = _stub_package(name, path)
            if name == "fla":  # the modules read `from fla import __version__` (0.6.0's utils)
                stub.__version__ = version
    module = importlib.import_module("fla.modules.rotary")
    return module


def load_flash_attn_rotary(version):
    """flash-attn's Triton rotary of a release, loaded into the stand-in package."""
    root = stack_root() / f"flash_attn-{version}"
    modules = {}
    for name, rel in (("flash_attn.ops.triton.rotary", "ops/triton/rotary.py"),
                      ("flash_attn.layers.rotary", "layers/rotary.py")):
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"flash-attn {version}'s {rel} is not in the oracle stack ({root}): run tools/oracle/pack.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, leaf = name.rpartition(".")
        setattr(importlib.import_module(parent), leaf, module)
        modules[rel] = module
    PATCHES.append(f"flash_attn/ops/triton/rotary.py and flash_attn/layers/rotary.py of flash-attn {version} loaded "
                   "into the stand-in package (the rest of flash-attn is the stand-in)")
    return modules["layers/rotary.py"]
