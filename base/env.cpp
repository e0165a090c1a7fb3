#include "base/env.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/error.hpp"

namespace loom::env {
namespace {

// Keep alphabetical. docs/configuration.md's table is generated from this one.
constexpr Variable kVariables[] = {
    {"LOOM_ALGO", "", "Forces collective algorithms: a list like allreduce:ring,allgather:direct, or one name for every collective it applies to (ring, rd, direct, shm, tree, hier). Default: the tuner's choice."},
    {"LOOM_BUFFSIZE", "4194304", "Bytes of each connection's FIFO, split into 8 slots (the pipelining chunk); 64 KiB to 1 GiB."},
    {"LOOM_CHECK", "0", "1: before every collective the ranks compare its signature (sequence, collective, count, datatype, op, root) out of band; ranks that disagree all fail with loomInvalidUsage naming each group of ranks and what it called. Costs one bootstrap allgather per call."},
    {"LOOM_CHUNKSIZE", "", "Bytes per ring slice and pipelining step of the collectives, and per slot of the shared-memory collectives' segment (a multiple of 64; default: 4 MiB for rings, 256 KiB per slot, at most 16 MiB)."},
    {"LOOM_COMM_ID", "", "host:port of a fixed rendezvous root (NCCL_COMM_ID's): loomGetUniqueId then starts nothing and returns the same id in every process that has it, so ranks need not pass the id between them, and the rank 0 of a communicator made from that id listens there at its init (on that host; the port free again once every rank has come). Its secret is LOOM_STORE_SECRET where that is set, else derived from the address, so that whoever reaches the port may join (trust the network, as NCCL does)."},
    {"LOOM_CUDA_GATE", "auto", "How a CUDA stream waits for a Loom call that its host side runs: memop (cuStreamWaitValue64: the stream waits in the GPU's front end with no kernel resident), kernel (a one-thread kernel polls a counter in pinned memory), or auto, memop wherever the device supports 64-bit stream memory operations and kernel elsewhere. memop is the default because a resident kernel costs processes that share a GPU its time slices: on an H200, a 2-process 8-byte all-reduce took 0.30-0.41 ms with memop and 3.1 ms with kernel."},
    {"LOOM_CUDA_IPC_CACHE", "1", "1: a peer's CUDA IPC handle, once opened to read its device buffer in place, stays open for later calls on the same allocation (the last 64 kept; as UCX's UCX_CUDA_IPC_CACHE, since opening one costs far more than a small collective); 0: opened for one call and closed after it, which CUDA's documentation asks for where an owner may free a buffer while a peer holds it open. On the resident path (LOOM_DEVICE_RESIDENT) processes read each other's buffers in place only with 1: each peer opens an allocation once, from the host, and keeps it for the communicator's life (62 allocations a rank, newer ones through the scratch); with 0 those calls go through the scratch. Not yet run on a GPU."},
    {"LOOM_DEBUG", "WARN", "Log level: NONE, WARN, INFO or TRACE."},
    {"LOOM_DEBUG_FILE", "", "Write the log to this file instead of stderr; %h is replaced by the host name, %p by the pid."},
    {"LOOM_DEBUG_SUBSYS", "ALL", "Comma-separated subsystems to log: INIT, BOOTSTRAP, NET, COMM, LAUNCH, COLL, TUNING, GRAPH, ALL; a leading ^ excludes the listed ones."},
    {"LOOM_DETERMINISTIC", "0", "1: reductions fold every element's operands in rank order in one pass (shared-segment and direct algorithms only), so float results are bitwise identical across runs, algorithms and message sizes for a given rank count. loomConfig_t.deterministic overrides it."},
    {"LOOM_DEVICE_ONE_KERNEL_BYTES", "65536", "A resident collective (LOOM_DEVICE_RESIDENT) of ranks that are threads of one process on one GPU, of at most this many bytes of each block (folds that sum, multiply, or take a minimum or maximum; every gather, broadcast and all-to-all), runs its round of flags and its read in one kernel of one thread block, which polls the flags itself, instead of its reduction kernel or copies between two batches of stream memory operations: one launch a call. Those ranks' kernels run at once, so one waiting on another holds one block of one SM, not the GPU. 0: never. Each rank decides for itself (the flags are the same either way). Not yet run on a GPU."},
    {"LOOM_DEVICE_RESIDENT", "1", "1: where every rank of a communicator is on one node and its device reaches every rank's device memory, each rank maps its peers' device areas at init (a line of flags, LOOM_DEVICE_SCRATCH_BYTES of scratch and 1 MiB of send slots per rank of the communicator, a rank), and a collective, send or receive on a CUDA stream of device buffers is queued on the stream as pieces of copies, flag writes and waits (stream memory operations) and reduction kernels, with no host thread in the call; 0: such calls go through the host behind a gate. The same on every rank."},
    {"LOOM_DEVICE_SCRATCH_BYTES", "4194304", "The scratch of each rank's resident area (LOOM_DEVICE_RESIDENT), rounded down to 4 KiB: two slots of half of it, a larger call going through them in pieces of a slot, each piece one round of flags between the ranks (ranks that are threads of one process on one GPU run a larger call as one piece, reading each other's buffers where they lie). Where processes share one GPU a round costs a context switch (0.1-0.2 ms on an H200), so their large calls gain from more, at its cost in device memory per rank and communicator; not yet measured on a GPU with other values. The same on every rank: where one rank's differs, none runs resident calls (said at INFO)."},
    {"LOOM_DEVICE_TWO_SHOT_BYTES", "524288", "A resident all-reduce (LOOM_DEVICE_RESIDENT) of 3 or more ranks whose call holds at least this many bytes runs in two shots: each rank reduces its n-th of every piece from every rank's scratch and then copies the other ranks' reduced n-ths, reading about twice the piece where one shot reads n times it, for one more round of flags; smaller calls, and 2 ranks, run in one shot. 0: always one shot. (Threads of one process on one GPU run an all-reduce past one scratch slot in two shots whatever this says: in place, only two shots let them read each other's buffers where they lie.) Processes sharing one GPU run one shot unless this is set: each round of flags costs them a context switch, and two shots take a round more a piece. Rank 0's value is every rank's. Checked on an H200 (3 processes, 8 B to 16 MiB), not yet tuned there (vLLM's custom all-reduce switches near the same size)."},
    {"LOOM_FLIGHT_RECORDER_FILE", "", "When a collective fails, each rank writes its flight recorder (its last 64 collectives: sequence, collective, count, datatype, algorithm, state, start and end times in µs since the epoch, to the kernel's tick, the error) as JSON to this file, %r replaced by the rank (without %r: the name plus .RANK). The record is logged at WARN either way."},
    {"LOOM_HEARTBEAT_MS", "1000", "Each rank sends a heartbeat to the next rank this often, from a thread of its own; one that sends none for 5 periods is declared failed and every rank's operations on the communicator fail with loomRemoteError naming it. A process that dies is noticed at once, heartbeats or not. 0: no heartbeats (a stopped rank is then found only by LOOM_TIMEOUT_MS)."},
    {"LOOM_HOSTID", "", "Overrides the host id (default: a hash of the host name and the kernel boot id); ranks with equal ids count as one node."},
    {"LOOM_IB_GID_INDEX", "0", "The gid index the verbs transport addresses by on RoCE ports (as NCCL_IB_GID_INDEX); InfiniBand ports route by LID and ignore it."},
    {"LOOM_IB_HCA", "", "RDMA devices and ports for the verbs transport, in NCCL_IB_HCA's grammar: comma-separated name prefixes with an optional :port (mlx5_0:1,mlx5_1), = in front for exact names, ^ to exclude. Default: the first active port of any device."},
    {"LOOM_LOCAL_RANK", "", "Rank of this process on its node, for loomCommInitFromEnv (set by loomrun)."},
    {"LOOM_RANK", "", "Rank of this process, for loomCommInitFromEnv (set by loomrun)."},
    {"LOOM_SHM_SINGLE_COPY", "1", "1: messages of more than one step of the shared-memory collectives are read straight from the peers' buffers when every local rank's are reachable (loomMemAlloc'd, or all ranks threads of one process; device buffers on one GPU or on GPUs with peer access, through CUDA IPC or between threads), and a send of device memory larger than the FIFO to a rank of the same node goes by handle, the receiver copying it straight from the sender's buffer; 0: always staged through the node's segment or the connection's slots (device buffers through pinned host memory)."},
    {"LOOM_SOCKET_IFNAME", "", "Network interfaces to use: comma-separated name prefixes, =name for an exact match, ^ to exclude. Default: any interface but lo and docker*, else lo."},
    {"LOOM_SOCKET_NSOCKS", "2", "TCP sockets per socket-transport connection (1 to 16); consecutive slots travel on different sockets."},
    {"LOOM_STAGING_PIECE_BYTES", "16777216", "Collectives larger than this, in a job where some rank sees a CUDA device, run as pieces of this many bytes (rounded down to 64; all-reduce, broadcast and reduce: of their one block; all-gather, reduce-scatter, all-to-all, gather and scatter: 1/n of it from each of their n blocks) one after another when their algorithm stages device buffers through pinned host memory (across nodes), so that a rank on device memory copies each piece to the host while the one before crosses the network and copies it back while the next does; 0: whole. The same on every rank."},
    {"LOOM_STORE_ADDR", "", "Rendezvous store for loomCommInitFromEnv: host:port (rank 0 serves a TCP store there) or file:///dir (a directory all ranks share)."},
    {"LOOM_STORE_SECRET", "", "32 hex digits (128 random bits) that every rank of a job started by loomCommInitFromEnv shares: rank 0's TCP store serves only clients that present it, so whoever merely reaches the store's port cannot read the unique id. loomrun sets a fresh one per job; under torchrun, Slurm or mpirun export one to every rank. Unset: the store serves anyone who reaches it (trust the network)."},
    {"LOOM_TIMEOUT_MS", "300000", "Deadline of every wait, in milliseconds: bootstrap, connection set-up, barriers, and a send or receive whose peer moves nothing for that long."},
    {"LOOM_TOPO_DUMP_FILE", "", "Write the machine and the communicator's plan (system graph, paths, places, ring, trees, NIC per rank) as JSON to this file: rank 0 writes it, or every rank when the name holds %r (replaced by the rank)."},
    {"LOOM_TOPO_FILE", "", "Describe this machine with this hwloc v2.0 XML file (lstopo --of xml) instead of discovering it; ranks are then placed on its GPUs, or its NUMA nodes in blocks, by local rank."},
    {"LOOM_TRANSPORT", "", "Forces one transport for every peer: shm (same host only), socket, ucx (where the build found UCX; UCX_* variables reach it untouched) or ibverbs (where an RDMA device has an active port). Default: the fastest that reaches each peer (shm within a host; across hosts ibverbs where a device has an active port, else ucx where UCX has an RDMA device, else socket)."},
    {"LOOM_WORLD_SIZE", "", "Number of ranks, for loomCommInitFromEnv (set by loomrun)."},
};

const Variable& lookup(std::string_view name) {
  for (const auto& v : kVariables) {
    if (v.name == name) return v;
  }
  throw Error(loomInternalError, "environment variable " + std::string(name) + " is not declared in base/env.cpp");
}

}  // namespace

std::span<const Variable> table() { return kVariables; }

std::optional<std::string> getIfSet(std::string_view name) {
  const auto& v = lookup(name);
  const char* value = std::getenv(std::string(v.name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string get(std::string_view name) {
  auto value = getIfSet(name);
  return value ? *value : std::string(lookup(name).defaultValue);
}

long long getInt(std::string_view name, long long min, long long max) {
  std::string text = get(name);
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < min || value > max) {
    throw Error(loomInvalidArgument, std::string(name) + "='" + text + "' is not an integer in [" +
                                         std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

std::string markdownTable() {
  std::string out = "| variable | default | meaning |\n|---|---|---|\n";
  for (const auto& v : kVariables) {
    out += "| `" + std::string(v.name) + "` | " +
           (v.defaultValue.empty() ? std::string("(unset)") : "`" + std::string(v.defaultValue) + "`") +
           " | " + std::string(v.doc) + " |\n";
  }
  return out;
}

}  // namespace loom::env
