#!/usr/bin/env bash
# A rank SIGKILLed across "nodes": two network namespaces with two ranks each
# (dealt alternately), so the victim's peers reach it over sockets and shared
# memory, and most learn of its death only from its watcher's notice. Every
# survivor must fail with loomRemoteError naming it, shrink, and all-reduce
# correctly among the three (tests/programs/fault_rank.cpp); the victim must
# have died of SIGKILL. Exit 77 (skipped) without root or network namespaces.
#
#   faults.sh LOOM_TEST_FAULT_BIN
set -uo pipefail
bin=${1:?usage: faults.sh LOOM_TEST_FAULT_BIN}
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 2
export LOOM_TIMEOUT_MS=60000

victim=1
port=$(netns_store_port)
pids=()
for r in 0 1 2 3; do
  netns_rank $((r % 2)) $r 4 $((r / 2)) "$port" timeout 120 "$bin" kill $victim "$NETNS_DIR" 1048576 \
    >"$NETNS_DIR/fault.$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1 2 3; do
  wait "${pids[r]}"
  status=$?
  if ((r == victim)); then
    expected=137  # 128 + SIGKILL
  else
    expected=0
    grep -h "detected after" "$NETNS_DIR/fault.$r.log" | cut -c1-160
  fi
  if ((status == expected)); then
    echo "ok   rank $r exited $status"
  else
    echo "FAIL rank $r exited $status, expected $expected:"; tail -20 "$NETNS_DIR/fault.$r.log"
    NETNS_FAILURES=$((NETNS_FAILURES + 1))
  fi
done
((NETNS_FAILURES == 0)) && echo "the survivors of a SIGKILL across namespaces recovered"
exit $((NETNS_FAILURES > 0))
