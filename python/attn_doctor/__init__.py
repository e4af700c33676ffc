"""attn_doctor: diagnose varlen attention calls from Python.

    import attn_doctor

    report = attn_doctor.check("captures/call-000003.json")   # the report, as a dict

    with attn_doctor.guard():                      # check every varlen call before it runs:
        trainer.train()                            # attn_doctor.VarlenError instead of a crash

    with attn_doctor.capture("captures"):          # write the first failing call as a batch
        trainer.train()                            # file, and diagnose it

    from attn_doctor import ops                    # train on the checked kernels (needs torch):
    out = ops.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)
    import attn_doctor.hf                          # attn_implementation="attn_doctor"

or, without touching the script:

    python -m attn_doctor.guard -- python train.py ...
    python -m attn_doctor.guard --kernels -- python train.py ...   # on the checked kernels
    python -m attn_doctor.capture --out captures -- python train.py ...
    python -m attn_doctor check captures/call-000003.json      # the attn-doctor binary

torch, transformers, flash-attn and flash-linear-attention are never imported here: the
hooks attach to whichever of them the run loads (attn_doctor.ops and attn_doctor.hf import
torch, and transformers, when imported themselves).
"""
import os as _os
import re as _re


def _source_version() -> str:
    """A source checkout has no generated _version.py: read CMakeLists.txt's project line,
    the one place the version is written."""
    path = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))),
                         "CMakeLists.txt")
    try:
        with open(path, encoding="utf-8") as fh:
            found = _re.search(r"project\(attn_doctor VERSION ([0-9]+\.[0-9]+\.[0-9]+)", fh.read())
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


# A development build keeps its extension in build/python/attn_doctor (CMakeLists.txt):
# ATTN_DOCTOR_NATIVE_DIR adds that folder to this package's search path, after its own.
if _os.environ.get("ATTN_DOCTOR_NATIVE_DIR"):
    __path__.append(_os.environ["ATTN_DOCTOR_NATIVE_DIR"])  # noqa: F821 (the package's __path__)

try:
    from ._version import __version__
except ImportError:
    __version__ = _source_version()

from ._session import Capture, active_capture, capture, install, uninstall  # noqa: E402
from .batchfile import FORMAT, Encoder, write_batch_file  # noqa: E402
from .diagnosis import CheckTimeout, InputError, check  # noqa: E402


def __getattr__(name):
    """The guard module is imported on first use (attn_doctor.guard, Guard, VarlenError), so
    that `python -m attn_doctor.guard` runs it as a fresh __main__. attn_doctor.guard is the
    module itself, callable: attn_doctor.guard(...) is a Guard."""
    if name in ("guard", "Guard", "VarlenError"):
        import importlib
        module = importlib.import_module(".guard", __name__)
        return module if name == "guard" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Capture", "CheckTimeout", "FORMAT", "Encoder", "Guard", "InputError", "VarlenError",
           "active_capture", "capture", "check", "guard", "install", "uninstall",
           "write_batch_file", "__version__"]
