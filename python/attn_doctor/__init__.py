"""attn_doctor: turn a varlen attention call from a live PyTorch run into an attn-doctor
batch file.

    import attn_doctor
    with attn_doctor.capture("captures"):          # first failing call (default)
        trainer.train()

    attn_doctor.install("captures", every=True)    # every call, for the rest of the process

or, without touching the script:

    python -m attn_doctor.capture --out captures -- python train.py ...

torch, transformers, flash-attn and flash-linear-attention are never imported here: the
hooks attach to whichever of them the run loads.
"""
__version__ = "0.1.0"

from ._session import Capture, active_capture, capture, install, uninstall  # noqa: E402
from .batchfile import FORMAT, Encoder, write_batch_file  # noqa: E402

__all__ = ["Capture", "FORMAT", "Encoder", "active_capture", "capture", "install",
           "uninstall", "write_batch_file", "__version__"]
