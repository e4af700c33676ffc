#!/usr/bin/env bash
# repro --junit: an unreadable case is an <error> (counted in errors=), a case that does not
# meet its expect a <failure>, and every case that produced a report carries it in
# <system-out>; the file is well-formed XML.
# Usage: repro_junit.sh ATTN_DOCTOR_BINARY   (from the repository root)
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" repro tests/data/cli/ragged.json tests/data/cli/cu-overrun.json \
  repro_cases/gemma2-4.44.0-sliding-window-generate.json --backend cpu --junit "$work/out.xml" >"$work/stdout"
rc=$?
fail=0
[[ $rc == 1 ]] || { echo "FAIL: exit $rc, expected 1"; fail=1; }
for want in 'tests="3" failures="0" errors="2"' \
            '<error message="the case cannot be read: tests/data/cli/ragged.json' \
            '<error message="the case has no &quot;expect&quot; block' \
            '<system-out>{' '&quot;first_violation&quot;'; do
  grep -qF -- "$want" "$work/out.xml" || { echo "FAIL: the JUnit file lacks: $want"; fail=1; }
done
[[ $(grep -c '<system-out>' "$work/out.xml") == 1 ]] || { echo "FAIL: expected one <system-out> (the readable case with an expect block)"; fail=1; }
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$work/out.xml" ||
  { echo "FAIL: not well-formed XML"; fail=1; }
((fail)) && { echo "---- out.xml:"; head -c 3000 "$work/out.xml"; }
((fail == 0)) && echo "PASS"
exit $fail
