#!/usr/bin/env bash
# Collectives across "nodes", for real: two network namespaces with two ranks
# each (three for some hierarchical jobs), dealt alternately (rank r on node
# r mod 2), so each host's ranks talk over shared memory, the hosts over
# sockets, and the topology ring is 0 2 1 3 rather than rank order. Every
# collective through loom-perf with its checks on (it exits non-zero on any
# wrong element), on the ring and chain algorithms, the trees, the
# hierarchical forms and the tuner's choice; the dumped plan must give that
# ring on every rank. Exit 77 (skipped) without root or network namespaces.
#
#   collectives.sh LOOM_PERF_BIN
set -uo pipefail
perf=${1:?usage: collectives.sh LOOM_PERF_BIN}
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 3
export LOOM_TIMEOUT_MS=60000

sweep=(-b 8 -e 1M -f 32 -n 2 -w 1)
for coll in all_reduce all_gather reduce_scatter broadcast reduce; do
  netns_job "ring-$coll" "0 1 0 1" env LOOM_ALGO=ring "$perf" "$coll" "${sweep[@]}" -d all
done
netns_job "tree-all_reduce" "0 1 0 1" env LOOM_ALGO=allreduce:tree "$perf" all_reduce "${sweep[@]}" -d all -o all
# Hierarchical: counts that leave a tail for the flat ring (3, 12503, 25003
# floats), and nodes with 2 and 1 ranks, where it falls back to the ring.
netns_job "hier-all_reduce" "0 1 0 1" env LOOM_ALGO=allreduce:hier "$perf" all_reduce "${sweep[@]}" -d all -o all
netns_job "hier-odd-all_reduce" "0 1 0 1" env LOOM_ALGO=allreduce:hier "$perf" all_reduce -b 12 -e 100012 -i 50000 -n 2 -w 1 -o all
netns_job "hier-uneven-all_reduce" "0 1 0" env LOOM_ALGO=allreduce:hier "$perf" all_reduce "${sweep[@]}" -o all
# The hierarchical all-gather and reduce-scatter place each block by its
# owner's rank: ranks dealt alternately and in blocks, three nodes, and
# 4 KiB slots, so that a step holds a piece of each of a rank's blocks.
for coll in all_gather reduce_scatter; do
  netns_job "hier-$coll" "0 1 0 1" env LOOM_ALGO=hier "$perf" "$coll" "${sweep[@]}" -d all -o all
  netns_job "hier-blocks-$coll" "0 0 1 1" env LOOM_ALGO=hier "$perf" "$coll" -b 12 -e 100012 -i 50000 -n 2 -w 1 -o all
  netns_job "hier-three-$coll" "0 1 2 0 1 2" env LOOM_ALGO=hier LOOM_CHUNKSIZE=4096 "$perf" "$coll" "${sweep[@]}"
  netns_job "hier-uneven-$coll" "0 1 0" env LOOM_ALGO=hier "$perf" "$coll" "${sweep[@]}"
done
for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter; do
  netns_job "tuned-$coll" "0 1 0 1" "$perf" "$coll" "${sweep[@]}" -o all
done

netns_job plan "0 1 0 1" env LOOM_TOPO_DUMP_FILE="$NETNS_DIR/plan.%r.json" "$perf" all_reduce -b 8 -e 8
for r in 0 1 2 3; do
  if grep -q '"ring": \[0, 2, 1, 3\]' "$NETNS_DIR/plan.$r.json"; then
    echo "ok   plan: rank $r's ring is 0 2 1 3"
  else
    echo "FAIL plan: rank $r's ring:"; grep '"ring"' "$NETNS_DIR/plan.$r.json"
    NETNS_FAILURES=$((NETNS_FAILURES + 1))
  fi
done

((NETNS_FAILURES == 0)) && echo "all network-namespace collective jobs passed"
exit $((NETNS_FAILURES > 0))
