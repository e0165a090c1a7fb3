# Network namespaces as "nodes" on one machine, for the multi-node tests and
# benchmarks (source this file). Node I is namespace ${NETNS_TAG}nI with
# interface veth0 at 10.77.0.(I+1)/24, joined to the others by a bridge that
# lives in a namespace of its own, so every address exists only inside
# namespaces created here. netns_up registers netns_down to run on exit.
#
#   netns_up N            create N nodes (exit 77, "skipped", without root or netns)
#   netns_store_port      a free port for a job's store
#   netns_rank NODE R N LR STORE_PORT ARGS...   run ARGS as rank R of N (local rank LR)
#                         in NODE, with LOOM_HOSTID=nodeNODE and the store on node 0
#   netns_job NAME "NODE_OF_RANK..." ARGS...    run ARGS as one process per rank, rank r in
#                         node NODE_OF_RANK[r] (rank 0 on node 0: it serves the store);
#                         logs in $NETNS_DIR/NAME.r.log; a failure prints the failed
#                         ranks' logs and counts in NETNS_FAILURES

NETNS_TAG="loom$$"
NETNS_NODES=()
NETNS_DIR=""
NETNS_FAILURES=0

netns_down() {
  local ns
  for ns in "${NETNS_NODES[@]}" "${NETNS_TAG}sw"; do ip netns del "$ns" 2>/dev/null; done
  [[ -n $NETNS_DIR ]] && rm -rf "$NETNS_DIR"
  return 0
}

netns_up() {
  local n=$1 i ns sw="${NETNS_TAG}sw"
  [[ $(id -u) == 0 ]] || { echo "skipped: needs root for network namespaces"; exit 77; }
  command -v ip >/dev/null || { echo "skipped: no ip command (iproute2)"; exit 77; }
  NETNS_DIR=$(mktemp -d)
  trap netns_down EXIT
  ip netns add "$sw" 2>/dev/null || { echo "skipped: cannot create network namespaces"; exit 77; }
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    ns="${NETNS_TAG}n$i"
    ip netns add "$ns"
    NETNS_NODES+=("$ns")
    ip link add "lv${NETNS_TAG}$i" type veth peer name "lp${NETNS_TAG}$i"
    ip link set "lv${NETNS_TAG}$i" netns "$ns"
    ip link set "lp${NETNS_TAG}$i" netns "$sw"
    ip -n "$ns" link set "lv${NETNS_TAG}$i" name veth0
    ip -n "$sw" link set "lp${NETNS_TAG}$i" master br0 up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev veth0
    ip -n "$ns" link set veth0 up
    ip -n "$ns" link set lo up
  done
}

# A port for a job's store: below the kernel's ephemeral range (32768 and up),
# where the connections of a job that just ended may still hold ports for a
# while (FIN_WAIT, TIME_WAIT) and a bind would fail.
netns_store_port() { echo $((10000 + RANDOM % 20000)); }

netns_rank() {
  local node=$1 rank=$2 size=$3 localRank=$4 port=$5
  shift 5
  ip netns exec "${NETNS_TAG}n$node" env LOOM_RANK="$rank" LOOM_LOCAL_RANK="$localRank" LOOM_WORLD_SIZE="$size" \
    LOOM_STORE_ADDR="10.77.0.1:$port" LOOM_HOSTID="node$node" LOOM_SOCKET_IFNAME=veth "$@"
}

netns_job() {
  local name=$1; local -a placement=($2); shift 2
  local n=${#placement[@]} port=$(netns_store_port) pids=() r
  local -A local_count=()
  for ((r = 0; r < n; r++)); do
    local node=${placement[r]}
    local lr=${local_count[$node]:-0}
    local_count[$node]=$((lr + 1))
    netns_rank "$node" $r $n $lr $port timeout 240 "$@" >"$NETNS_DIR/$name.$r.log" 2>&1 &
    pids+=($!)
  done
  local status=0
  for ((r = 0; r < n; r++)); do
    if ! wait "${pids[r]}"; then status=1; echo "--- $name: rank $r failed:"; tail -20 "$NETNS_DIR/$name.$r.log"; fi
  done
  if ((status == 0)); then echo "ok   $name"; else echo "FAIL $name ($*)"; NETNS_FAILURES=$((NETNS_FAILURES + 1)); fi
  return $status
}
