#!/bin/sh
# libnccl.so.2 exports every nccl* function PyTorch 2.x's libtorch_cuda.so
# calls (tests/nccl_torch_imports.txt): a missing one and `import torch`
# fails with "undefined symbol", as it did for ncclDevCommDestroy.
#   nccl_torch_imports.sh LIBNCCL LIST
set -eu
lib=$1 list=$2
have=$(mktemp)
trap 'rm -f "$have"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TWV]$/ {print $3}' | sort >"$have"
missing=0
for name in $(grep -v '^#' "$list"); do
  grep -qx "$name" "$have" || { echo "FAIL: libnccl.so.2 does not export $name, which PyTorch imports"; missing=1; }
done
[ "$missing" -eq 0 ] || exit 1
echo "libnccl.so.2 exports all $(grep -vc '^#' "$list") nccl* functions PyTorch 2.x calls"
