#!/usr/bin/env bash
# The UCX transport across "nodes", for real: three network namespaces, UCX
# over tcp (across namespaces UCX would still pick its shared-memory lanes,
# which share /dev/shm and the PID space but not the network, and its waits
# then stall). Point-to-point (every dtype and count, flood, ring), every
# collective through loom-perf with its checks on (tuned, ring, tree), and
# a rank killed mid-transfer: the survivor names it within the deadline.
# Exit 77 (skipped) without root or network namespaces.
#
#   ucx.sh LOOM_PERF_BIN LOOM_TEST_P2P_BIN
set -uo pipefail
perf=${1:?usage: ucx.sh LOOM_PERF_BIN LOOM_TEST_P2P_BIN}
p2p=${2:?usage: ucx.sh LOOM_PERF_BIN LOOM_TEST_P2P_BIN}
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 3
export LOOM_TIMEOUT_MS=60000 LOOM_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=veth0

netns_job p2p-matrix "0 1 2" env LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET "$p2p" matrix 256
if grep -q "UCX connection to rank 2 " "$NETNS_DIR/p2p-matrix.0.log"; then
  echo "ok   p2p-matrix: rank 0 -> rank 2 over UCX"
else
  echo "FAIL p2p-matrix: rank 0 -> rank 2 did not use UCX"; NETNS_FAILURES=$((NETNS_FAILURES + 1))
fi
netns_job p2p-flood "0 1 2" "$p2p" flood
netns_job p2p-ring "0 1 2 0 1 2" "$p2p" ring 5

sweep=(-b 8 -e 4M -f 8 -n 2 -w 1)
# Every type, summed: every op over UCX is ucx_test's (EveryCollectiveTypeAndOp...),
# across "hosts" on one network; here the bytes cross namespaces.
for coll in all_reduce reduce_scatter reduce broadcast all_gather alltoall gather scatter; do
  netns_job "tuned-$coll" "0 1 2 0" "$perf" "$coll" "${sweep[@]}" -d all
done
netns_job ring-all_reduce "0 1 2 0" env LOOM_ALGO=ring "$perf" all_reduce "${sweep[@]}"
netns_job tree-all_reduce "0 1 2 0" env LOOM_ALGO=allreduce:tree "$perf" all_reduce "${sweep[@]}"

# Rank 1 (node 1) SIGKILLs itself 300 ms into endless large transfers to
# rank 0: rank 0 exits 0 having named it (loom_test_p2p victim), long before
# a minute's deadline.
port=$(netns_store_port)
start=$SECONDS
netns_rank 0 0 2 0 "$port" env LOOM_TIMEOUT_MS=5000 timeout 60 "$p2p" victim 1 300 >"$NETNS_DIR/killed.0.log" 2>&1 &
survivor=$!
netns_rank 1 1 2 0 "$port" env LOOM_TIMEOUT_MS=5000 timeout 60 "$p2p" victim 1 300 >"$NETNS_DIR/killed.1.log" 2>&1 &
victim=$!
wait $survivor; status=$?
wait $victim
if ((status == 0)) && grep -q "rank 1" "$NETNS_DIR/killed.0.log" && ((SECONDS - start < 30)); then
  echo "ok   killed: rank 0 named rank 1 in $((SECONDS - start)) s"
else
  echo "FAIL killed: rank 0 exited $status after $((SECONDS - start)) s"; sed 's/^/    /' "$NETNS_DIR/killed.0.log" | tail -20
  NETNS_FAILURES=$((NETNS_FAILURES + 1))
fi

((NETNS_FAILURES == 0)) && echo "all UCX network-namespace jobs passed"
exit $((NETNS_FAILURES > 0))
