#!/usr/bin/env bash
# loom-bench-p2p across two network namespaces ("nodes" joined by veth pairs
# and a bridge; scripts/lib/netns.sh): the socket transport beside one raw
# TCP stream on the same path. Needs root.
#   bench/p2p/netns.sh [build/release/bench/loom-bench-p2p] [bench flags...]
set -uo pipefail
bin=${1:-build/release/bench/loom-bench-p2p}
shift || true
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 2
port=$(netns_store_port)
netns_rank 1 1 2 0 $port "$bin" "$@" >"$NETNS_DIR/rank1.log" 2>&1 &
netns_rank 0 0 2 0 $port "$bin" "$@"
status=$?
wait $! || { status=1; cat "$NETNS_DIR/rank1.log"; }
exit $status
