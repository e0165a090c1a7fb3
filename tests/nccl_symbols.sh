#!/bin/sh
# libnccl.so.2 exports exactly NCCL's functions, each as NAME and pNAME
# (tests/nccl_symbols.txt), and its header declares each of them.
#   nccl_symbols.sh LIBNCCL SYMBOL_LIST NCCL_H
set -eu
lib=$1 list=$2 header=$3
want=$(mktemp) have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
grep -v '^#' "$list" | while read -r name; do echo "$name"; echo "p$name"; done | sort >"$want"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWV]$/ {print $3}' | sort >"$have"
if ! diff -u "$want" "$have"; then
  echo "FAIL: the exported functions differ from NCCL's (- missing, + extra)"
  exit 1
fi
missing=0
for name in $(grep -v '^#' "$list"); do
  grep -q "[ (]$name," "$header" || { echo "FAIL: nccl.h does not declare $name"; missing=1; }
done
[ "$missing" -eq 0 ] || exit 1
echo "libnccl.so.2 exports NCCL's $(grep -vc '^#' "$list") functions under both names, and nothing else"
