"""The child process of attn_doctor.check(): one check through the extension, isolated from
the caller (diagnosis.py says why).

Started as `python -I -S _check_child.py EXTENSION_PATH`: no site-packages, no
sitecustomize (a capture or guard bootstrap on PYTHONPATH must not install itself here), only
the standard library and the extension, loaded from its file. Reads one request on stdin:
{"path": bytes} or {"text": str, "origin": bytes}, and "options" (check_file's keyword
arguments). Writes one answer on stdout: {"code", "report"}, or {"error": KIND, "message"}
where KIND is "InputError", "ValueError", "CapabilityError" or "other". Both are marshal
data (built in, nothing to import: the start-up is most of a small check's time), written
and read only by this package's two ends.
"""
import importlib.machinery
import importlib.util
import marshal
import sys


def _load(path):
    loader = importlib.machinery.ExtensionFileLoader("attn_doctor._native", path)
    spec = importlib.util.spec_from_file_location("attn_doctor._native", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    native = _load(sys.argv[1])
    request = marshal.loads(sys.stdin.buffer.read())
    try:
        if "path" in request:
            code, report = native.check_file(request["path"], **request["options"])
        else:
            code, report = native.check_text(request["text"], request["origin"], **request["options"])
        answer = {"code": code, "report": report}
    except native.InputError as exc:
        answer = {"error": "InputError", "message": str(exc)}
    except native.CapabilityError as exc:
        answer = {"error": "CapabilityError", "message": str(exc)}
    except ValueError as exc:
        answer = {"error": "ValueError", "message": str(exc)}
    except Exception as exc:  # reported to the caller as a RuntimeError
        answer = {"error": "other", "message": f"{type(exc).__name__}: {exc}"}
    sys.stdout.buffer.write(marshal.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
