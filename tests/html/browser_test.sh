#!/usr/bin/env bash
# Browser test of `check --html`: renders the page of three batches in headless Chromium to
# PNG and checks that each picture is not blank (enough distinct colours), that the DOM holds
# the SVG map with its marks, and that the page logs nothing to the console (a stray script or
# external reference is blocked by the page's Content-Security-Policy and logged as a console
# message). A control page with an inline script proves the console scan sees such messages.
#
# Chromium comes from Debian's `chromium` package: installed here with apt-get when missing
# (sudo when not root). Where that is impossible the test exits 77, which ctest reports as
# skipped (SKIP_RETURN_CODE), with the reason on stdout.
#
# usage: browser_test.sh ATTN_DOCTOR_BINARY [OUTPUT_DIR]
#   cases: repro_cases/<name> from the corpus where present, else tests/html/cases/<fallback>.
#   ATTN_DOCTOR_SCREENSHOT_SIZE=W,H overrides the window size (default 1280,900).
#   ATTN_DOCTOR_CHROMIUM=PATH uses that browser and installs nothing (a missing PATH skips).
set -u
SKIP=77
bin=${1:?usage: browser_test.sh ATTN_DOCTOR_BINARY [OUTPUT_DIR]}
out=${2:-$(mktemp -d)}
root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/tests/html"
mkdir -p "$out"
size=${ATTN_DOCTOR_SCREENSHOT_SIZE:-1280,900}

skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; failed=1; }

find_chromium() {
  local c
  for c in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return 0; fi
  done
  return 1
}

command -v python3 >/dev/null 2>&1 || skip "python3 is needed to read the screenshots and is not installed"

if [ -n "${ATTN_DOCTOR_CHROMIUM:-}" ]; then
  [ -x "$ATTN_DOCTOR_CHROMIUM" ] || skip "ATTN_DOCTOR_CHROMIUM=$ATTN_DOCTOR_CHROMIUM is not an executable"
  chrome=$ATTN_DOCTOR_CHROMIUM
else
  chrome=$(find_chromium) || chrome=""
fi
if [ -z "$chrome" ]; then
  command -v apt-get >/dev/null 2>&1 || skip "no Chromium found and no apt-get to install Debian's chromium package"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"
    else skip "no Chromium found; installing Debian's chromium package needs root and sudo is not available without a password"; fi
  fi
  echo "no Chromium found: installing Debian's chromium package with apt-get"
  $sudo apt-get update -qq >"$out/apt.log" 2>&1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >>"$out/apt.log" 2>&1 ||
    skip "apt-get install chromium failed (see $out/apt.log): $(tail -n 1 "$out/apt.log")"
  chrome=$(find_chromium) || skip "apt-get installed chromium but no chromium binary is on PATH"
fi
echo "browser: $("$chrome" --version 2>/dev/null | head -n 1)"

# Headless Chromium as root needs --no-sandbox; no GPU on these machines.
run_chrome() {
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$out/profile" --enable-logging=stderr --v=0 "$@"
}
# Console messages Chromium logs with --enable-logging: "...:INFO:CONSOLE:12] "text", source: ..."
console_lines() { grep -E ':CONSOLE[:(]' "$1" || true; }

failed=0

# 0. control: a page that logs must be caught, or the console scan proves nothing
control="$out/control.html"
printf '%s\n' '<!DOCTYPE html><html><head><meta charset="utf-8">' \
  "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">" \
  '</head><body><p>control</p><script>console.log("attn-doctor control")</script></body></html>' >"$control"
run_chrome --dump-dom "file://$control" >"$out/control.dom" 2>"$out/control.log"
if [ -z "$(console_lines "$out/control.log")" ]; then
  fail "the control page's console message was not seen in Chromium's log: the console check would be vacuous"
else
  echo "ok   control page: console message detected"
fi

# The three batches: corpus cases where they exist, hand-made ones otherwise.
cases=(
  "gemma2-4.44.0-sliding-window-generate.json:mask-wider-than-keys.json"
  "hf-4.44.2-packing-b2-noncontiguous.json:packed-rows-merged.json"
  "qwen2.5-vl-4.51.3-mrope-packing-3d.json:cu-seqlens-overrun.json"
)
for pair in "${cases[@]}"; do
  corpus=${pair%%:*}
  fallback=${pair#*:}
  if [ -f "$root/repro_cases/$corpus" ]; then batch="$root/repro_cases/$corpus"; else batch="$here/cases/$fallback"; fi
  name=$(basename "$batch" .json)
  page="$out/$name.html"
  png="$out/$name.png"
  rm -f "$page" "$png"
  "$bin" check "$batch" --backend none --html "$page" >"$out/$name.txt" 2>&1
  rc=$?
  if [ $rc -gt 1 ] || [ ! -s "$page" ]; then
    fail "$name: attn-doctor check exited $rc without a page: $(tail -n 2 "$out/$name.txt")"
    continue
  fi
  run_chrome --window-size="$size" --screenshot="$png" "file://$page" >"$out/$name.shot.log" 2>&1
  run_chrome --dump-dom "file://$page" >"$out/$name.dom" 2>"$out/$name.dom.log"
  problems=""
  [ -s "$png" ] || problems+=" no screenshot was written;"
  if [ -s "$png" ]; then
    # not blank, and the map's flat fills are there: sequence 0's colour on every page
    colours=$(python3 "$here/png_colours.py" "$png" --min 12 --has "#4e79a7" 2>&1) || problems+=" $colours;"
  fi
  grep -q '<svg' "$out/$name.dom" || problems+=" the DOM has no <svg>;"
  grep -q 'class="lane-bg"' "$out/$name.dom" || problems+=" the DOM has no lanes;"
  for log in "$out/$name.shot.log" "$out/$name.dom.log"; do
    msgs=$(console_lines "$log")
    [ -z "$msgs" ] || problems+=" console: $(echo "$msgs" | head -n 3 | tr '\n' ' ');"
  done
  if [ -n "$problems" ]; then
    fail "$name:$problems"
  else
    echo "ok   $name: $(basename "$png") ${colours:-} (width x height, distinct colours), no console messages"
  fi
done

if [ $failed -ne 0 ]; then
  echo "browser test failed; pages, screenshots and logs are in $out"
  exit 1
fi
echo "browser test passed; pages and screenshots are in $out"
