#!/usr/bin/env bash
# Collectives over a bad network: two network namespaces with two ranks each
# (dealt alternately, so every ring step crosses the link), with `tc netem`
# on each node's interface (20 ms delay, 1% loss, reordering) where the
# kernel has netem, else 1% of incoming packets dropped by iptables. TCP
# must hide it: every collective completes, checked by loom-perf (non-zero
# exit on any wrong element), and no watchdog mistakes a slow link for a
# dead rank. Exit 77 (skipped) without root, namespaces or either tool.
#
#   lossy.sh LOOM_PERF_BIN
set -uo pipefail
perf=${1:?usage: lossy.sh LOOM_PERF_BIN}
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 2
export LOOM_TIMEOUT_MS=60000

impair() {  # impair NODE: netem, or iptables' random drop
  local ns=${NETNS_NODES[$1]}
  if tc -n "$ns" qdisc add dev veth0 root netem delay 20ms loss 1% reorder 25% 50% 2>/dev/null; then
    echo netem
  elif command -v iptables >/dev/null &&
    ip netns exec "$ns" iptables -A INPUT -m statistic --mode random --probability 0.01 -j DROP 2>/dev/null; then
    echo iptables
  fi
}
how0=$(impair 0)
how1=$(impair 1)
case "$how0-$how1" in
  netem-netem) echo "impairment: netem, 20 ms delay, 1% loss, reordering, on both nodes" ;;
  iptables-iptables) echo "impairment: 1% of incoming packets dropped on both nodes (no netem in this kernel: no delay or reordering)" ;;
  *) echo "skipped: neither tc netem nor iptables' statistic match works here"; exit 77 ;;
esac

sweep=(-b 8 -e 256K -f 32 -n 2 -w 1)
for coll in all_reduce all_gather reduce_scatter broadcast alltoall; do
  netns_job "lossy-$coll" "0 1 0 1" "$perf" "$coll" "${sweep[@]}"
done
netns_job "lossy-ring-all_reduce" "0 1 0 1" env LOOM_ALGO=ring "$perf" all_reduce -b 1M -e 8M -f 8 -n 2 -w 1

# The impairment must have bitten, or this test showed nothing.
for i in 0 1; do
  ns=${NETNS_NODES[$i]}
  if [[ $how0 == netem ]]; then
    lost=$(tc -s -n "$ns" qdisc show dev veth0 | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
  else
    lost=$(ip netns exec "$ns" iptables -L INPUT -v -n -x | awk '$3 == "DROP" {print $1}')
  fi
  if ((${lost:-0} > 0)); then
    echo "ok   node $i lost $lost packets"
  else
    echo "FAIL node $i lost no packets: the impairment did nothing"
    NETNS_FAILURES=$((NETNS_FAILURES + 1))
  fi
done

((NETNS_FAILURES == 0)) && echo "every collective completed correctly over the impaired link"
exit $((NETNS_FAILURES > 0))
