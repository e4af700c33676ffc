"""Started by Python at start-up in the process `python -m attn_doctor.capture` launches:
installs the capture configured in ATTN_DOCTOR_CAPTURE, then runs the sitecustomize this
file shadows, if there is one, so the environment's own start-up code still runs."""
import importlib.machinery
import importlib.util
import json
import os
import sys


def _install():
    config = json.loads(os.environ.get("ATTN_DOCTOR_CAPTURE", "{}"))
    if not config:
        return
    import attn_doctor
    attn_doctor.Capture(**config).install()


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


try:
    _install()
except Exception as exc:  # never stop the user's program from starting
    print(f"attn-doctor: warning: capture not installed: {exc!r}", file=sys.stderr)
_chain()
