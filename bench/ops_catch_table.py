"""What attn_doctor.ops catches of the oracle's cases, and where.

For each case of tests/golden/oracle (the outcomes measured on an H100 with the real stack),
the effective varlen call its batch file makes (the report's `varlen` block: what the replayed
release passes to the kernel) runs through the backend on random inputs of the batch's shape
and dtype, forward and, for a training case, backward:
  - caught in a kernel: the launch refused an access (which buffer, row) or left output rows
    unwritten / wrote a row from two segments;
  - caught on the host: the static checks raise an error-severity violation for the call (what
    the ops run before launching on CPU tensors, and the guard runs on any), or the call matches
    a row of the advisory table (a known bug of the release in use, which the guard's host check
    of the call says once: the column names the advisory);
  - missed: neither.
A batch with a `rotary` block also runs its rotary call through the checked rotary ops.
Runs the CPU twin (the same contract as the CUDA kernels, exact), in this process, or with
--device cuda the checked CUDA kernels (an extension built with CUDA; --resume goes on in a new
process after one died):

    ATTN_DOCTOR_NATIVE_DIR=build/python/attn_doctor PYTHONPATH=python python bench/ops_catch_table.py \
        --json bench/results/ops-catch-cpu-2026-11-27.json --markdown docs/backend-catch.md \
        --gpu-json bench/results/ops-h100-2026-11-27b/ops-catch.json
--rows-json FILE (with --markdown) takes the rows of an earlier --json instead of running the
cases: the table regenerated from two committed runs.
"""
import argparse
import glob
import json
import math
import os
import sys

import torch

import attn_doctor
from attn_doctor import _native, ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
LIMIT = 1 << 26  # elements of q: larger calls are not run here (said per case)
DEVICE = "cpu"  # --device cuda: the CUDA ops' launches


def _max(x):
    """max_seqlen as the batch's varlen block gives it: an int, or {"tensor": int} (0-d)."""
    return int(x["tensor"] if isinstance(x, dict) else x)


def _arg(t):
    return (t.data_ptr(), t.shape[0], t.shape[1], t.shape[2], t.stride(0), t.stride(1), t.stride(2))


def run_case(path):
    row, batch = _run_attention(path)
    if "rotary" in batch and row.get("forward") is not None:
        seen = _run_rotary(batch, training=row.get("backward") is not None)
        if seen:
            row["kernel"] = "; ".join(seen + ([row["kernel"]] if row.get("kernel") else []))
            row.pop("note", None)
    return row


def _run_rotary(batch, training):
    """The batch's rotary call (its `rotary` block) through the checked rotary ops on q's shape:
    ops.apply_rotary_emb (flash_attn) or ops.rotary_embedding (fla), forward and, where the
    oracle ran a backward, the backward; what the twin saw, or [] (clean, or not such a call)."""
    r = batch["rotary"]
    impl = r.get("implementation")
    if impl not in ("flash_attn", "fla"):
        return []
    model = batch.get("model", {})
    H, D = model.get("num_heads"), model.get("head_dim")
    dtype = _DTYPES.get(model.get("dtype", "bf16"), torch.bfloat16)
    dim = int(r.get("dim") or D)
    table = int(r.get("table_length") or 0)
    varlen = bool(r.get("varlen"))
    shape = batch.get("batch") or {}
    mask = shape.get("attention_mask") or {}
    v = batch.get("varlen") or {}
    if varlen:
        cu = v.get("cu_seqlens_q")
        if not cu or not table:
            return []
        rows = int(v.get("total_q", cu[-1]))
        x = torch.randn(rows, H, D) if impl == "flash_attn" else torch.randn(1, rows, H, D)
        cu = torch.tensor(cu, dtype=torch.int64).clamp(-2**31, 2**31 - 1).to(torch.int32)
        max_seqlen = _max(v["max_seqlen_q"]) if v.get("max_seqlen_q") is not None else None
    else:
        B = int(shape.get("batch_size") or len(mask.get("lengths") or []) or 1)
        T = int(shape.get("query_length") or mask.get("width") or 0)
        if not T or not table:
            return []
        x, cu, max_seqlen = torch.randn(B, T, H, D), None, None
    x = x.to(dtype).requires_grad_(training)
    pos = torch.arange(table, dtype=torch.float32)
    inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(pos, inv)
    offs = r.get("seqlen_offset", 0)
    offs = torch.tensor(offs, dtype=torch.int32) if isinstance(offs, list) else int(offs)
    try:
        if impl == "flash_attn":
            y = ops.apply_rotary_emb(x, freqs.cos(), freqs.sin(), interleaved=bool(r.get("interleaved")),
                                     seqlen_offsets=offs, cu_seqlens=cu, max_seqlen=max_seqlen)
        else:
            y = ops.rotary_embedding(x, freqs.cos(), freqs.sin(), interleaved=bool(r.get("interleaved")),
                                     seqlen_offsets=offs, cu_seqlens=cu)
        if training:
            y.float().sum().backward()
    except attn_doctor.VarlenError as err:
        where = "rotary backward" if "backward" in err.entry else "rotary forward"
        return [f"{where}: `{err.id}`, " + "; ".join(err.kernel)]
    except (AssertionError, ValueError, NotImplementedError) as err:  # what the release raises on the host
        return [f"rotary: raises on the host ({type(err).__name__}: {err})"]
    return []


def _run_attention(path):
    case = json.load(open(path))
    row = {"case": case["id"], "forward": (case.get("forward") or {}).get("outcome"),
           "backward": (case.get("backward") or {}).get("outcome")}
    batch_path = os.path.join(ROOT, case["batch"])
    batch = json.load(open(batch_path))
    _, text = _native.check_file(batch_path, backend="none", format="json", full=True)
    report = json.loads(text)
    errors = [v for v in report.get("violations", []) if v.get("severity") == "error"]
    advised = [a["id"] for a in report.get("advisories", []) if not a.get("possible")]
    row["host"] = errors[0]["id"] if errors else (advised[0] if advised else None)
    varlen = report.get("varlen") or {}
    model = batch.get("model", {})
    if varlen.get("max_seqlen_q") is None or varlen.get("max_seqlen_k") is None:
        row["kernel"] = None
        row["note"] = "no max_seqlen reaches the kernel call (the release raises first)"
        return row, batch
    if not varlen.get("cu_seqlens_q") or "total_q" not in varlen:
        row["kernel"] = None
        row["note"] = "no varlen kernel call to run (the release raises first, or not a varlen call)"
        return row, batch
    H, Hk, D = model.get("num_heads"), model.get("num_kv_heads", model.get("num_heads")), model.get("head_dim")
    dtype = _DTYPES.get(model.get("dtype", "bf16"), torch.bfloat16)
    tq, tk = int(varlen["total_q"]), int(varlen.get("total_k", varlen["total_q"]))
    if tq * H * D > LIMIT or tk * Hk * D > LIMIT:
        row["kernel"] = None
        row["note"] = f"not run here: {tq} x {H} x {D} elements"
        return row, batch
    refusal = _native.varlen_host_refusal(2, (0, tq, H, D, H * D, D, 1), (0, tk, Hk, D, Hk * D, D, 1),
                                          (0, tk, Hk, D, Hk * D, D, 1), (0, len(varlen["cu_seqlens_q"])),
                                          (0, len(varlen.get("cu_seqlens_k", varlen["cu_seqlens_q"]))),
                                          _max(varlen.get("max_seqlen_q")), _max(varlen.get("max_seqlen_k")))
    if refusal:
        row["kernel"] = None
        row["note"] = f"the launch is refused on the host: {refusal}"
        return row, batch
    torch.manual_seed(0)
    q = torch.randn(tq, H, D).to(dtype)
    k = torch.randn(tk, Hk, D).to(dtype)
    v = torch.randn(tk, Hk, D).to(dtype)
    cu_q = torch.tensor(varlen["cu_seqlens_q"], dtype=torch.int64).clamp(-2**31, 2**31 - 1).to(torch.int32)
    cu_k = torch.tensor(varlen.get("cu_seqlens_k", varlen["cu_seqlens_q"]), dtype=torch.int64)
    cu_k = cu_k.clamp(-2**31, 2**31 - 1).to(torch.int32)
    window = varlen.get("window_size") or [-1, -1]
    causal = bool(varlen.get("causal", model.get("causal", False)))
    softcap = float(varlen.get("softcap") or model.get("softcap") or 0.0)
    scale = 1.0 / math.sqrt(D)
    mq, mk = _max(varlen.get("max_seqlen_q")), _max(varlen.get("max_seqlen_k"))
    used = varlen.get("seqused_k")
    used = torch.tensor(used, dtype=torch.int64).clamp(-2**31, 2**31 - 1).to(torch.int32) if used is not None else None
    # the backward runs where the oracle ran one (its .backward(), a training call through the ops)
    training = batch.get("pass") == "training" or row["backward"] is not None
    call = ops._Call("flash_attn.varlen", q, k, v, cu_q, cu_k, mq, mk, scale, causal, tuple(window), softcap,
                     "training" if training else "forward", used)
    try:
        ops._static_check(call)
        row["ops_host"] = None
    except Exception as err:  # VarlenError: what the ops raise before launching on CPU tensors
        row["ops_host"] = getattr(err, "id", repr(err))
    if DEVICE == "cuda":
        return _run_cuda(row, q, k, v, cu_q, cu_k, mq, mk, scale, causal, window, softcap, used, training), batch
    out = torch.empty_like(q)
    lse = torch.empty((H, tq), dtype=torch.float32)
    elem = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}[dtype]
    used_arg = (used.data_ptr(), used.numel()) if used is not None else None
    fwd = _native.varlen_fwd_cpu(elem, _arg(q), _arg(k), _arg(v), (cu_q.data_ptr(), cu_q.numel()),
                                 (cu_k.data_ptr(), cu_k.numel()), mq, mk, scale, softcap, causal, int(window[0]),
                                 int(window[1]), out.data_ptr(), lse.data_ptr(), torch.get_num_threads(), used_arg)
    finding = ops._finding(fwd, "forward")
    seen = _seen("forward", finding)
    if training and row["backward"] is not None:
        dout = torch.randn_like(q)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        bwd = _native.varlen_bwd_cpu(elem, _arg(q), _arg(k), _arg(v), _arg(out), _arg(dout), lse.data_ptr(),
                                     (cu_q.data_ptr(), cu_q.numel()), (cu_k.data_ptr(), cu_k.numel()), mq, mk, scale,
                                     softcap, causal, int(window[0]), int(window[1]), dq.data_ptr(), dk.data_ptr(),
                                     dv.data_ptr(), torch.get_num_threads(), used_arg)
        seen += _seen("backward", ops._finding(bwd, "backward"))
    row["kernel"] = "; ".join(seen) or None
    return row, batch


def _seen(stage, finding):
    """What one launch's record says, in the table's words."""
    if not finding:
        return []
    seen = []
    a = finding["access"]
    if a and a.get("region") in ("max_seqlen", "seqused"):
        what = "past max_seqlen_k's grid" if a["region"] == "max_seqlen" else "between seqused_k and the segment"
        seen.append(f"{stage}: launch check, {a['count']} key row(s) x head(s) {what} (the first: k row {a['row']})")
    elif a:
        seen.append(f"{stage}: {a['count']} refused, first {a['kind']} of {a['buffer']} row {a['row']}")
    return seen + [f"{stage}: {x}" for x in finding["rows"]]


def _cuda_finding(stage):
    """What the launch just made saw (its readout waited for): ops._finding's form, None if clean."""
    read = _native.ops_drain(True)
    return ops._finding(read[1], stage) if read is not None else None


def _run_cuda(row, q, k, v, cu_q, cu_k, mq, mk, scale, causal, window, softcap, used, training):
    """The call through the CUDA ops' launches (attn_doctor._cuda_ops: the checked kernels, the
    record read back from the device), each case after a synchronisation so that a fault is
    the case's own."""
    from attn_doctor import _cuda_ops
    if q.dtype not in (torch.bfloat16, torch.float16) or q.shape[-1] not in ops.CUDA_HEAD_DIMS:
        row["kernel"] = None
        row["note"] = f"not run on CUDA: {ops.not_covered(q.cuda()) or 'no checked CUDA kernel'}"
        return row
    dev = torch.device("cuda")
    q, k, v = q.to(dev), k.to(dev), v.to(dev)
    cu_q, cu_k = cu_q.to(dev), cu_k.to(dev)
    used = used.to(dev) if used is not None else None
    out = torch.empty_like(q)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=dev)
    _cuda_ops.forward(q, k, v, cu_q, cu_k, mq, mk, scale, causal, int(window[0]), int(window[1]), softcap, out, lse,
                      None, seqused_k=used)
    seen = _seen("forward", _cuda_finding("forward"))
    if training and row["backward"] is not None and _cuda_ops.backward_supported(q.dtype, q.shape[-1]):
        dout = torch.randn_like(q)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _cuda_ops.backward(dout, q, k, v, out, lse, cu_q, cu_k, mq, mk, scale, causal, int(window[0]), int(window[1]),
                           softcap, dq, dk, dv, None, seqused_k=used)
        seen += _seen("backward", _cuda_finding("backward"))
    torch.cuda.synchronize()
    row["kernel"] = "; ".join(seen) or None
    return row


def verdict(row):
    bad = {row["forward"], row["backward"]} - {"ok", None}
    if row["kernel"] and row["host"]:
        where = "kernel and host"
    elif row["kernel"]:
        where = "kernel"
    elif row["host"]:
        where = "host"
    elif row.get("note", "").startswith("not run"):
        where = "not run"
    else:
        where = "missed" if bad else "clean"
    return where


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: the CPU twins; cuda: the checked CUDA kernels (an extension built with CUDA)")
    parser.add_argument("--resume", help="a JSON-lines file: each case's row is appended as it finishes and the "
                        "cases already there are skipped, so that a run whose process died (a device fault) goes on "
                        "in a new one; a case started and not finished is recorded as an error")
    parser.add_argument("--gpu-json", help="with --markdown: a --device cuda run's JSON, shown as its own column")
    parser.add_argument("--rows-json", help="with --markdown: the rows of an earlier run's --json instead of running "
                        "the cases (the table regenerated, e.g. with a new --gpu-json)")
    args = parser.parse_args()
    if args.rows_json:
        if not args.markdown:
            parser.error("--rows-json needs --markdown")
        gpu = {r["case"]: r for r in json.load(open(args.gpu_json))["rows"]} if args.gpu_json else None
        write_markdown(args.markdown, json.load(open(args.rows_json))["rows"], gpu)
        return
    global DEVICE
    DEVICE = args.device
    rows = []
    done = {}
    if args.resume and os.path.exists(args.resume):
        for line in open(args.resume):
            rec = json.loads(line)
            if "started" in rec:
                done.setdefault(rec["started"], {"case": rec["started"], "error": "the process died during this case",
                                                  "where": "error"})
            else:
                done[rec["case"]] = rec
    log = open(args.resume, "a") if args.resume else None
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/golden/oracle/*.json"))):
        if path.endswith("RUN.json"):
            continue
        name = os.path.basename(path)[:-5]
        if name in done:
            rows.append(done[name])
            continue
        if log:
            log.write(json.dumps({"started": name}) + "\n")
            log.flush()
        try:
            row = run_case(path)
        except Exception as exc:
            row = {"case": name, "error": repr(exc)}
        row["where"] = verdict(row) if "error" not in row else "error"
        rows.append(row)
        if log:
            log.write(json.dumps(row) + "\n")
            log.flush()
        print(f"{row['case']:60} {row.get('forward')!s:14} {row.get('backward')!s:15} {row['where']}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": " ".join(sys.argv), "torch": torch.__version__, "device": DEVICE,
                       "gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else None, "rows": rows}, fh, indent=1)
    if args.markdown:
        gpu = {r["case"]: r for r in json.load(open(args.gpu_json))["rows"]} if args.gpu_json else None
        write_markdown(args.markdown, rows, gpu)


def _current_outcomes(rows):
    """The rows with the oracle's outcomes as tests/golden/oracle gives them now: a case the
    oracle re-measured after the backend's run keeps that run's kernel and host columns, and its
    verdict follows the new outcome."""
    current = []
    for r in rows:
        path = os.path.join(ROOT, "tests/golden/oracle", r["case"] + ".json")
        if os.path.exists(path):
            case = json.load(open(path))
            r = dict(r, forward=(case.get("forward") or {}).get("outcome"),
                     backward=(case.get("backward") or {}).get("outcome"))
            if "error" not in r:
                r["where"] = verdict(r)
        current.append(r)
    return current


def write_markdown(path, rows, gpu=None):
    silent = ("out_of_bounds", "wrong_output", "wrong_gradient")
    rows = _current_outcomes(rows)
    if gpu:
        gpu = {name: g for name, g in zip(gpu, _current_outcomes(list(gpu.values())))}
    if gpu:
        # the host checks do not depend on the device: the GPU run's verdict takes this run's
        # host column (a check or advisory added since the GPU run counts there too)
        by_case = {r["case"]: r for r in rows}
        gpu = {name: _with_host(g, by_case.get(name)) for name, g in gpu.items()}
    lines = []
    count = {}
    for r in rows:
        key = r["where"]
        count[key] = count.get(key, 0) + 1
    head = "| case | oracle: forward | oracle: backward | caught | in the kernel | on the host: the batch | on the host: the kernel call |"
    lines.append(head + (" H100: caught | H100: in the CUDA kernel |" if gpu else ""))
    lines.append("|---|---|---|---|---|---|---|" + ("---|---|" if gpu else ""))
    for r in rows:
        if r.get("forward") == "ok" and r.get("backward") in ("ok", None) and r["where"] == "clean":
            continue
        lines.append(f"| `{r['case']}` | {r.get('forward')} | {r.get('backward')} | {r['where']} | "
                     f"{(r.get('kernel') or r.get('note') or r.get('error') or '').replace('|', '/')} | "
                     f"{'`' + r['host'] + '`' if r.get('host') else ''} | "
                     f"{'`' + r['ops_host'] + '`' if r.get('ops_host') else ''} |"
                     + (_gpu_cells(gpu.get(r["case"])) if gpu else ""))
    silent_rows = [r for r in rows if r.get("forward") in silent or r.get("backward") in silent]
    gpu_line = []
    if gpu:
        # a case added to the oracle since the GPU run is not in it: counted apart, not as missed
        absent = [r["case"] for r in silent_rows if r["case"] not in gpu]
        g_missed = [r["case"] for r in silent_rows if r["case"] in gpu and
                    gpu[r["case"]].get("where") in ("missed", "clean", "not run", "error", None)]
        g_kernel = [r["case"] for r in silent_rows if "kernel" in (gpu.get(r["case"], {}).get("where") or "")]
        g_host = [r["case"] for r in silent_rows if gpu.get(r["case"], {}).get("where") == "host"]
        gpu_line = [f"On the H100 (the CUDA kernels; rotary calls on the CPU twin): silent outcomes caught in a kernel: "
                    f"{len(g_kernel)}, on the host only: {len(g_host)}, missed: {len(g_missed)}"
                    + (f" ({', '.join(g_missed)})" if g_missed else "") +
                    (f"; not in the H100 run (oracle cases added since): {len(absent)} ({', '.join(absent)})"
                     if absent else "") + ".", ""]
    missed = [r["case"] for r in silent_rows if r["where"] in ("missed", "clean", "not run")]
    healthy = [r for r in rows if r.get("forward") == "ok" and r.get("backward") in ("ok", None)]
    false_alarm = [r["case"] for r in healthy if r["where"] in ("kernel", "host", "kernel and host")]
    with open(path) as fh:
        text = fh.read()
    begin, end = "<!-- BEGIN GENERATED: bench/ops_catch_table.py -->", "<!-- END GENERATED -->"
    body = "\n".join([begin, "",
                      f"{len(rows)} oracle cases; silent outcomes (out_of_bounds, wrong_output, wrong_gradient): "
                      f"{len(silent_rows)}, missed: {len(missed)}" + (f" ({', '.join(missed)})" if missed else "") +
                      f". Healthy cases ({len(healthy)}) flagged: {len(false_alarm)}"
                      + (f" ({', '.join(false_alarm)})" if false_alarm else "") + ".", "", *gpu_line,
                      *lines, "", end])
    text = text[:text.index(begin)] + body + text[text.index(end) + len(end):]
    with open(path, "w") as fh:
        fh.write(text)


def _with_host(g, r):
    """The GPU run's row g with this run's host verdict of the same case (row r)."""
    if r is None or not r.get("host") or g.get("host") == r["host"] or "error" in g:
        return g
    g = dict(g, host=r["host"])
    g["where"] = verdict(g)
    return g


def _gpu_cells(r):
    if r is None:
        return " not in the H100 run | |"
    what = (r.get("kernel") or r.get("note") or r.get("error") or "").replace("|", "/")
    return f" {r.get('where')} | {what} |"


if __name__ == "__main__":
    main()
