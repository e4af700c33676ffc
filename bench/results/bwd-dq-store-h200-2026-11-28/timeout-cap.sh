#!/usr/bin/env bash
# device runs only: caps bench/gpu scripts' timeouts at 90 s (a hang costs little)
d=$1; shift
[[ $d =~ ^[0-9]+$ ]] && (( d > 90 )) && d=90
exec /usr/bin/timeout "$d" "$@"
