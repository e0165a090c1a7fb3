#!/bin/sh
# libloom.so exports exactly the functions loom.h declares, and of its insides
# only the tests' seam (api/exports.map): a program that loads it beside other
# libraries finds no loom:: internals or C++ runtime pieces to clash with, and
# every function the header promises is there.
#   loom_symbols.sh LIBLOOM LOOM_H TEST_SEAM
set -eu
lib=$1 header=$2 seam=$3
want=$(mktemp) exported=$(mktemp)
trap 'rm -f "$want" "$exported"' EXIT
functions=$(grep -oE '\bloom[A-Z][A-Za-z0-9_]*\(' "$header" | tr -d '(' | sort -u)
if [ -z "$functions" ]; then
  echo "FAIL: no loom* function found declared in $header"
  exit 1
fi
{ echo "$functions"; grep -v '^#' "$seam"; } | sort -u >"$want"
# Every defined dynamic symbol, whatever its kind (functions, data, typeinfo), demangled.
nm -DC --defined-only "$lib" | awk 'NF >= 3 {$1 = ""; $2 = ""; sub(/^  /, ""); print}' | sort -u >"$exported"
if ! diff -u "$want" "$exported"; then
  echo "FAIL: libloom.so's exports differ from loom.h's functions and the tests' seam (- missing, + exported besides)"
  exit 1
fi
echo "libloom.so exports loom.h's $(echo "$functions" | wc -l) functions, the tests' seam ($(grep -vc '^#' "$seam")), and nothing else"
