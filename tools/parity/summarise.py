"""Print the goldens as a table: one line per batch, one column per release, so the release
where a behaviour changes stands out. `python summarise.py [BATCH-SUBSTRING]`."""

import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "golden"


def key(release):
    return tuple(int(x) for x in release.split("."))


def cell(case):
    if "skipped" in case:
        return "skipped (model level)"
    r, e = case["result"], case["error"]
    if e:
        return f"ERR {e['type']}: {e['message'][:60]}"
    if r["function"] == "flash_attn_func":
        s = "dense"
    else:
        mq, mk = r["max_seqlen_q"], r["max_seqlen_k"]
        t = lambda m: "T" if m["is_tensor"] else ""  # noqa: E731  (T: a 0-d tensor, per argument)
        s = (f"{r['path']} q{r['cu_seqlens_q']['values']} k{r['cu_seqlens_k']['values']} "
             f"m{t(mq)}{mq['value']}/{t(mk)}{mk['value']} t{r['total_q']}/{r['total_k']}")
        if r["cu_seqlens_q"]["dtype"] != "int32":
            s += " " + r["cu_seqlens_q"]["dtype"]
    if r["window_size"] != [-1, -1]:
        s += f" w{r['window_size']}"
    return s


def main():
    goldens = sorted(GOLDEN.glob("transformers-*.json"), key=lambda p: key(p.stem.split("-", 1)[1]))
    data = [(p.stem.split("-", 1)[1], {c["batch"]: c for c in json.loads(p.read_text())["cases"]}) for p in goldens]
    batches = sorted(data[0][1])
    pattern = sys.argv[1] if len(sys.argv) > 1 else ""
    for b in batches:
        if pattern not in b:
            continue
        print(b)
        prev = None
        for release, cases in data:
            c = cell(cases[b])
            if c != prev:
                print(f"   {release:>8}: {c}")
            prev = c


if __name__ == "__main__":
    main()
