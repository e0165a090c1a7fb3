// The algorithms, one file each, each reading top to bottom like its
// description. run.cpp picks one (tuner.hpp) and calls it with a Plan; the
// Plan's collective has been resolved already: the reduction is Sum, Prod,
// Min or Max (averages and PreMulSum are handled around the algorithm), and
// nranks > 1.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/collective.hpp"
#include "collectives/executor.hpp"
#include "collectives/links.hpp"
#include "collectives/primitives.hpp"
#include "collectives/ring.hpp"
#include "collectives/scratch.hpp"
#include "comm/communicator.hpp"
#include "topology/placement.hpp"

namespace loom::coll {

namespace shm {
class NodeArea;
}

struct Plan {
  Communicator& comm;
  const Executor& executor;  // reaches the collective's buffers: copies, reductions and primitives go through it
  Collective c;
  int rank;
  int nranks;
  uint32_t sequence;  // tags every slot of this collective
  uint32_t call;      // so does the call's signature (call_signature.hpp)
  uint64_t callBytes;  // the user's count x datatype size, whatever part of it `c` is (stall_probe.hpp)
  // The most one ring step moves: the tuner's chunk, capped at half a FIFO
  // (NCCL's steps per chunk) so that a step's first send completes without
  // its receiver and leaves slots free for the recvReduceSend that follows;
  // with a full FIFO every rank of a ring could wait for its next at once.
  size_t chunkBytes;
  const std::string& what;  // "allreduce #12", for errors
  shm::NodeArea* node = nullptr;  // the node's shared segment, for the shm algorithms
  const Ring* ring = nullptr;     // the order of the ring and chain algorithms
  const std::array<topo::Tree, 2>* trees = nullptr;  // double binary trees over ring positions
  const Ring* acrossHosts = nullptr;  // this rank's local index on every host (hierarchical), if hosts are uniform
  Scratch* received = nullptr;        // room for data received before it is folded in, kept between calls
  CollectiveChannel* channel = nullptr;  // the connections the links use

  // The collective channel's connections, as this collective uses them.
  Links links() const { return Links(comm, *channel, what, sequence, call, callBytes); }
  // The executor's primitives from `prev` to `next` for this collective.
  std::unique_ptr<Primitives> primitives(Links& links, int prev, int next) const {
    return executor.primitives(links, prev, next,
                               {.type = c.type, .typeSize = c.typeSize, .op = c.reduction.op,
                                .sequence = sequence, .call = call});
  }
  // A local copy of a block: nothing when empty or in place.
  void copy(std::byte* dst, const std::byte* src, size_t bytes) const { executor.copy(dst, src, bytes); }
  // The same block copied to two places (a slot and the output): on the
  // host, run by run, so that the second copy reads `src` from the L1 the
  // first has just filled; memory then carries src once instead of twice
  // (10-25 % less time for the pair at 128 KiB to 8 MiB, bench/RESULTS.md).
  void copyToBoth(std::byte* dst, std::byte* also, const std::byte* src, size_t bytes) const;
  // dst <- the collective's reduction of `sources`, `count` elements.
  void reduce(std::span<const void* const> sources, void* dst, size_t count) const {
    executor.reduce(c.type, c.reduction.op, sources, dst, count);
  }
};

// The blocks of a collective on the node's shared segment, for the flat
// shm algorithms and the hierarchical ones' node phases: each local rank q
// has `perRank` blocks of the plan's block size, the k-th at inputAt(q, k)
// bytes into an input (its peers may read `inputBytes` of it in place) and
// at outputAt(q, k) bytes into an output. A gather copies every rank's
// blocks from its input to every rank's output; a reduce-scatter reduces
// block (q, k) of every rank's input into q's output. The flat ones have one
// block per rank: rank q's, q blocks into the send or receive buffer (and
// the other buffer holds one); the hierarchical ones' block (q, k) is host
// k's q-th rank's, at its place in both. Plain data: a small call asks for
// a few places, and a function object per place was a noticeable share.
struct NodeBlocks {
  const std::byte* input;
  size_t inputBytes;
  int perRank;
  size_t block;                                    // bytes
  bool inputByRank;                                // the input holds a block per rank (else one, at 0)
  bool outputByRank;                               // the output does
  const std::vector<std::vector<int>>* hostRanks;  // hierarchical: each host's ranks by local index; else null

  size_t inputAt(int local, int k) const { return inputByRank ? placeOf(local, k) : 0; }
  size_t outputAt(int local, int k) const { return outputByRank ? placeOf(local, k) : 0; }

 private:
  size_t placeOf(int local, int k) const {
    const int rank = hostRanks == nullptr ? local : (*hostRanks)[static_cast<size_t>(k)][static_cast<size_t>(local)];
    return static_cast<size_t>(rank) * block;
  }
};

void ringAllReduce(const Plan& plan);
void ringAllGather(const Plan& plan);
void ringReduceScatter(const Plan& plan);
void chainBroadcast(const Plan& plan);
void chainReduce(const Plan& plan);
void recursiveDoublingAllReduce(const Plan& plan);
void treeAllReduce(const Plan& plan);
void hierarchicalAllReduce(const Plan& plan);
void hierarchicalAllGather(const Plan& plan);
void hierarchicalReduceScatter(const Plan& plan);
void directAllGather(const Plan& plan);
void directAlltoAll(const Plan& plan);
void directGather(const Plan& plan);
void directScatter(const Plan& plan);
// Reductions folded in rank order (direct_reductions.cpp).
void directAllReduce(const Plan& plan);
void directReduceScatter(const Plan& plan);
void directReduce(const Plan& plan);
// Within one node, on the shared segment (shm/node_area.hpp).
void shmAllReduce(const Plan& plan);
void shmReduceScatter(const Plan& plan);
void shmReduceBlocks(const Plan& plan, const NodeBlocks& blocks);
void shmAllGather(const Plan& plan);
void shmGatherBlocks(const Plan& plan, const NodeBlocks& blocks);
void shmBroadcast(const Plan& plan);
void shmReduce(const Plan& plan);
void shmAlltoAll(const Plan& plan);
void shmGather(const Plan& plan);
void shmScatter(const Plan& plan);

}  // namespace loom::coll
