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

export LOOM_TIMEOUT_MS=60000 LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET

# expect_transport NAME RANK PEER KIND: rank RANK's log shows a KIND connection to PEER.
expect_transport() {
  if grep -q "$4 connection to rank $3 " "$work/$1.$2.log"; then
    echo "ok   $1: rank $2 -> rank $3 over $4"
  else
    echo "FAIL $1: rank $2 -> rank $3 did not use $4"; grep -h "connection to" "$work/$1.$2.log"
    NETNS_FAILURES=$((NETNS_FAILURES + 1))
  fi
}

netns_job sockets4 "0 1 2 3" "$bin" matrix
expect_transport sockets4 0 3 socket
netns_job sockets4-large "0 1 2 3" "$bin" large "$large_types"
netns_job sockets4-flood "0 1 2 3" "$bin" flood
netns_job sockets4-ring "0 1 2 3" "$bin" ring 5
netns_job mixed "0 0 1 1" "$bin" matrix
expect_transport mixed 0 1 shm
expect_transport mixed 2 3 shm
expect_transport mixed 1 2 socket
expect_transport mixed 3 0 socket
netns_job mixed-ring "0 0 1 1" "$bin" ring 5

((NETNS_FAILURES == 0)) && echo "all network-namespace jobs passed"
exit $((NETNS_FAILURES > 0))
