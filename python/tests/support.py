"""Shared helpers: put the fake libraries (tests/fakepkgs) on sys.path for one test and
remove every trace of them afterwards, so each test imports them fresh."""
import contextlib
import os
import shutil
import sys
import tempfile

FAKEPKGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fakepkgs")
FAKE_ROOTS = ("transformers", "flash_attn", "fla", "faketensor", "fake_torch_varlen", "transformer_engine")


def purge_fakes():
    for name in list(sys.modules):
        if name.split(".")[0] in FAKE_ROOTS:
            del sys.modules[name]


@contextlib.contextmanager
def fake_libraries():
    purge_fakes()
    sys.path.insert(0, FAKEPKGS)
    try:
        yield
    finally:
        import attn_doctor
        attn_doctor.uninstall()
        if FAKEPKGS in sys.path:
            sys.path.remove(FAKEPKGS)
        purge_fakes()


@contextlib.contextmanager
def temp_dir():
    path = tempfile.mkdtemp(prefix="attn-doctor-test-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def torch_skip_reason(transformers_needed=True):
    """Why a test of the checked ops cannot run in this Python (torch, transformers or the
    built extension missing), or None when it can."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed in this Python"
    if transformers_needed:
        try:
            import transformers  # noqa: F401
        except ImportError:
            return "transformers is not installed in this Python"
    from attn_doctor import diagnosis
    if diagnosis._native is None:
        return "attn_doctor._native is not built for this Python"
    return None
