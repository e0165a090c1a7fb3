#!/bin/sh
# libnccl.so.2 exports exactly NCCL's functions, each as NAME and pNAME
# (tests/nccl_symbols.txt; "internal" ones as NAME alone), and its header
# declares each of nccl.h's (not the "device" API's, nccl_device.h's). Where
# NVIDIA's own libnccl.so.2 is at hand (NVIDIA_LIB), every nccl*/pnccl*
# function it exports, Loom's exports too.
#   nccl_symbols.sh LIBNCCL SYMBOL_LIST NCCL_H [NVIDIA_LIB]
set -eu
lib=$1 list=$2 header=$3 nvidia=${4:-}
want=$(mktemp) have=$(mktemp) theirs=$(mktemp)
trap 'rm -f "$want" "$have" "$theirs"' EXIT
grep -v '^#' "$list" | while read -r name kind; do
  echo "$name"
  [ "$kind" = internal ] || echo "p$name"
done | sort >"$want"
exported() { nm -D --defined-only "$1" | awk '$2 ~ /^[TWV]$/ {print $3}' | sort; }
exported "$lib" >"$have"
if ! diff -u "$want" "$have"; then
  echo "FAIL: the exported functions differ from NCCL's (- missing, + extra)"
  exit 1
fi
missing=0
for name in $(grep -v '^#' "$list" | awk 'NF == 1 {print $1}'); do
  grep -q "[ (]$name," "$header" || { echo "FAIL: nccl.h does not declare $name"; missing=1; }
done
[ "$missing" -eq 0 ] || exit 1
echo "libnccl.so.2 exports NCCL's $(grep -vc '^#' "$list") functions under both names, and nothing else"
if [ -n "$nvidia" ] && [ -f "$nvidia" ]; then
  exported "$nvidia" | grep -E '^p?nccl' >"$theirs"
  lacking=$(comm -23 "$theirs" "$have")
  if [ -n "$lacking" ]; then
    echo "FAIL: NVIDIA's $nvidia exports what Loom's does not:"
    echo "$lacking"
    exit 1
  fi
  echo "and every one of the $(wc -l <"$theirs") that NVIDIA's $nvidia exports"
fi
