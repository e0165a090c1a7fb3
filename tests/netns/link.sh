#!/usr/bin/env bash
# A link that goes dark while both ends live: four network namespaces, one
# rank each, all-to-alls, then groups of sends and receives with every peer,
# then all-to-alls over UCX (tests/programs/link_rank.cpp), and iptables drops everything between
# nodes 0 and 2 (not neighbours on the heartbeat ring, so no watchdog sees
# it: only the data connections do). Every rank must
# fail with loomRemoteError naming rank 0 and rank 2 within the deadline
# and a little more, and none may hang. Exit 77 (skipped) without root,
# network namespaces or iptables.
#
#   link.sh LOOM_TEST_LINK_BIN [ucx]   (ucx: also over LOOM_TRANSPORT=ucx)
set -uo pipefail
bin=${1:?usage: link.sh LOOM_TEST_LINK_BIN [ucx]}
with_ucx=${2:-}
command -v iptables >/dev/null || { echo "skipped: no iptables"; exit 77; }
source "$(dirname "$0")/../../scripts/lib/netns.sh"
netns_up 4
export LOOM_TIMEOUT_MS=4000

# cut_during NAME MODE: the four ranks in MODE (collective, p2p), the link
# between nodes 0 and 2 cut once all are running, then restored.
cut_during() {
  local name=$1 mode=$2 port=$(netns_store_port) pids=() r tries status cut
  rm -f "$NETNS_DIR"/ready.*
  for r in 0 1 2 3; do
    netns_rank $r $r 4 0 "$port" timeout 60 "$bin" 0 2 "$NETNS_DIR" "$mode" >"$NETNS_DIR/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  for ((tries = 0; tries < 600; tries++)); do
    [[ -e $NETNS_DIR/ready.0 && -e $NETNS_DIR/ready.1 && -e $NETNS_DIR/ready.2 && -e $NETNS_DIR/ready.3 ]] && break
    sleep 0.05
  done
  links -A
  cut=$SECONDS
  for r in 0 1 2 3; do
    wait "${pids[r]}"
    status=$?
    if ((status == 0)); then
      echo "ok   $name: $(grep "^rank $r:" "$NETNS_DIR/$name.$r.log" | cut -c1-300)"
    else
      echo "FAIL $name: rank $r exited $status:"; tail -20 "$NETNS_DIR/$name.$r.log" | cut -c1-400
      NETNS_FAILURES=$((NETNS_FAILURES + 1))
    fi
  done
  links -D
  # The deadline (4 s), the grace for a cause (1 s), the notices (2 s at most).
  if ((SECONDS - cut > 12)); then
    echo "FAIL $name: the ranks took $((SECONDS - cut)) s after the cut"; NETNS_FAILURES=$((NETNS_FAILURES + 1))
  fi
}

# links -A|-D: drops (or stops dropping) everything between nodes 0 and 2.
links() {
  ip netns exec "${NETNS_TAG}n0" iptables "$1" OUTPUT -d 10.77.0.3 -j DROP
  ip netns exec "${NETNS_TAG}n0" iptables "$1" INPUT -s 10.77.0.3 -j DROP
  ip netns exec "${NETNS_TAG}n2" iptables "$1" OUTPUT -d 10.77.0.1 -j DROP
  ip netns exec "${NETNS_TAG}n2" iptables "$1" INPUT -s 10.77.0.1 -j DROP
}

cut_during alltoall collective
cut_during p2p p2p
# The same over UCX (tcp), where the build has it: the waits that see a
# dark link are the transport's users', whichever transport it is.
if [[ -n $with_ucx ]]; then
  LOOM_TRANSPORT=ucx UCX_TLS=tcp UCX_NET_DEVICES=veth0 cut_during ucx-alltoall collective
fi
((NETNS_FAILURES == 0)) && echo "a dark link was every rank's error, naming both ends"
exit $((NETNS_FAILURES > 0))
