#!/usr/bin/env bash
# Multi-node point-to-point on one machine, for real: four network namespaces
# act as nodes (scripts/lib/netns.sh: 10.77.0.0/24 on a bridge, addresses only
# inside namespaces created here, all removed on exit, failed or not). Each
# namespace gets its own LOOM_HOSTID, since they share one kernel.
#
#   p2p.sh LOOM_TEST_P2P_BIN [LARGE_TYPES (default int8,float64)]
#
# Jobs: 4 nodes x 1 rank (sockets only), then 2 nodes x 2 ranks (shared
# memory within a node, sockets between them; the log must say so).
# Exit 77 (skipped) without root or network namespaces.
set -uo pipefail
bin=${1:?usage: p2p.sh LOOM_TEST_P2P_BIN [LARGE_TYPES]}
large_types=${2:-int8,float64}
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 4
work=$NETNS_DIR

failures=0
# run_job NAME "NODE_OF_RANK..." MODE [ARGS...]: one process per rank, rank r in
# node NODE_OF_RANK[r] (rank 0 on node 0: it serves the store).
run_job() {
  local name=$1; local -a placement=($2); shift 2
  local n=${#placement[@]} port=$((20000 + RANDOM % 20000)) pids=() r
  declare -A local_count=()
  for ((r = 0; r < n; r++)); do
    local node=${placement[r]}
    local lr=${local_count[$node]:-0}
    local_count[$node]=$((lr + 1))
    LOOM_TIMEOUT_MS=60000 LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET \
      netns_rank "$node" $r $n $lr $port timeout 240 "$bin" "$@" >"$work/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for ((r = 0; r < n; r++)); do
    if ! wait "${pids[r]}"; then status=1; echo "--- $name: rank $r failed:"; tail -20 "$work/$name.$r.log"; fi
  done
  if ((status == 0)); then echo "ok   $name ($*)"; else echo "FAIL $name ($*)"; failures=$((failures + 1)); fi
  return $status
}

# expect_transport NAME RANK PEER KIND: rank RANK's log shows a KIND connection to PEER.
expect_transport() {
  if grep -q "$4 connection to rank $3 " "$work/$1.$2.log"; then
    echo "ok   $1: rank $2 -> rank $3 over $4"
  else
    echo "FAIL $1: rank $2 -> rank $3 did not use $4"; grep -h "connection to" "$work/$1.$2.log"
    failures=$((failures + 1))
  fi
}

run_job sockets4 "0 1 2 3" matrix
expect_transport sockets4 0 3 socket
run_job sockets4-large "0 1 2 3" large "$large_types"
run_job sockets4-flood "0 1 2 3" flood
run_job sockets4-ring "0 1 2 3" ring 5
run_job mixed "0 0 1 1" matrix
expect_transport mixed 0 1 shm
expect_transport mixed 2 3 shm
expect_transport mixed 1 2 socket
expect_transport mixed 3 0 socket
run_job mixed-ring "0 0 1 1" ring 5

((failures == 0)) && echo "all network-namespace jobs passed"
exit $((failures > 0))
