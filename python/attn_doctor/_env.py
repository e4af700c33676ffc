"""The Python half of `attn-doctor env` and `python -m attn_doctor env`: this interpreter, the
attn_doctor package and whether its extension loads, the versions of the libraries whose
varlen calls attn-doctor diagnoses, and the GPU.

Standard library only, and runnable on its own: the attn-doctor binary carries this file's
text and runs it in the Python it finds (`python -c TEXT --json`). Versions come from the
installed distributions' metadata (importlib.metadata); nothing is imported to learn one.
torch is imported only when it is installed, to ask torch.cuda for the GPU; without it,
nvidia-smi is asked.
"""
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys

# (what to call it, distribution names to try, the module it provides)
LIBRARIES = [
    ("torch", ("torch",), "torch"),
    ("transformers", ("transformers",), "transformers"),
    ("flash-attn", ("flash-attn", "flash_attn"), "flash_attn"),
    ("flash_attn_3", ("flash_attn_3", "flash-attn-3"), "flash_attn_interface"),
    ("flash-linear-attention", ("flash-linear-attention", "fla-core"), "fla"),
    ("triton", ("triton", "pytorch-triton"), "triton"),
]


def _distribution_version(names):
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # a broken metadata folder is reported as absent, not raised
            continue
    return None, None


def libraries():
    """[{name, distribution, version, module_found}] for each library of LIBRARIES."""
    out = []
    for name, dists, module in LIBRARIES:
        dist, version = _distribution_version(dists)
        try:
            found = importlib.util.find_spec(module) is not None  # finds, does not import
        except (ImportError, ValueError):
            found = False
        out.append({"name": name, "distribution": dist, "version": version, "module": module,
                    "module_found": found})
    return out


def package():
    """The attn_doctor package this interpreter imports and whether its extension loads."""
    info = {"importable": False, "version": None, "location": None,
            "extension_loaded": False, "extension_error": None}
    try:
        ad = importlib.import_module("attn_doctor")
    except Exception as e:  # not installed here, or broken: say which
        info["error"] = f"{type(e).__name__}: {e}"
        return info
    info.update(importable=True, version=getattr(ad, "__version__", None),
                location=os.path.dirname(os.path.abspath(ad.__file__)))
    try:
        importlib.import_module("attn_doctor._native")
        info["extension_loaded"] = True
    except Exception as e:
        info["extension_error"] = f"{type(e).__name__}: {e}"
    return info


def _nvidia_smi():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None, "no nvidia-smi on PATH"
    try:
        r = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"nvidia-smi failed: {e}"
    if r.returncode != 0:
        return None, f"nvidia-smi failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[:200]}"
    gpus = []
    for line in r.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append({"name": parts[0], "compute_capability": parts[1], "driver": parts[2],
                         "memory": parts[3]})
    return gpus, None


def gpu(libs):
    """{source, devices, note}: torch.cuda when torch is installed, else nvidia-smi."""
    torch_installed = any(lib["name"] == "torch" and lib["version"] for lib in libs)
    notes = []
    cuda_version = None
    if torch_installed:
        try:
            torch = importlib.import_module("torch")
            cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
            if torch.cuda.is_available():
                devices = []
                for i in range(torch.cuda.device_count()):
                    major, minor = torch.cuda.get_device_capability(i)
                    devices.append({"name": torch.cuda.get_device_name(i),
                                    "compute_capability": f"{major}.{minor}"})
                return {"source": "torch.cuda", "torch_cuda": cuda_version, "devices": devices, "note": None}
            notes.append("torch.cuda.is_available() is False"
                         + (f" (torch built for CUDA {cuda_version})" if cuda_version else " (a CPU-only torch)"))
        except Exception as e:
            notes.append(f"import torch failed: {type(e).__name__}: {e}")
    gpus, why = _nvidia_smi()
    if gpus:
        return {"source": "nvidia-smi", "torch_cuda": cuda_version, "devices": gpus, "note": "; ".join(notes) or None}
    notes.append(why)
    return {"source": None, "torch_cuda": cuda_version, "devices": [], "note": "; ".join(n for n in notes if n)}


def collect():
    libs = libraries()
    return {"python": {"executable": sys.executable, "version": platform.python_version()},
            "attn_doctor": package(), "libraries": libs, "gpu": gpu(libs)}


def render(info):
    """The Python half of `env`'s text, one fact a line."""
    lines = [f"python: {info['python']['version']} ({info['python']['executable']})"]
    pkg = info["attn_doctor"]
    if pkg["importable"]:
        ext = ("loaded" if pkg["extension_loaded"]
               else f"not loaded ({pkg['extension_error']})")
        lines.append(f"attn_doctor package: {pkg['version']} ({pkg['location']}); extension attn_doctor._native: {ext}")
    else:
        lines.append(f"attn_doctor package: not importable here ({pkg.get('error')})")
    for lib in info["libraries"]:
        label = lib["name"] if lib["module"] in (lib["name"], lib["name"].replace("-", "_")) \
            else f"{lib['name']} ({lib['module']})"
        if lib["version"]:
            text = lib["version"]
            if lib["name"] == "torch" and info["gpu"].get("torch_cuda"):
                text += f" (CUDA {info['gpu']['torch_cuda']})"
        elif lib["module_found"]:
            text = "present, no distribution metadata"
        else:
            text = "not installed"
        lines.append(f"{label}: {text}")
    g = info["gpu"]
    if g["devices"]:
        for d in g["devices"]:
            extra = f", driver {d['driver']}, {d['memory']}" if "driver" in d else ""
            lines.append(f"GPU ({g['source']}): {d['name']} (compute capability {d['compute_capability']}{extra})")
    else:
        lines.append(f"GPU (python): none ({g['note']})")
    return "\n".join(lines)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    info = collect()
    if "--json" in args:
        info["text"] = render(info)
        print(json.dumps(info))
    else:
        print(render(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
