#!/usr/bin/env bash
# One hostile file: attn-doctor check must exit 2 and its message must contain NAME.expect.
# Usage: run_hostile.sh FILE.json /path/to/attn-doctor
set -u
file=$1 binary=$2
expect=$(head -n1 "${file%.json}.expect")
err=$(timeout 60 "$binary" check "$file" --backend none 2>&1 >/dev/null </dev/null)
rc=$?
if [[ $rc != 2 ]]; then echo "exit code: expected 2, got $rc"; echo "$err" | head -c 2000; exit 1; fi
if [[ $err != *"$expect"* ]]; then echo "message lacks: $expect"; echo "got: ${err:0:2000}"; exit 1; fi
if [[ $err != *"$file"* ]]; then echo "message does not name the file $file"; echo "got: ${err:0:2000}"; exit 1; fi
echo "${err:0:300}"
