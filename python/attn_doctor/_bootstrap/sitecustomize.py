"""Started by Python at start-up in the processes `python -m attn_doctor.capture` and
`python -m attn_doctor.guard` launch: installs the capture configured in ATTN_DOCTOR_CAPTURE
and the guard configured in ATTN_DOCTOR_GUARD, then runs the sitecustomize this file
shadows, if there is one, so the environment's own start-up code still runs."""
import importlib.machinery
import importlib.util
import json
import os
import sys


def _install(variable, what):
    try:
        config = json.loads(os.environ.get(variable, "{}"))
        if not config:
            return
        import attn_doctor
        if what == "capture":
            attn_doctor.Capture(**config).install()
        else:
            attn_doctor.guard.install(**config)
    except Exception as exc:  # never stop the user's program from starting
        print(f"attn-doctor: warning: {what} not installed: {exc!r}", file=sys.stderr)


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install("ATTN_DOCTOR_CAPTURE", "capture")
_install("ATTN_DOCTOR_GUARD", "guard")
_chain()
