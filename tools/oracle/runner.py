"""Run every oracle case, each in its own process, and append one JSON line per case.

    python tools/oracle/runner.py --out DIR [--jobs N] [--deadline SECONDS] [--case-timeout S]
                                  [--only ID,...] [--api API] [--dry-cpu] [--no-sanitizer] [--poison]

Cases: every repro_cases/*.json and tests/oracle/cases/*.json (docs/spec/oracle.md). Each case
runs `case.py --mode run` in a fresh interpreter with a timeout; a run that ended without an error
is then run again under compute-sanitizer memcheck (`case.py --mode sanitize`, PyTorch's caching
allocator off so every tensor is its own allocation and a read past it is seen). The record, with
the sanitizer counts, the outcome of each pass and the call's outcome under the combination rule
(outcome.py), is appended to DIR/oracle.jsonl as soon as the case is done, so a timeout keeps
what finished. The timeout is also the watchdog for `hang`: a case killed while a pass it
announced (case.py's ORACLE-ENTER line) had been running --hang-after seconds or more without
returning is recorded as that pass hanging; killed anywhere else it stays "not measured". Cases whose tensors need more than --big-gib GiB run one at a time in their own
lane, beside the others. Nothing is started after the deadline, and whatever still runs then is
killed and recorded as timed out. A case killed by its own full timeout (the watchdog) while
inside a call is recorded with the outcome "hang" for the pass that had not returned (case.py
prints "ORACLE-PASS forward|backward" before each). `--api` keeps the cases whose `varlen.api`
is that API.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import outcome  # noqa: E402

SANITIZER_ERRORS = re.compile(r"^========= (Invalid |Misaligned|Out-of-range|Address |Malloc|Uninitialized|Hardware)")
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
BYTES = {"fp32": 4, "float32": 4, "float": 4, "fp8_e4m3": 1}


def case_files():
    return sorted(REPO.glob("repro_cases/*.json")) + sorted(REPO.glob("tests/oracle/cases/*.json"))


def case_api(path):
    """The API a batch file's call went to (varlen.api; "" when it does not say)."""
    try:
        return json.loads(path.read_text()).get("varlen", {}).get("api", "")
    except (OSError, ValueError, AttributeError):
        return ""


def estimate_gib(path):
    """Rough GPU memory of a training step on the case's tensors (q, k, v, out, dO, grads, FA2's
    fp32 dq accumulator), from the varlen rows or the padded shape."""
    doc = json.loads(path.read_text())
    m = doc["model"]
    h, hk, d = m["num_heads"], m.get("num_kv_heads", m["num_heads"]), m["head_dim"]
    size = BYTES.get(m.get("dtype", "bf16"), 2)
    v = doc.get("varlen", {})
    rows_q = rows_k = 0
    if v:
        flat = v.get("cu_seqlens_q", [0])
        while flat and isinstance(flat[-1], list):
            flat = flat[-1]
        rows_q = doc.get("tensors", {}).get("q", {}).get("rows", v.get("total_q", max(flat[-1] if flat else 0, 0)))
        rows_k = v.get("total_k", rows_q)
    else:
        b = doc.get("batch", {})
        width = b.get("kv_length") or b.get("attention_mask", {}).get("width") or 4096
        rows_q = rows_k = b.get("batch_size", 1) * width * max(1, len(b.get("attention_mask", {}).get("lengths", [1])))
    elems_q, elems_k = rows_q * h * d, rows_k * hk * d
    total = 5 * elems_q * size + 6 * elems_k * size + elems_q * 4 + 2 * rows_k * h * d * size
    return total / (1 << 30)


def parse_sanitizer(text):
    """memcheck output -> per pass {errors, first}; errors split at the ORACLE-MARK line."""
    passes = {"forward": {"errors": 0, "first": None}, "backward": {"errors": 0, "first": None}}
    current = "forward"
    marked = False
    summary = None
    for line in text.splitlines():
        if line.startswith("ORACLE-MARK backward"):
            current, marked = "backward", True
            continue
        m = SUMMARY.search(line)
        if m:
            summary = int(m.group(1))
            continue
        if SANITIZER_ERRORS.match(line):
            p = passes[current]
            p["errors"] += 1
            if p["first"] is None:
                p["first"] = line.replace("=========", "").strip()
    printed = passes["forward"]["errors"] + passes["backward"]["errors"]
    if summary is not None and summary > printed:  # past the print limit: the pass that printed last
        passes[current]["errors"] += summary - printed
    return passes, marked, summary


def entered_pass(stdout):
    """(pass, time it was entered) of the pass case.py announced (ORACLE-ENTER) and never left,
    or None."""
    inside = None
    for line in (stdout or "").splitlines():
        if line.startswith("ORACLE-ENTER "):
            parts = line.split()
            inside = (parts[1], float(parts[2]) if len(parts) > 2 else None)
        elif line.startswith("ORACLE-LEAVE "):
            inside = None
    return inside


def hang_record(cid, batch, name, timeout):
    """A case the watchdog killed inside a pass: that pass hangs (report-format.md `hang`).
    A backward that hangs comes after a forward that returned but was not compared."""
    rec = {"id": cid, "batch": batch, "forward": None, "backward": None, "notes": [],
           "hang": {"pass": name, "after_seconds": round(timeout, 1)}}
    rec[name] = {"outcome": "hang", "message": f"the {name} pass did not return within {timeout:.0f} s (watchdog)"}
    if name == "backward":
        rec["forward"] = {"returned": True, "note": "not compared: the backward never returned"}
    return rec


class Runner:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.out / "oracle.jsonl"
        self.log = open(self.out / "oracle.log", "a")
        self.lock = threading.Lock()
        self.start = time.time()
        self.work = Path(os.environ.get("ORACLE_WORK", "/tmp/oracle-work"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.sanitizer = shutil.which("compute-sanitizer") if not args.no_sanitizer and not args.dry_cpu else None
        self.done = 0

    def say(self, text):
        line = f"[{time.time() - self.start:6.1f}s] {text}"
        with self.lock:
            print(line, flush=True)
            self.log.write(line + "\n")
            self.log.flush()

    def left(self):
        return self.args.deadline - (time.time() - self.start)

    def _spawn(self, cmd, timeout, env):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
            return proc.returncode, proc.stdout, proc.stderr, False
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return None, out, err, True

    def env(self, sanitize=False):
        env = dict(os.environ)
        env.update(PYTHONHASHSEED="0", PYTHONUNBUFFERED="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1",
                   HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", CUDA_LAUNCH_BLOCKING="1",
                   ORACLE_WORK=str(self.work))
        if sanitize:
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        if self.args.poison:
            env["ORACLE_POISON"] = "1"
        return env

    def run_one(self, path, big):
        cid = path.stem
        result = self.work / f"{cid}.json"
        result.unlink(missing_ok=True)
        timeout = min(self.args.big_timeout if big else self.args.case_timeout, max(self.left(), 1))
        cmd = [sys.executable, str(HERE / "case.py"), str(path), "--out", str(result), "--mode", "run"]
        if self.args.dry_cpu:
            cmd.append("--dry-cpu")
        t0 = time.time()
        code, stdout, stderr, timed_out = self._spawn(cmd, timeout, self.env())
        # the watchdog: killed inside a pass that had run --hang-after seconds or more is a hang
        # (a kernel that does not return); killed elsewhere, or sooner, is not measured
        inside = entered_pass(stdout) if timed_out and not result.exists() else None
        in_pass = time.time() - inside[1] if inside and inside[1] is not None else 0.0
        if inside and in_pass >= self.args.hang_after:
            rec = hang_record(cid, os.path.relpath(path, REPO), inside[0], in_pass)
        elif result.exists():
            rec = json.loads(result.read_text())
        else:
            rec = {"id": cid, "batch": os.path.relpath(path, REPO), "forward": None, "backward": None, "notes": []}
            rec["not_measured"] = (f"timed out after {timeout:.0f} s" if timed_out else
                                   f"the case process died (exit {code}) before writing its record")
            rec["stderr_tail"] = stderr[-3000:]
        rec["wall_seconds"] = round(time.time() - t0, 2)
        asserts = [line.strip() for line in stderr.splitlines() if "Assertion" in line]
        if asserts:
            rec["device_assert_lines"] = asserts[:3]
        if self.sanitizer and self._silent(rec) and not big and self.left() > 30:
            self.sanitize(path, rec)
        elif self._silent(rec):
            reason = ("no compute-sanitizer" if not self.sanitizer else
                      "too large for memcheck in the time limit" if big else "deadline near")
            for name in ("forward", "backward"):
                if rec.get(name):
                    rec[name]["sanitizer"] = {"ran": False, "reason": reason}
        self.finish(rec)
        return rec

    def _silent(self, rec):
        f = rec.get("forward") or {}
        return ("not_measured" not in rec and "harness_error" not in rec and f.get("outcome") in outcome.SILENT_ORDER)

    def sanitize(self, path, rec):
        cid = path.stem
        result = self.work / f"{cid}.sanitize.json"
        cmd = [self.sanitizer, "--tool", "memcheck", "--report-api-errors", "no", "--show-backtrace", "no",
               "--print-limit", "20000"]
        if self.args.sanitizer_kernels:
            cmd += ["--kernel-name", f"kns={self.args.sanitizer_kernels}"]
        cmd += [sys.executable, str(HERE / "case.py"), str(path), "--out", str(result), "--mode", "sanitize"]
        t0 = time.time()
        code, stdout, stderr, timed_out = self._spawn(cmd, min(self.args.sanitizer_timeout, max(self.left() - 5, 1)),
                                                      self.env(sanitize=True))
        seconds = round(time.time() - t0, 2)
        passes, marked, summary = parse_sanitizer(stdout + "\n" + stderr)
        for name in ("forward", "backward"):
            if not rec.get(name):
                continue
            entry = {"ran": not timed_out and summary is not None, "errors": passes[name]["errors"],
                     "first": passes[name]["first"], "seconds": seconds}
            if name == "backward" and not marked:
                entry = {"ran": False, "reason": "the forward did not complete under memcheck (its invalid accesses "
                                                 "abort the kernel there)", "seconds": seconds}
            if timed_out:
                entry = {"ran": False, "reason": f"memcheck timed out after {seconds:.0f} s"}
            if self.args.sanitizer_kernels:
                entry["kernels"] = self.args.sanitizer_kernels
            rec[name]["sanitizer"] = entry
        if summary is None and not timed_out:
            rec.setdefault("notes", []).append("compute-sanitizer printed no ERROR SUMMARY: " + (stdout + stderr)[-400:])

    def finish(self, rec):
        """Outcome of each pass with the sanitizer counted, and the call's outcome."""
        for name in ("forward", "backward"):
            p = rec.get(name)
            if not p or "outcome" not in p:
                continue
            san = p.get("sanitizer") or {}
            if p["outcome"] == "ok" and san.get("ran") and san.get("errors"):
                p["outcome"] = "out_of_bounds"
                p["message"] = (f"no error; the intended {'outputs' if name == 'forward' else 'gradients'} are right, "
                                f"but compute-sanitizer reports {san['errors']} invalid accesses (first: {san['first']})")
        f, b = rec.get("forward") or {}, rec.get("backward") or {}
        if "hang" in rec:
            rec["call"] = {"training": "hang"}
            if rec["hang"]["pass"] == "forward":
                rec["call"]["forward"] = "hang"
        elif "not_measured" not in rec and "harness_error" not in rec and f.get("outcome"):
            rec["call"] = {"forward": outcome.combine(f["outcome"], None, False),
                           "training": outcome.combine(f["outcome"], b.get("outcome"), True)}
        with self.lock:
            with open(self.jsonl, "a") as fh:
                fh.write(json.dumps(rec, default=str) + "\n")
            self.done += 1
        status = rec.get("call") or rec.get("not_measured") or rec.get("harness_error", {}).get("message", "?")
        self.say(f"{self.done:3d} {rec['id']}: {status} ({rec.get('wall_seconds', 0)} s)")

    def lane(self, queue):
        while True:
            with self.lock:
                if not queue:
                    return
                path, big = queue.pop(0)
            if self.left() < 10:
                rec = {"id": path.stem, "batch": os.path.relpath(path, REPO), "forward": None, "backward": None,
                       "not_measured": "not started: the run's deadline was reached", "notes": []}
                self.finish(rec)
                continue
            try:
                self.run_one(path, big)
            except Exception as exc:  # a harness bug in one case must not lose the others
                self.finish({"id": path.stem, "batch": os.path.relpath(path, REPO), "forward": None, "backward": None,
                             "harness_error": {"exception": type(exc).__name__, "message": str(exc)}, "notes": []})

    def run_info(self, extra):
        """RUN.json: the machine, the software, the command, the date."""
        import datetime
        import importlib.metadata as md
        info = {"format": "attn-doctor/oracle-run@1",
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "command": os.environ.get("ORACLE_COMMAND") or " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
                "dry_cpu": self.args.dry_cpu, "poison": self.args.poison, "jobs": self.args.jobs, "deadline_s": self.args.deadline,
                "python": sys.version.split()[0]}
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                               capture_output=True, text=True)
            info["gpu"] = [line.strip() for line in q.stdout.splitlines() if line.strip()]
        if self.sanitizer:
            v = subprocess.run([self.sanitizer, "--version"], capture_output=True, text=True)
            info["compute_sanitizer"] = " ".join(v.stdout.split())[-80:]
            info["sanitizer_kernels"] = self.args.sanitizer_kernels or "all"
        for name in ("torch", "triton", "numpy", "transformers", "einops"):
            try:
                info.setdefault("packages", {})[name] = md.version(name)
            except md.PackageNotFoundError:
                info.setdefault("packages", {})[name] = None
        try:
            import torch
            info["cuda"] = torch.version.cuda
        except ImportError:
            info["cuda"] = None
        manifest = Path(os.environ.get("ORACLE_CARRY", REPO / ".oracle-carry")) / "manifest.json"
        if manifest.exists():
            m = json.loads(manifest.read_text())
            info["transformers_releases"] = [t["release"] for t in m.get("transformers", [])]
            info["fla_wheels"] = m.get("fla_wheels", [])
            info["flash_attn_rotary_releases"] = m.get("flash_attn_rotary", [])
            info["flash_attn_4"] = m.get("flash_attn_4")
            info["carry_patches"] = m.get("patches", [])
        info.update(extra)
        (self.out / "RUN.json").write_text(json.dumps(info, indent=1) + "\n")

    def run(self):
        self.run_info({})
        cases = case_files()
        if self.args.api:
            cases = [c for c in cases if case_api(c) == self.args.api]
        if self.args.only:
            wanted = set(self.args.only.split(","))
            cases = [c for c in cases if c.stem in wanted]
        big, small = [], []
        for path in cases:
            if estimate_gib(path) > self.args.big_gib:
                big.append((path, True))
            else:
                small.append((path, False))
        self.say(f"{len(cases)} cases ({len(big)} large, one at a time), {self.args.jobs} jobs, "
                 f"deadline {self.args.deadline:.0f} s, sanitizer: {self.sanitizer or 'off'}")
        lanes = [threading.Thread(target=self.lane, args=(big,))] if big else []
        lanes += [threading.Thread(target=self.lane, args=(small,)) for _ in range(max(1, self.args.jobs - len(lanes)))]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()
        self.say(f"done: {self.done} records in {time.time() - self.start:.0f} s -> {self.jsonl}")
        self.run_info({"wall_s": round(time.time() - self.start, 1), "records": self.done, "cases": len(cases)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds for the whole run")
    ap.add_argument("--case-timeout", type=float, default=90.0)
    ap.add_argument("--hang-after", type=float, default=60.0,
                    help="a case killed after this many seconds inside one pass is recorded as hang")
    ap.add_argument("--big-timeout", type=float, default=240.0)
    ap.add_argument("--sanitizer-timeout", type=float, default=150.0)
    ap.add_argument("--sanitizer-kernels", default="",
                    help="memcheck only kernels whose names contain this substring (default: every kernel)")
    ap.add_argument("--big-gib", type=float, default=12.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--api", default="", help="only the cases whose varlen.api is this (e.g. torch.varlen_attn)")
    ap.add_argument("--dry-cpu", action="store_true")
    ap.add_argument("--no-sanitizer", action="store_true")
    ap.add_argument("--poison", action="store_true",
                    help="fill the caching allocator's free memory with NaN before each call (case.py poison_allocator)")
    Runner(ap.parse_args()).run()


if __name__ == "__main__":
    main()
