#!/bin/sh
# NVIDIA's nccl-tests, unmodified, built by its own Makefile against Loom's
# nccl.h and libnccl.so.2 as a user would: NCCL_HOME holds nothing but those
# two. Every *_perf program must build, ask for libnccl.so.2, find Loom's,
# and start with every symbol it imports bound at load (LD_BIND_NOW): its
# -h runs before any CUDA call, so no GPU is needed for that much.
#   nccl_tests_build.sh NCCL_TESTS_DIR NCCL_H LIBNCCL CUDA_HOME WORK_DIR
# NVCC_GENCODE is the Makefile's own knob for the GPUs to build for; one
# (sm_90, the H100/H200 of the project's GPU checks) keeps this to a minute.
set -eu
src=$1 header=$2 lib=$3 cuda=$4 work=$5
if [ ! -f "$src/src/Makefile" ]; then
  echo "no nccl-tests at $src (../shared/peers/nccl-tests): skipped"
  exit 77
fi
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "no nvcc under $cuda: nccl-tests cannot be built here: skipped"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/nccl/include" "$work/nccl/lib"
ln -s "$header" "$work/nccl/include/nccl.h"
ln -s "$lib" "$work/nccl/lib/libnccl.so"
ln -s "$lib" "$work/nccl/lib/libnccl.so.2"
if ! make -C "$src/src" -j2 NCCL_HOME="$work/nccl" CUDA_HOME="$cuda" BUILDDIR="$work/build" \
     NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$work/make.log" 2>&1; then
  grep -v '^Compiling\|^Linking' "$work/make.log" | tail -40
  echo "FAIL: nccl-tests does not build against Loom's nccl.h and libnccl.so.2"
  exit 1
fi
failed=0
count=0
for name in all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube; do
  prog="$work/build/${name}_perf"
  count=$((count + 1))
  if [ ! -x "$prog" ]; then
    echo "FAIL: ${name}_perf was not built"; failed=1; continue
  fi
  resolved=$(LD_LIBRARY_PATH="$work/nccl/lib:$cuda/lib64" ldd "$prog" | awk '$1 == "libnccl.so.2" {print $3}')
  if [ "$(readlink -f "$resolved")" != "$(readlink -f "$lib")" ]; then
    echo "FAIL: ${name}_perf finds libnccl.so.2 at '$resolved', not Loom's $lib"; failed=1; continue
  fi
  if ! out=$(LD_BIND_NOW=1 LD_LIBRARY_PATH="$work/nccl/lib:$cuda/lib64" "$prog" -h 2>&1) ||
     ! printf '%s\n' "$out" | grep -q '^USAGE'; then
    printf '%s\n' "$out" | tail -5
    echo "FAIL: ${name}_perf does not start on Loom's libnccl.so.2 with every symbol bound"; failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "nccl-tests built unmodified against Loom's nccl.h and libnccl.so.2: $count programs, every symbol bound"
