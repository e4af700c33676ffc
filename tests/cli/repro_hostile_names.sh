#!/usr/bin/env bash
# repro on cases whose names hold what XML and UTF-8 cannot: a case file named with bytes that
# are not UTF-8, a batch `name` holding U+FFFE and U+FFFF, a UTF-16 case (unreadable: its
# error message quotes the file's raw bytes). The JUnit file must still parse as XML with
# every case in it, `--format github` must be UTF-8 with one annotation per failed case, and
# `--format json` valid JSON.
# Usage: repro_hostile_names.sh ATTN_DOCTOR_BINARY   (from the repository root)
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/cases"
body='"model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
 "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387},
 "expect": {"first_violation": "mask.rank"}}'
printf '{"format": "attn-doctor/batch@1", "name": "latin-1 file name",\n %s\n' "$body" >"$work/cases/"$'caf\xe9-\xff.json'
printf '{"format": "attn-doctor/batch@1", "name": "nonchars \\ufffe \\uffff",\n %s\n' "$body" >"$work/cases/nonchars.json"
python3 -c 'import sys; open(sys.argv[1], "w", encoding="utf-16").write(open(sys.argv[2]).read())' \
  "$work/cases/utf16.json" tests/data/cli/cu-overrun.json
fail=0
"$bin" repro "$work/cases" --backend none --junit "$work/out.xml" >"$work/text"
rc=$?
[[ $rc == 1 ]] || { echo "FAIL: exit $rc, expected 1"; fail=1; }
python3 - "$work/out.xml" <<'PY' || fail=1
import sys, xml.dom.minidom
try:
    doc = xml.dom.minidom.parse(sys.argv[1])
except Exception as exc:
    sys.exit(f"FAIL: the JUnit file is not well-formed XML: {exc}")
cases = doc.getElementsByTagName("testcase")
names = sorted(c.getAttribute("name") for c in cases)
want = ["latin-1 file name", "nonchars \ufffd \ufffd", "utf16"]
if names != want:
    sys.exit(f"FAIL: testcase names {names!r}, expected {want!r}")
suite = doc.getElementsByTagName("testsuite")[0]
counts = (suite.getAttribute("failures"), suite.getAttribute("errors"))
if counts != ("2", "1"):
    sys.exit(f"FAIL: failures/errors {counts}, expected ('2', '1')")
PY
"$bin" repro "$work/cases" --backend none --format github >"$work/github"
python3 - "$work/github" <<'PY' || fail=1
import sys
data = open(sys.argv[1], "rb").read()
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as exc:
    sys.exit(f"FAIL: --format github is not UTF-8: {exc}")
errors = [l for l in text.splitlines() if l.startswith("::error ")]
if len(errors) != 3:
    sys.exit(f"FAIL: {len(errors)} annotations, expected 3:\n{text}")
if not any("caf\ufffd-\ufffd.json" in l for l in errors):
    sys.exit(f"FAIL: the non-UTF-8 file name is not written with U+FFFD:\n{text}")
PY
"$bin" repro "$work/cases" --backend none --format json >"$work/json"
python3 -c 'import json, sys; json.load(open(sys.argv[1], "rb"))' "$work/json" || { echo "FAIL: --format json is not JSON"; fail=1; }
((fail)) && { echo "---- out.xml:"; head -c 3000 "$work/out.xml"; echo "---- github:"; head -c 2000 "$work/github"; }
((fail == 0)) && echo "PASS"
exit $fail
