// Every collective x dtype x op x count x in/out of place x root x algorithm
// (LOOM_ALGO), ranks as threads, checked exactly against references each
// rank computes (support/collective_check.hpp). Sanitizer builds run a
// representative slice of the matrix (LOOM_TEST_FULL_MATRIX=0) to fit CI.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/device/fake_device.hpp"
#include "base/device/staging.hpp"
#include "collectives/comm_state.hpp"
#include "collectives/shm/node_area.hpp"
#include "comm/communicator.hpp"
#include "tools/check/collective_check.hpp"
#include "tests/support/device_memory.hpp"
#include "tests/support/page_map.hpp"
#include "tests/support/ranks.hpp"

namespace loom::test {
namespace {

using namespace loom::check;

constexpr bool kFull = LOOM_TEST_FULL_MATRIX;

const std::vector<loomDataType_t> kAllTypes = {loomInt8,  loomUint8,   loomInt32,   loomUint32,  loomInt64,
                                               loomUint64, loomFloat16, loomFloat32, loomFloat64, loomBfloat16};
const std::vector<loomDataType_t> kSomeTypes = {loomInt8, loomFloat16, loomFloat32, loomInt64};

loomRedOp_t builtin(Op op) {
  switch (op) {
    case Op::Sum: return loomSum;
    case Op::Prod: return loomProd;
    case Op::Min: return loomMin;
    case Op::Max: return loomMax;
    default: return loomAvg;
  }
}

// Calls the collective of `c`; in place uses one buffer the way NCCL defines it.
loomResult_t call(const Case& c, const std::byte* send, std::byte* recv, loomRedOp_t op, loomComm_t comm) {
  switch (c.coll) {
    case Coll::Broadcast: return loomBroadcast(send, recv, c.count, c.type, c.root, comm, nullptr);
    case Coll::Reduce: return loomReduce(send, recv, c.count, c.type, op, c.root, comm, nullptr);
    case Coll::AllReduce: return loomAllReduce(send, recv, c.count, c.type, op, comm, nullptr);
    case Coll::ReduceScatter: return loomReduceScatter(send, recv, c.count, c.type, op, comm, nullptr);
    case Coll::AllGather: return loomAllGather(send, recv, c.count, c.type, comm, nullptr);
    case Coll::AlltoAll: return loomAlltoAll(send, recv, c.count, c.type, comm, nullptr);
    case Coll::Gather: return loomGather(send, recv, c.count, c.type, c.root, comm, nullptr);
    case Coll::Scatter: return loomScatter(send, recv, c.count, c.type, c.root, comm, nullptr);
    case Coll::SendRecv: {
      loomGroupStart();
      loomSend(send, c.count, c.type, (c.rank + 1) % c.nranks, comm, nullptr);
      loomRecv(recv, c.count, c.type, (c.rank + c.nranks - 1) % c.nranks, comm, nullptr);
      return loomGroupEnd();
    }
  }
  return loomInternalError;
}

// Where a case's buffers come from: loomMemAlloc lets the shared-memory
// engine read peers' buffers in place; Device puts them on a CUDA device (the
// fake one without a GPU: support/device_memory.hpp), and DeviceOnEvenRanks
// there on even ranks only, mixing memory kinds in one call.
enum class Buffers { Heap, LoomMemAlloc, Device, DeviceOnEvenRanks };

class Buffer {
 public:
  Buffer(size_t bytes, Buffers from) : from_(from) {
    if (from == Buffers::Heap) {
      heap_.resize(bytes);
      data_ = heap_.data();
      return;
    }
    void* p = nullptr;
    EXPECT_EQ(loomMemAlloc(&p, bytes), loomSuccess) << loomGetLastError(nullptr);
    data_ = static_cast<std::byte*>(p);
  }
  ~Buffer() {
    if (from_ == Buffers::LoomMemAlloc) {
      EXPECT_EQ(loomMemFree(data_), loomSuccess);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::byte* data() { return data_; }

 private:
  Buffers from_;
  std::vector<std::byte> heap_;
  std::byte* data_ = nullptr;
};

// Runs one case on this rank; "" or what went wrong.
std::string runCase(const Case& c, bool inPlace, loomComm_t comm, Buffers from) {
  const size_t size = typeSize(c.type);
  const size_t sendBytes = sendElements(c) * size;
  const size_t recvBytes = recvElements(c) * size;
  const size_t own = static_cast<size_t>(c.coll == Coll::Gather || c.coll == Coll::Scatter ? c.root : c.rank) *
                     c.count * size;
  const bool device = from == Buffers::Device || (from == Buffers::DeviceOnEvenRanks && c.rank % 2 == 0);
  // Host buffers; with device memory, the host's images of the device's.
  const Buffers host = from == Buffers::LoomMemAlloc ? from : Buffers::Heap;
  Buffer a(std::max(sendBytes, recvBytes) + 1, host), b(recvBytes + 1, host);
  std::byte* send = a.data();
  std::byte* recv = b.data();
  if (inPlace) {
    switch (c.coll) {
      case Coll::AllGather: case Coll::Gather: recv = a.data(); send = a.data() + own; break;
      case Coll::ReduceScatter: case Coll::Scatter: send = a.data(); recv = a.data() + own; break;
      default: recv = send; break;
    }
  }
  fillSend(c, send);
  std::optional<DeviceBuffer> da, db;
  std::byte* callSend = send;
  std::byte* callRecv = recv;
  if (device) {
    da.emplace(std::max(sendBytes, recvBytes) + 1);
    db.emplace(recvBytes + 1);
    da->upload(a.data());
    db->upload(b.data());
    const auto onDevice = [&](std::byte* p) {
      return p >= a.data() && p < a.data() + da->size() ? da->data() + (p - a.data()) : db->data() + (p - b.data());
    };
    callSend = onDevice(send);
    callRecv = onDevice(recv);
  }

  loomRedOp_t op = builtin(c.op);
  std::vector<std::byte> scalar(8);
  if (c.op == Op::PreMulSum) {
    storeValue(c.type, scalar.data(), 0, preMulScalar(c.rank));
    const auto residence = c.rank % 2 == 0 ? loomScalarHostImmediate : loomScalarDevice;
    if (loomRedOpCreatePreMulSum(&op, scalar.data(), c.type, residence, comm) != loomSuccess) {
      return std::string("loomRedOpCreatePreMulSum: ") + loomGetLastError(comm);
    }
  }
  const loomResult_t result = call(c, callSend, callRecv, op, comm);
  if (c.op == Op::PreMulSum) loomRedOpDestroy(op, comm);
  if (result != loomSuccess) return std::string("failed: ") + loomGetLastError(comm);
  if (device) {
    da->download(a.data());
    db->download(b.data());
  }
  return checkResult(c, recv);
}

struct Matrix {
  std::vector<Coll> colls;
  std::vector<loomDataType_t> types;
  std::vector<Op> ops;
  std::vector<size_t> counts;
};

// Every rank walks the same cases in the same order.
void runMatrix(int nranks, const std::string& algo, const Matrix& m, Buffers from = Buffers::Heap) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "30000");
  ScopedEnv algorithm("LOOM_ALGO", algo);
  auto comms = initThreadComms(nranks);
  onThreads(nranks, [&](int rank) {
    for (Coll coll : m.colls) {
      const std::vector<Op> ops = reduces(coll) ? m.ops : std::vector<Op>{Op::Sum};
      const bool rooted = coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather || coll == Coll::Scatter;
      const std::vector<int> roots = rooted && nranks > 1 ? std::vector<int>{0, nranks - 1} : std::vector<int>{0};
      for (loomDataType_t type : m.types) {
        for (Op op : ops) {
          for (size_t count : m.counts) {
            for (int root : roots) {
              for (bool inPlace : {false, true}) {
                if (inPlace && coll == Coll::AlltoAll) continue;
                Case c{coll, type, op, nranks, rank, root, count};
                std::string error = runCase(c, inPlace, comms[static_cast<size_t>(rank)], from);
                if (!error.empty()) {
                  ADD_FAILURE() << collName(coll) << " " << typeName(type) << " " << opName(op) << " count " << count
                                << " root " << root << (inPlace ? " in place" : " out of place") << " rank " << rank
                                << "/" << nranks << " LOOM_ALGO=" << algo << ": " << error;
                  return;  // the others fail or time out on their own
                }
              }
            }
          }
        }
      }
    }
  });
  destroyAll(comms);
}

const std::vector<Coll> kAllColls = {Coll::Broadcast, Coll::Reduce,   Coll::AllReduce, Coll::ReduceScatter,
                                     Coll::AllGather, Coll::AlltoAll, Coll::Gather,    Coll::Scatter};
const std::vector<Op> kAllOps = {Op::Sum, Op::Prod, Op::Min, Op::Max, Op::Avg, Op::PreMulSum};

Matrix reductionMatrix() {
  return {{Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter},
          kFull ? kAllTypes : kSomeTypes,
          kAllOps,
          kFull ? std::vector<size_t>{0, 1, 2, 7, 1023, 65537} : std::vector<size_t>{0, 1, 7, 1023}};
}

Matrix movementMatrix() {
  return {{Coll::Broadcast, Coll::AllGather, Coll::AlltoAll, Coll::Gather, Coll::Scatter},
          {loomInt8, loomFloat16, loomFloat64},
          {Op::Sum},
          kFull ? std::vector<size_t>{0, 1, 2, 7, 1023, 65537} : std::vector<size_t>{0, 1, 7, 1023}};
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(Collectives, ReductionsAreExactForEveryTypeOpAndCount) {
  auto [n, algo] = GetParam();
  runMatrix(n, algo, reductionMatrix());
}

TEST_P(Collectives, DataMovementIsExactForEveryCount) {
  auto [n, algo] = GetParam();
  runMatrix(n, algo, movementMatrix());
}

// "" is the tuner's choice (on one node, the shared segment wherever it
// applies: tuner_test); the others force each algorithm where it applies.
INSTANTIATE_TEST_SUITE_P(Ranks, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(std::string(""), std::string("ring"),
                                                              std::string("allreduce:rd,reducescatter:direct,reduce:direct,allgather:direct,"
                                                                          "alltoall:direct,gather:direct,scatter:direct"))),
                         [](const auto& p) {
                           std::string algo = std::get<1>(p.param);
                           std::string name = algo.empty() ? "tuned" : algo == "ring" ? "ring" : "rd_direct";
                           return std::to_string(std::get<0>(p.param)) + "ranks_" + name;
                         });

// A step of up to 96 bytes travels in the staging rank's arrival line
// (shm::kArrivalBytes; its first 32 in the counter's cache line), a larger
// one in its slot: sizes on either side of both edges, back to back so that
// fast ranks reuse each line.
TEST(CollectivesShm, StepsAtTheArrivalLineEdgeAreExact) {
  for (int n : {2, 3}) {
    runMatrix(n, "", {{Coll::Broadcast, Coll::Reduce, Coll::AllReduce, Coll::AllGather, Coll::Gather}, {loomInt8},
                      {Op::Sum, Op::Max}, {31, 32, 33, 95, 96, 97}});
    // All-to-all and scatter stage a piece of each of n blocks in one step:
    // 30 to 34 bytes in all, and 93 to 99.
    runMatrix(n, "", {{Coll::AlltoAll, Coll::Scatter}, {loomInt8}, {Op::Sum}, {10, 11, 15, 16, 17, 31, 32, 33, 47, 48, 49}});
    runMatrix(n, "", {{Coll::Reduce, Coll::AllReduce}, {loomFloat64}, {Op::Sum}, {4, 5, 12, 13}});
  }
}

// The segment's data area spans up to about 6 MiB in 2, 4 or 8 buffers, so
// that a slot comes round only after that much has passed through its
// readers' caches (shm::buffersFor); step s uses buffer s % buffers, on every
// rank alike. 16 ranks keep the protocol's two, which SixteenRanksAsThreads
// runs.
TEST(CollectivesShm, StepsRotateThroughBuffersSpanningTheDataArea) {
  constexpr size_t kSlot = size_t{256} << 10;
  EXPECT_EQ(coll::shm::buffersFor(2, kSlot), 8u);   // 3 slots a buffer: 0.75 MiB
  EXPECT_EQ(coll::shm::buffersFor(4, kSlot), 4u);   // 1.25 MiB: 5 would span 6 MiB
  EXPECT_EQ(coll::shm::buffersFor(6, kSlot), 4u);   // 1.75 MiB
  EXPECT_EQ(coll::shm::buffersFor(8, kSlot), 2u);   // 2.25 MiB: 3, down to 2
  EXPECT_EQ(coll::shm::buffersFor(16, kSlot), 2u);  // 4.25 MiB
  EXPECT_EQ(coll::shm::buffersFor(1, 4096), 8u);
  EXPECT_EQ(coll::shm::buffersFor(2, size_t{4} << 20), 2u);  // LOOM_CHUNKSIZE=4M: 12 MiB a buffer

  // Each rank maps the segment where it may: where rank 0's slot of each
  // step lies, from its slot of step 0.
  for (int n : {2, 4}) {
    auto comms = initThreadComms(n);
    std::vector<std::vector<ptrdiff_t>> offsets(static_cast<size_t>(n));
    onThreads(n, [&](int r) {
      auto& comm = static_cast<Communicator&>(*comms[static_cast<size_t>(r)]);
      coll::shm::NodeArea& node = coll::CommState::of(comm).nodeArea(kSlot);
      ASSERT_EQ(node.buffers(), coll::shm::buffersFor(n, kSlot));
      for (uint64_t step = 0; step < 2 * node.buffers(); ++step) {
        offsets[static_cast<size_t>(r)].push_back(node.stage(0, step) - node.stage(0, 0));
      }
    });
    const size_t buffers = coll::shm::buffersFor(n, kSlot);
    for (int r = 0; r < n; ++r) {
      const auto& mine = offsets[static_cast<size_t>(r)];
      ASSERT_EQ(mine.size(), 2 * buffers);
      EXPECT_EQ(mine, offsets[0]) << "rank " << r << " places rank 0's slots elsewhere than rank 0 does";
      for (size_t step = 0; step < buffers; ++step) {
        EXPECT_EQ(mine[step + buffers], mine[step]) << "step " << step;
        for (size_t other = 0; other < step; ++other) EXPECT_NE(mine[step], mine[other]) << step << " " << other;
      }
    }
  }
}

// Every page of the node's segment is in each rank's page tables once the
// segment is made (NodeArea maps them all after each rank's first touch of
// its own slots), so that no call stops on a page fault the first time it
// touches a line or slot: on a VM those made a 2-rank 8-byte all-reduce's
// first 100 calls 4x slower. Likewise the shared-memory FIFOs' pages.
TEST(CollectivesShm, EveryPageOfTheSegmentIsMappedBeforeTheFirstCall) {
  ScopedEnv algorithm("LOOM_ALGO", "shm");
  for (int n : {2, 3}) {
    auto comms = initThreadComms(n);
    onThreads(n, [&](int r) {
      const loomComm_t comm = comms[static_cast<size_t>(r)];
      int64_t x = r;  // one element: the arrival lines only, no slot
      ASSERT_EQ(loomAllReduce(&x, &x, 1, loomInt64, loomSum, comm, nullptr), loomSuccess);
      EXPECT_EQ(x, n * (n - 1) / 2);
      // A message to the next rank: a FIFO each way on the ring, whose
      // sender opened what its receiver made.
      int64_t got = -1;
      ASSERT_EQ(loomGroupStart(), loomSuccess);
      ASSERT_EQ(loomSend(&x, 1, loomInt64, (r + 1) % n, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(&got, 1, loomInt64, (r + n - 1) % n, comm, nullptr), loomSuccess);
      ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comm);
      EXPECT_EQ(got, x);
    });
    const auto mappings = mappingsOf("/dev/shm/loom-");
    // Each rank's map of the node's segment, and both ends of n FIFOs.
    EXPECT_GE(mappings.size(), static_cast<size_t>(3 * n));
    for (const Mapping& m : mappings) {
      EXPECT_EQ(pagesNotMapped(m.start, m.bytes), 0u) << n << " ranks: " << m.path << ", " << m.bytes << " bytes";
    }
    destroyAll(comms);
  }
}

// A small broadcast's root stages its piece in its arrival line and returns
// (shm::NodeArea::depart), up to kArrivalDepth - 1 calls ahead of its
// slowest receiver, and a receiver waits for the root alone: here the root
// makes all its calls before any receiver makes one, and receiver 1 all of
// its calls before receiver 2 starts. Were either to wait for a peer that
// has not called yet, its call would fail at the deadline (LOOM_TIMEOUT_MS)
// naming that peer, as one more call of the root's does.
TEST(CollectivesShm, ASmallBroadcastsRootRunsAheadOfItsReceivers) {
  ScopedEnv algorithm("LOOM_ALGO", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  constexpr int kCalls = static_cast<int>(coll::shm::kArrivalDepth) - 1;
  auto comms = initThreadComms(3);
  std::atomic<int> done{0};  // how many ranks made all their broadcasts
  onThreads(3, [&](int r) {
    loomComm_t comm = comms[static_cast<size_t>(r)];
    int64_t x = 1;
    ASSERT_EQ(loomAllReduce(&x, &x, 1, loomInt64, loomSum, comm, nullptr), loomSuccess);  // maps the segment
    while (done.load() < r) std::this_thread::yield();
    for (int call = 0; call < kCalls; ++call) {
      std::vector<int32_t> buf(24, r == 0 ? 100 + call : -1);  // 96 bytes: the whole arrival line
      const loomResult_t result = loomBroadcast(buf.data(), buf.data(), buf.size(), loomInt32, 0, comm, nullptr);
      EXPECT_EQ(result, loomSuccess) << "rank " << r << ", call " << call << ": " << loomGetLastError(comm);
      if (result != loomSuccess) break;  // its peers must not wait for it
      EXPECT_EQ(buf, std::vector<int32_t>(24, 100 + call)) << "rank " << r << ", call " << call;
    }
    const bool failed = ::testing::Test::HasFailure();
    ++done;
    if (failed) return;
    x = r;
    ASSERT_EQ(loomAllReduce(&x, &x, 1, loomInt64, loomSum, comm, nullptr), loomSuccess);  // back in step
    EXPECT_EQ(x, 3);
  });
  destroyAll(comms);
}

TEST(CollectivesLarge, AllReduceOf4MiPlus1ElementsIsExact) {
  for (const std::string& algo : kFull ? std::vector<std::string>{"ring", "rd", "shm"} : std::vector<std::string>{"ring", "shm"}) {
    runMatrix(3, "allreduce:" + algo, {{Coll::AllReduce}, {kFull ? loomFloat32 : loomInt8}, {Op::Sum}, {(4u << 20) + 1}});
  }
  ScopedEnv staged("LOOM_SHM_SINGLE_COPY", "0");
  runMatrix(3, "allreduce:shm", {{Coll::AllReduce}, {kFull ? loomFloat32 : loomInt8}, {Op::Sum}, {(4u << 20) + 1}});
}

// The double binary trees, forced with LOOM_ALGO: every rank count from 2 to
// 8 (sanitizer builds: 3, 4 and 7; odd counts shift the second tree instead of mirroring it),
// every op, counts that leave a half or both empty or unequal, and, with
// small chunks, a buffer that takes each tree 32 chunks.
TEST(CollectivesTree, AllReducesAreExactOnEveryRankCount) {
  for (int n : kFull ? std::vector<int>{2, 3, 4, 5, 6, 7, 8} : std::vector<int>{3, 4, 7}) {
    runMatrix(n, "allreduce:tree", {{Coll::AllReduce}, kSomeTypes, kAllOps, {0, 1, 2, 7, 1023}});
  }
  ScopedEnv chunk("LOOM_CHUNKSIZE", "4096");
  runMatrix(5, "allreduce:tree", {{Coll::AllReduce}, {loomInt32, loomFloat32}, {Op::Sum}, {65537}});
}

TEST(CollectivesLarge, SixteenRanksAsThreads) {
  runMatrix(16, "", {kAllColls, {loomFloat32}, {Op::Sum, Op::Max}, {0, 7, kFull ? 65537u : 1023u}});
}

// The ring and chain algorithms walk the topology's ring, not rank order, and
// the trees are built over its positions.
// Ten ranks on the 8-GPU fixture: ranks 8 and 9 share GPUs 0 and 1, so the
// ring is 0 8 1 9 2 3 4 5 6 7, and every ring step and chain link differs
// from rank order somewhere.
TEST(CollectivesOnATopologyRing, AreExactWhenTheRingIsNotRankOrder) {
  ScopedEnv machine("LOOM_TOPO_FILE", LOOM_SOURCE_DIR "/tests/fixtures/topology/pcie-8gpu.xml");
  auto comms = initThreadComms(10);
  EXPECT_EQ(comms[3]->placement().ring, (std::vector<int>{0, 8, 1, 9, 2, 3, 4, 5, 6, 7}));
  destroyAll(comms);
  runMatrix(10, "ring", {{Coll::Broadcast, Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather},
                         {loomInt32, loomFloat16},
                         {Op::Sum, Op::Max},
                         {0, 7, kFull ? 65537u : 1023u}});
  runMatrix(10, "allreduce:tree", {{Coll::AllReduce}, {loomInt32, loomFloat16}, {Op::Sum, Op::Max}, {0, 7, 1023}});
}

// Buffers from loomMemAlloc: past one step the engine reads the peers'
// buffers in place (PreMulSum, which scales a copy first, stays staged; all-to-all,
// gather and scatter, a slot's 1/n per block, past that). So it
// does for heap buffers of ranks that are threads of one process, as in the
// other tests here; LOOM_SHM_SINGLE_COPY=0 stages them all.
TEST(CollectivesOnLoomMemAlloc, AreExactReadingPeersInPlace) {
  const Matrix full{{Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce},
                    {loomInt8, loomBfloat16, loomFloat64},
                    {Op::Sum, Op::Avg, Op::PreMulSum},
                    {0, 7, (1u << 16) + 3, 300007}};  // up to 1, 2 and several 256 KiB steps
  const Matrix slice{{Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce},
                     {loomBfloat16},
                     {Op::Sum},
                     {7, 300007}};
  const Matrix moves{{Coll::AlltoAll, Coll::Gather, Coll::Scatter},
                     kFull ? std::vector<loomDataType_t>{loomInt8, loomFloat64} : std::vector<loomDataType_t>{loomInt8},
                     {Op::Sum},
                     {7, 65537, 300007}};  // a block within one step, about a slot's 1/n, past a slot
  for (int n : kFull ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3}) {
    runMatrix(n, "shm", kFull ? full : slice, Buffers::LoomMemAlloc);
    runMatrix(n, "shm", moves, Buffers::LoomMemAlloc);
  }
}

TEST(CollectivesOnLoomMemAlloc, StagedWhenSingleCopyIsOff) {
  ScopedEnv staged("LOOM_SHM_SINGLE_COPY", "0");
  const Matrix full{{Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce},
                    {loomInt8, loomBfloat16, loomFloat64},
                    {Op::Sum, Op::Avg},
                    {(1u << 16) + 3, 300007}};
  const Matrix slice{{Coll::AllReduce, Coll::AllGather, Coll::Reduce}, {loomInt8}, {Op::Sum}, {300007}};
  const Matrix moves{{Coll::AlltoAll, Coll::Gather, Coll::Scatter}, {loomInt8}, {Op::Sum}, {300007}};
  for (int n : kFull ? std::vector<int>{2, 3} : std::vector<int>{2}) {
    runMatrix(n, "shm", kFull ? full : slice, Buffers::LoomMemAlloc);
    runMatrix(n, "shm", moves, Buffers::LoomMemAlloc);
  }
}

// Device buffers (a CUDA device's, or the fake device's where there is
// none) run every collective through pinned host copies: every type and op,
// in place and out, on one to four ranks, and ranks that mix device and host
// memory in one call. Sends and receives: DeviceP2p.
// The fake device's memory is host memory too: its copies' count shows that
// the calls took the staged path (a GPU's memory shows it by itself).
void expectStaged(uint64_t before) {
  if (std::string(deviceMemoryKind()) == "fake") {
    EXPECT_GT(cuda::fakeBytesStaged(), before);
  }
}

TEST(CollectivesOnDeviceMemory, AreExactForEveryCollectiveTypeAndOp) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  // 1 Mi + 3 elements of every type on a GPU; on the fake device, which only
  // runs the host-side logic, fewer and smaller cases keep CI's time.
  const bool gpu = std::string(deviceMemoryKind()) == "cuda";
  const std::vector<size_t> counts{0, 1, 7, gpu && kFull ? (1u << 20) + 3 : 1023u};
  const auto types = gpu && kFull ? kAllTypes : kSomeTypes;
  for (int n : {1, 2, 3, 4}) {
    const uint64_t before = cuda::fakeBytesStaged();
    runMatrix(n, "", {{Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter}, types, kAllOps, counts}, Buffers::Device);
    runMatrix(n, "", {{Coll::Broadcast, Coll::AllGather, Coll::AlltoAll, Coll::Gather, Coll::Scatter}, types, {Op::Sum}, counts},
              Buffers::Device);
    expectStaged(before);
  }
}

TEST(CollectivesOnDeviceMemory, RanksMayMixDeviceAndHostMemory) {
  SCOPED_TRACE(std::string("device memory: ") + deviceMemoryKind());
  for (int n : {2, 3}) {
    const uint64_t before = cuda::fakeBytesStaged();
    runMatrix(n, "", {kAllColls, {loomInt32, loomBfloat16}, {Op::Sum, Op::Avg}, {0, 7, 65537}}, Buffers::DeviceOnEvenRanks);
    expectStaged(before);
  }
}

// The reference itself: it must see one wrong element, and data moved by a
// whole number of periods of a simple pattern (here 8 elements).
TEST(CollectiveCheck, SeesOneWrongElementAndShiftedData) {
  for (Coll coll : {Coll::AllReduce, Coll::AllGather}) {
    const Case c{coll, loomInt32, Op::Sum, 3, 1, 0, 1000};
    std::vector<std::byte> right(recvElements(c) * sizeof(int32_t));
    // The right answer, built as the collective would: each rank's input, folded or placed.
    std::vector<std::vector<std::byte>> inputs(3, std::vector<std::byte>(sendElements(c) * sizeof(int32_t)));
    for (int r = 0; r < 3; ++r) fillSend(Case{coll, loomInt32, Op::Sum, 3, r, 0, 1000}, inputs[static_cast<size_t>(r)].data());
    for (size_t e = 0; e < recvElements(c); ++e) {
      int32_t v = 0;
      if (coll == Coll::AllReduce) {
        for (const auto& in : inputs) v += reinterpret_cast<const int32_t*>(in.data())[e];
      } else {
        v = reinterpret_cast<const int32_t*>(inputs[e / c.count].data())[e % c.count];
      }
      std::memcpy(right.data() + e * sizeof v, &v, sizeof v);
    }
    EXPECT_EQ(checkResult(c, right.data()), "") << collName(coll);

    auto wrong = right;
    reinterpret_cast<int32_t*>(wrong.data())[517] += 1;
    EXPECT_EQ(wrongElements(c, wrong.data()), 1u) << collName(coll);

    auto shifted = right;
    std::memmove(shifted.data() + 8 * sizeof(int32_t), right.data(), right.size() - 8 * sizeof(int32_t));
    EXPECT_GT(wrongElements(c, shifted.data()), recvElements(c) / 2) << collName(coll);
  }
}

}  // namespace
}  // namespace loom::test
