#!/usr/bin/env bash
# SIGTERM to a running `repro` (what a CI cancel sends): the running case gets the signal and
# is waited for (it does not keep running), no other case starts, the JUnit file and the JSON
# report are still written (the case that ran as it came out, the others as skipped), and the
# exit code is 128 + 15. The cases run on a stand-in for attn-doctor (--attn-doctor), one of
# which waits until it is stopped.
# Usage: repro_interrupt.sh ATTN_DOCTOR_BINARY   (from the repository root)
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in a slow c; do
  sed "s/\"cu-overrun\"/\"$name\"/; s/}}\$/}, \"expect\": {\"first_violation\": \"cu_seqlens.total\"}}/" \
    tests/data/cli/cu-overrun.json >"$work/$name.json"
done
cat >"$work/fake" <<FAKE
#!/bin/sh
case "\$2" in
  *slow.json) echo \$\$ > "$work/slow.pid"; exec sleep 60 ;;
  *) echo '{"status": "violation", "first_violation": {"id": "cu_seqlens.total"}, "violations": [{"id": "cu_seqlens.total"}]}'; exit 1 ;;
esac
FAKE
chmod +x "$work/fake"
start=$SECONDS
"$bin" repro "$work/a.json" "$work/slow.json" "$work/c.json" -j 1 --attn-doctor "$work/fake" \
  --junit "$work/out.xml" --format json >"$work/out.json" 2>"$work/err" &
repro=$!
for _ in $(seq 300); do [[ -s $work/slow.pid ]] && break; sleep 0.1; done
sleep 0.3
kill -TERM "$repro"
wait "$repro"
rc=$?
fail=0
[[ $rc == 143 ]] || { echo "FAIL: exit $rc, expected 143 (128 + SIGTERM)"; fail=1; }
((SECONDS - start < 30)) || { echo "FAIL: took $((SECONDS - start)) s"; fail=1; }
slow=$(cat "$work/slow.pid" 2>/dev/null)
[[ -n $slow ]] || { echo "FAIL: the slow case never started"; fail=1; }
if [[ -n $slow ]] && kill -0 "$slow" 2>/dev/null; then echo "FAIL: the stopped case (pid $slow) still runs"; kill -KILL "$slow"; fail=1; fi
python3 - "$work/out.xml" "$work/out.json" <<'PY' || fail=1
import json, sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
suite = doc.getElementsByTagName("testsuite")[0]
got = {k: suite.getAttribute(k) for k in ("tests", "failures", "errors", "skipped")}
if got != {"tests": "3", "failures": "0", "errors": "0", "skipped": "2"}:
    sys.exit(f"FAIL: JUnit counts {got}")
skipped = {c.getAttribute("name"): c.getElementsByTagName("skipped")[0].getAttribute("message")
           for c in doc.getElementsByTagName("testcase") if c.getElementsByTagName("skipped")}
want = {"slow": "interrupted by SIGTERM while it ran", "c": "not run: interrupted by SIGTERM"}
if skipped != want:
    sys.exit(f"FAIL: skipped cases {skipped}, expected {want}")
report = json.load(open(sys.argv[2]))
if (report["passed"], report["failed"], report["skipped"], report.get("interrupted")) != (1, 0, 2, "SIGTERM"):
    sys.exit(f"FAIL: JSON report {report}")
PY
((fail)) && { echo "---- out.xml:"; cat "$work/out.xml"; echo "---- stderr:"; cat "$work/err"; }
((fail == 0)) && echo "PASS"
exit $fail
