#!/bin/sh
# NCCL's ABI as NVIDIA's 2.28.9 header lays it out against Loom's: the same
# probe compiled against each (programs/nccl_abi_probe.cpp) prints each
# value, size and offset; every one must be equal, except that a count
# ("count") or an append-only struct ("grows") may be larger in Loom's.
#   nccl_abi.sh NVIDIA_PROBE LOOM_PROBE
set -eu
theirs=$(mktemp) ours=$(mktemp)
trap 'rm -f "$theirs" "$ours"' EXIT
"$1" >"$theirs"
"$2" >"$ours"
awk 'NR == FNR { ours[$1 " " $2] = $3; next }
     { key = $1 " " $2; checked++
       if (!(key in ours)) { print "FAIL: Loom'\''s probe has no " key; bad++; next }
       if ($1 == "count" || $1 == "grows") {
         if (ours[key] + 0 < $3 + 0) { print "FAIL: " key " is " ours[key] " in Loom'\''s nccl.h, smaller than NVIDIA'\''s " $3; bad++ }
       } else if (ours[key] != $3) {
         print "FAIL: " key " is " ours[key] " in Loom'\''s nccl.h, " $3 " in NVIDIA'\''s"; bad++
       } }
     END { if (bad) exit 1; print "nccl.h agrees with NVIDIA'\''s on all " checked " values, sizes and offsets" }' "$ours" "$theirs"
