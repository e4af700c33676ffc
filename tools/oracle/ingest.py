"""Turn a device run's oracle.jsonl into the committed goldens and the measured table.

    python tools/oracle/ingest.py RUN_DIR [--binary build/attn-doctor]
                                  [--golden tests/golden/oracle] [--docs docs/oracle.md]

RUN_DIR holds oracle.jsonl and RUN.json as tools/oracle/run_device.sh wrote them. Writes one
golden per measured case (tests/golden/oracle/<case-id>.json, schema in docs/spec/oracle.md),
tests/golden/oracle/RUN.json (the run, plus the cases that were not measured and why), and
regenerates the table between the markers of docs/oracle.md. Records of a --dry-cpu run are
refused: they are harness tests, not measurements. Old goldens of cases the run did not measure
are removed, so the folder always matches one run; with --add (and --only ID,...) the run's
cases are added to the folder beside the earlier run's: their goldens and table rows are
written or replaced, the rest stay, and RUN.json lists the added run under "added_runs".
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import outcome  # noqa: E402

BEGIN, END = "<!-- oracle-table:begin -->", "<!-- oracle-table:end -->"


def load(run_dir):
    run_dir = Path(run_dir)
    records = {}
    for line in (run_dir / "oracle.jsonl").read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            records[rec["id"]] = rec  # a case run twice keeps its last record
    run = json.loads((run_dir / "RUN.json").read_text())
    return records, run


def pass_entry(p, with_grads):
    if not p or "outcome" not in p:
        return None
    entry = {"outcome": p["outcome"], "message": p.get("message", "")}
    for key in ("exception", "where"):
        if p.get(key):
            entry[key] = p[key]
    entry["rows"] = p.get("rows", [])
    if p.get("nan_rows"):
        entry["nan_rows"] = p["nan_rows"]
    san = p.get("sanitizer")
    if san is not None:
        entry["sanitizer"] = {k: san[k] for k in ("ran", "errors", "first", "reason", "kernels") if k in san and
                              san[k] is not None}
    elif p["outcome"] in outcome.SILENT_ORDER:
        entry["sanitizer"] = {"ran": False}
    if with_grads and p.get("grads"):
        entry["grads"] = {}
        for name, g in p["grads"].items():
            entry["grads"][name] = {"rows": g.get("rows", [])}
            for key in ("nan_rows", "skipped"):
                if g.get(key):
                    entry["grads"][name][key] = g[key]
    return entry


def normalise(rec, trusted):
    """The record as the goldens keep it: loud outcomes classified again from their messages
    (outcome.classify_exception), a pass that ran out of GPU memory makes the case not measured
    (the oracle's limit, not the stack's answer), and where the reference came from the varlen
    arguments under test while the tool marks that intent untrusted (`trusted` False), a silent
    outcome decides nothing: that call is left open (null)."""
    if "call" not in rec:
        return rec
    passes = {}
    for name in ("forward", "backward"):
        p = rec.get(name)
        if p and p.get("outcome") in outcome.LOUD and p.get("message"):
            if outcome.out_of_memory(p["message"]):
                rec = {k: v for k, v in rec.items() if k != "call"}
                rec["not_measured"] = f"the {name} ran out of GPU memory beside concurrent cases: " + p["message"][:120]
                return rec
            p["outcome"] = outcome.classify_exception(p.get("exception", ""), p["message"])
        passes[name] = p.get("outcome") if p else None
    fwd, bwd = passes["forward"], passes["backward"]
    call = {"forward": outcome.combine(fwd, None, False) if fwd else None,
            "training": outcome.combine(fwd, bwd, True) if fwd else None}
    source = (rec.get("reference") or {}).get("intent")
    if source == "cu_seqlens_q" and trusted is False:
        for key in ("forward", "training"):
            if call[key] not in outcome.LOUD:
                call[key] = None
        rec.setdefault("notes", []).append(
            "reference derived from the cu_seqlens under test, which the tool marks untrusted: silent outcomes "
            "decide nothing (call left open); give the batch an intent to measure them")
    rec["call"] = call
    return rec


def trusted_intents(binary, batches):
    """id -> the report's intent.trusted (None without a binary or a report)."""
    out = {}
    for cid, batch in batches.items():
        if not binary:
            out[cid] = None
            continue
        proc = subprocess.run([binary, "check", str(REPO / batch), "--format", "json", "--backend", "none"],
                              capture_output=True, text=True)
        try:
            out[cid] = (json.loads(proc.stdout).get("intent") or {}).get("trusted")
        except (json.JSONDecodeError, AttributeError):
            out[cid] = None
    return out


def golden(rec):
    notes = list(rec.get("notes", []))
    notes += [f"patch: {p}" for p in rec.get("patches", [])]
    if rec.get("device_assert_lines"):
        notes.append("device assert: " + rec["device_assert_lines"][0])
    if rec.get("reference"):
        r = rec["reference"]
        notes.append(f"reference: fp32 over {r.get('sequences', 0)} intended sequences from "
                     f"{r.get('intent', 'none')}" + (" (sampled rows)" if r.get("sampled") else ""))
    g = {"id": rec["id"], "batch": rec["batch"], "stack": rec.get("stack", {}),
         "forward": pass_entry(rec.get("forward"), False),
         "backward": pass_entry(rec.get("backward"), True),
         "call": rec["call"], "notes": notes}
    return g


def first_violations(binary, batches):
    """id -> first violation of `attn-doctor check --format json --backend none` (when a binary is given)."""
    out = {}
    for cid, batch in batches.items():
        proc = subprocess.run([binary, "check", str(REPO / batch), "--format", "json", "--backend", "none"],
                              capture_output=True, text=True)
        try:
            report = json.loads(proc.stdout)
            fv = report.get("first_violation")
            out[cid] = fv.get("id") if isinstance(fv, dict) else fv
        except (json.JSONDecodeError, AttributeError):
            out[cid] = None
    return out


def expected_first(batch):
    doc = json.loads((REPO / batch).read_text())
    return doc.get("expect", {}).get("first_violation", "")


def stack_words(rec):
    s = rec.get("stack", {})
    conv = s.get("conversion", "")
    m = re.match(r"transformers (\S+)", conv)
    parts = []
    if m:
        parts.append(f"transformers {m.group(1)}")
    if s.get("rotary"):
        parts.append(s["rotary"].split(" fla.")[0].split(" flash_attn.")[0])
    if "bert_padding" in conv:
        parts.append("bert_padding unpad")
    fa4 = re.match(r"flash_attn\.cute\.flash_attn_varlen_func \(flash-attn-4 (\S+), (\S+)\)", s.get("attention", ""))
    parts.append(f"FA4 {fa4.group(1)} ({fa4.group(2)})" if fa4 else "FA2 (torch)")
    return " + ".join(parts)


def first_line(text, limit=110):
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    line = line.replace("|", "\\|")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def table(records, firsts):
    rows = ["| case | invariant | stack | forward | backward | call (inference / training) | message |",
            "|---|---|---|---|---|---|---|"]
    for cid in sorted(records):
        rec = records[cid]
        inv = firsts.get(cid) or "—"
        if "call" not in rec:
            reason = rec.get("not_measured") or (rec.get("harness_error") or {}).get("message", "no record")
            rows.append(f"| `{cid}` | `{inv}` | — | not measured | — | — | {first_line(reason)} |")
            continue
        f, b = rec.get("forward") or {}, rec.get("backward") or {}
        fo = f.get("outcome", "—")
        bo = b.get("outcome", "not reached") if b else "not reached"
        msg = f.get("message") if fo != "ok" or bo in ("ok", "not reached") else b.get("message")
        rows.append(f"| `{cid}` | `{inv}` | {stack_words(rec)} | {fo} | {bo} | "
                    f"{rec['call']['forward'] or 'open'} / {rec['call']['training'] or 'open'} | {first_line(msg)} |")
    return "\n".join(rows)


def first_of(args, records):
    """id -> the table's invariant column: the binary's first violation, else the case's expectation."""
    batches = {cid: r["batch"] for cid, r in records.items() if r.get("batch")}
    if args.binary:
        return first_violations(args.binary, batches)
    return {c: expected_first(b) for c, b in batches.items()}


def docs_table(args):
    """-> (the docs page, the text before the table's markers, the table, the text after)."""
    docs = Path(args.docs)
    head, _, rest = docs.read_text().partition(BEGIN)
    body, _, tail = rest.partition(END)
    return docs, head, body, tail


def add_run(args, gdir, run, records, measured):
    """--add: RUN.json keeps the earlier run and lists this one; the table's rows of these cases
    are replaced or inserted in case order."""
    main_run = json.loads((gdir / "RUN.json").read_text())
    entry = {k: run.get(k) for k in ("date", "command", "gpu", "cuda", "packages", "poison")}
    entry["measured"] = sorted(measured)
    main_run.setdefault("added_runs", []).append(entry)
    (gdir / "RUN.json").write_text(json.dumps(main_run, indent=1) + "\n")
    firsts = first_of(args, records)
    docs, head, body, tail = docs_table(args)
    lines = body.strip("\n").splitlines()
    new_rows = {line.split("`")[1]: line for line in table(records, firsts).splitlines()[2:]}
    summary, header, rows = lines[0], lines[2:4], {}
    for line in lines[4:]:
        if line.startswith("| `"):
            rows[line.split("`")[1]] = line
    rows.update(new_rows)
    added = f" Added {run.get('date', '?')}: {', '.join(sorted(measured))} (`{run.get('command', '?')}`)."
    docs.write_text(head + BEGIN + "\n" + summary + added + "\n\n" + "\n".join(header + [rows[c] for c in sorted(rows)])
                    + "\n" + END + tail)
    print(f"ingest: {len(measured)} goldens added to {gdir}; {docs} updated")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--golden", default=str(REPO / "tests" / "golden" / "oracle"))
    ap.add_argument("--docs", default=str(REPO / "docs" / "oracle.md"))
    ap.add_argument("--binary", default="", help="attn-doctor binary: the table's invariant column from its report")
    ap.add_argument("--allow-dry", action="store_true", help="tests of this script only: accept dry-cpu records")
    ap.add_argument("--add", action="store_true", help="add this run's cases to the goldens of an earlier run")
    ap.add_argument("--only", default="", help="with --add: the case ids to take from this run (comma-separated)")
    args = ap.parse_args()
    records, run = load(args.run_dir)
    if args.only:
        wanted = set(args.only.split(","))
        records = {cid: r for cid, r in records.items() if cid in wanted}
    dry = run.get("dry_cpu") or any(r.get("dry_cpu") for r in records.values())
    if dry and not args.allow_dry:
        raise SystemExit("ingest: this is a --dry-cpu run (a harness test, not a measurement): no goldens written")
    gdir = Path(args.golden)
    gdir.mkdir(parents=True, exist_ok=True)
    trusted = trusted_intents(args.binary, {cid: r["batch"] for cid, r in records.items() if r.get("batch")})
    records = {cid: normalise(r, trusted.get(cid)) for cid, r in records.items()}
    measured = {cid: r for cid, r in records.items() if "call" in r}
    if not args.add:
        for old in gdir.glob("*.json"):
            if old.name != "RUN.json" and old.stem not in measured:
                old.unlink()
    for cid, rec in measured.items():
        (gdir / f"{cid}.json").write_text(json.dumps(golden(rec), indent=1) + "\n")
    if args.add:
        add_run(args, gdir, run, records, measured)
        return
    run = dict(run)
    run["measured"] = sorted(measured)
    run["not_measured"] = [{"id": cid, "batch": r.get("batch"),
                            "reason": r.get("not_measured") or (r.get("harness_error") or {}).get("message", "")}
                           for cid, r in sorted(records.items()) if "call" not in r]
    (gdir / "RUN.json").write_text(json.dumps(run, indent=1) + "\n")
    firsts = first_of(args, records)
    docs, head, _, tail = docs_table(args)
    gpu = ", ".join(run.get("gpu", [])) or "?"
    summary = (f"Measured {run.get('date', '?')} on {gpu}, CUDA {run.get('cuda')}, torch "
               f"{run.get('packages', {}).get('torch')}, triton {run.get('packages', {}).get('triton')}: "
               f"{len(measured)} cases measured, {len(run['not_measured'])} not measured. "
               f"Command: `{run.get('command', '?')}`.")
    docs.write_text(head + BEGIN + "\n" + summary + "\n\n" + table(records, firsts) + "\n" + END + tail)
    print(f"ingest: {len(measured)} goldens in {gdir}, {len(run['not_measured'])} not measured; {docs} regenerated")


if __name__ == "__main__":
    main()
