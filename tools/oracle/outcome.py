"""Outcome classes (docs/spec/report-format.md#prediction) and the combination rule, as the
oracle applies them to what it measured.

The rule is defined once for the tool in lib/predict/; this is the oracle's side of the same
rule: loud outcomes (raises, device_assert, illegal_address, hang) win in the order they happen,
otherwise wrong_output > wrong_gradient > out_of_bounds > ok, and the backward counts only for
a training step.
"""

LOUD = ("raises", "device_assert", "illegal_address", "hang")  # hang: the runner's watchdog
SILENT_ORDER = ("wrong_output", "wrong_gradient", "out_of_bounds", "ok")
CLASSES = LOUD + SILENT_ORDER

_CUDA_FAULTS = ("illegal memory access", "misaligned address", "unspecified launch failure",
                "illegal instruction", "an illegal", "CUDA error", "CUDA driver error",
                "operation not permitted when stream is capturing", "hardware stack error")


# CUDA errors of a launch the driver refused: raised at the call, the context stays usable
_LAUNCH_REFUSED = ("invalid argument", "invalid configuration argument", "too many resources requested")


def classify_exception(exc_type, message):
    """A Python exception as the user sees it -> outcome class. PyTorch appends "Compile with
    `TORCH_USE_CUDA_DSA` to enable device-side assertions" to every CUDA error: only the
    assert's own text ("device-side assert triggered") makes a device assert."""
    text = message or ""
    if "device-side assert triggered" in text:
        return "device_assert"
    if any(s in text for s in _LAUNCH_REFUSED):
        return "raises"
    if exc_type in ("AcceleratorError",) or any(s in text for s in _CUDA_FAULTS):
        return "illegal_address"
    return "raises"


def out_of_memory(message):
    """The oracle's own resource limit (cases run side by side on one GPU), not the stack's answer."""
    return "out of memory" in (message or "") or "CUBLAS_STATUS_ALLOC_FAILED" in (message or "")


def silent_forward(wrong_rows, sanitizer_errors):
    if wrong_rows:
        return "wrong_output"
    if sanitizer_errors:
        return "out_of_bounds"
    return "ok"


def silent_backward(wrong_grad_rows, sanitizer_errors):
    if wrong_grad_rows:
        return "wrong_gradient"
    if sanitizer_errors:
        return "out_of_bounds"
    return "ok"


def combine(forward, backward, training):
    """forward/backward: outcome classes of the passes (backward None when it did not run).
    -> the call's outcome."""
    if forward in LOUD:
        return forward
    if training and backward in LOUD:
        return backward
    candidates = [forward] + ([backward] if training and backward else [])
    for name in SILENT_ORDER:
        if name in candidates:
            return name
    raise ValueError(f"unknown outcome classes {candidates}")
