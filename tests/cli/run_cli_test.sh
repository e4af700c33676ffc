#!/usr/bin/env bash
# Runs one command-line test: a .test file with lines
#   args: <arguments to attn-doctor, shell-quoted>
#   env: NAME=value                (optional, repeatable)
#   exit: <expected exit code>
#   stdout: <text that must appear> (repeatable; fixed strings)
#   stderr: <text that must appear> (repeatable)
#   not-stdout: <text that must not appear>
#   stdout-json: true               (stdout must be one valid JSON document)
#   stdin: <file given on standard input, relative to the repository root; default /dev/null>
# Lines starting with '#' are comments. Usage: run_cli_test.sh FILE.test /path/to/attn-doctor
set -u
test_file=$1
binary=$2
args="" expected_exit=0 json=false stdin=/dev/null
declare -a want_out=() want_err=() not_out=() envs=()
while IFS= read -r line || [[ -n $line ]]; do
  case $line in
    '#'*|'') ;;
    args:*) args=${line#args:} ;;
    env:*) envs+=("${line#env: }") ;;
    exit:*) expected_exit=${line#exit: } ;;
    stdout-json:*) json=true ;;
    stdin:*) stdin=${line#stdin: } ;;
    stdout:*) want_out+=("${line#stdout: }") ;;
    stderr:*) want_err+=("${line#stderr: }") ;;
    not-stdout:*) not_out+=("${line#not-stdout: }") ;;
    *) echo "bad line in $test_file: $line"; exit 2 ;;
  esac
done < "$test_file"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
eval "set -- $args"
env "${envs[@]}" "$binary" "$@" >"$out" 2>"$err" <"$stdin"
rc=$?
fail=0
if [[ $rc != "$expected_exit" ]]; then echo "exit code: expected $expected_exit, got $rc"; fail=1; fi
for w in "${want_out[@]}"; do grep -qF -- "$w" "$out" || { echo "stdout lacks: $w"; fail=1; }; done
for w in "${want_err[@]}"; do grep -qF -- "$w" "$err" || { echo "stderr lacks: $w"; fail=1; }; done
for w in "${not_out[@]}"; do grep -qF -- "$w" "$out" && { echo "stdout has: $w"; fail=1; }; done
if $json; then python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$out" || { echo "stdout is not valid JSON"; fail=1; }; fi
if [[ $fail != 0 ]]; then
  echo "---- command: attn-doctor $args"; echo "---- stdout:"; head -c 4000 "$out"; echo "---- stderr:"; head -c 4000 "$err"
fi
exit $fail
