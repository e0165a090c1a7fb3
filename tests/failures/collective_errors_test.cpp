// Collectives given bad input, or run by ranks that disagree: a clear error
// naming the argument or the peer, never a crash or a hang.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "collectives/comm_state.hpp"
#include "tests/support/files.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/text_match.hpp"

namespace {

using loom::test::ScopedEnv;

// Confines this thread, and the threads it starts from now on, to its first CPU.
class OnOneCpu {
 public:
  OnOneCpu() {
    if (sched_getaffinity(0, sizeof all_, &all_) != 0) ADD_FAILURE() << "sched_getaffinity";
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &all_)) {
        CPU_SET(cpu, &one);
        break;
      }
    }
    if (sched_setaffinity(0, sizeof one, &one) != 0) ADD_FAILURE() << "sched_setaffinity";
  }
  ~OnOneCpu() { sched_setaffinity(0, sizeof all_, &all_); }
  OnOneCpu(const OnOneCpu&) = delete;
  OnOneCpu& operator=(const OnOneCpu&) = delete;

 private:
  cpu_set_t all_{};
};

void expectError(loomResult_t r, loomResult_t code, loomComm_t comm, const std::string& mentions) {
  EXPECT_EQ(r, code) << loomGetLastError(comm);
  std::string message = loomGetLastError(comm);
  EXPECT_NE(message.find(mentions), std::string::npos) << "'" << message << "' does not mention '" << mentions << "'";
}

void expectInvalid(loomResult_t r, loomComm_t comm, const std::string& mentions) {
  expectError(r, loomInvalidArgument, comm, mentions);
}

TEST(CollectiveErrors, BadArgumentsAreNamed) {
  auto comms = loom::test::initThreadComms(1);
  loomComm_t c = comms[0];
  std::vector<float> buf(16);
  float* p = buf.data();
  expectInvalid(loomAllReduce(nullptr, p, 4, loomFloat32, loomSum, c, nullptr), c, "sendbuff is NULL");
  expectInvalid(loomAllReduce(p, nullptr, 4, loomFloat32, loomSum, c, nullptr), c, "recvbuff is NULL");
  expectInvalid(loomAllReduce(p, p, 4, static_cast<loomDataType_t>(42), loomSum, c, nullptr), c, "datatype=42");
  expectInvalid(loomAllReduce(p, p, 4, loomFloat32, static_cast<loomRedOp_t>(9), c, nullptr), c, "op=9");
  expectInvalid(loomAllReduce(p, p, SIZE_MAX / 2, loomFloat32, loomSum, c, nullptr), c, "count");
  expectInvalid(loomAllGather(p, p, SIZE_MAX / 2, loomFloat32, c, nullptr), c, "count");
  expectInvalid(loomBroadcast(p, p, 4, loomFloat32, 1, c, nullptr), c, "root=1");
  expectInvalid(loomReduce(p, p, 4, loomFloat32, loomSum, -1, c, nullptr), c, "root=-1");
  expectInvalid(loomGather(p, p, 4, loomFloat32, 5, c, nullptr), c, "root=5");
  expectInvalid(loomScatter(p, p, 4, loomFloat32, 5, c, nullptr), c, "root=5");
  expectInvalid(loomAllReduce(p, p + 1, 4, loomFloat32, loomSum, c, nullptr), c, "overlap");
  expectInvalid(loomAlltoAll(p, p, 4, loomFloat32, c, nullptr), c, "overlap");
  expectInvalid(loomAllReduce(p, p, 4, loomFloat32, loomSum, c, reinterpret_cast<loomStream_t>(p)), c, "stream");
  expectInvalid(loomAllReduce(p, p, 4, loomFloat32, loomSum, nullptr, nullptr), nullptr, "comm is NULL");
  // count 0 needs no buffers at all.
  EXPECT_EQ(loomAllReduce(nullptr, nullptr, 0, loomFloat32, loomSum, c, nullptr), loomSuccess);
  EXPECT_EQ(loomBroadcast(nullptr, nullptr, 0, loomInt8, 0, c, nullptr), loomSuccess);
  loom::test::destroyAll(comms);
}

TEST(CollectiveErrors, LoomMemAllocNamesBadArguments) {
  void* p = nullptr;
  expectInvalid(loomMemAlloc(nullptr, 16), nullptr, "ptr is NULL");
  expectInvalid(loomMemAlloc(&p, 0), nullptr, "size is 0");
  int onTheStack = 0;
  expectInvalid(loomMemFree(&onTheStack), nullptr, "not returned by loomMemAlloc");
  ASSERT_EQ(loomMemAlloc(&p, 1000), loomSuccess);
  EXPECT_EQ(static_cast<unsigned char*>(p)[999], 0);  // zero-filled
  static_cast<unsigned char*>(p)[999] = 1;            // and writable
  EXPECT_EQ(loomMemFree(p), loomSuccess);
  expectInvalid(loomMemFree(p), nullptr, "not returned by loomMemAlloc or loomMemAllocDevice (or was freed)");
}

TEST(CollectiveErrors, PreMulSumOpsBelongToTheirCommunicatorAndDatatype) {
  auto a = loom::test::initThreadComms(1);
  auto b = loom::test::initThreadComms(1);
  float scalar = 2.0f;
  loomRedOp_t op;
  ASSERT_EQ(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, loomScalarHostImmediate, a[0]), loomSuccess);
  std::vector<float> in(8, 1.0f), out(8);  // room for 4 float64s too
  EXPECT_EQ(loomAllReduce(in.data(), out.data(), 4, loomFloat32, op, a[0], nullptr), loomSuccess);
  EXPECT_EQ(out[0], 2.0f);
  expectInvalid(loomAllReduce(in.data(), out.data(), 4, loomFloat32, op, b[0], nullptr), b[0], "another communicator");
  expectInvalid(loomAllReduce(in.data(), out.data(), 4, loomFloat64, op, a[0], nullptr), a[0], "datatype");
  expectInvalid(loomRedOpDestroy(loomSum, a[0]), a[0], "built-in");
  expectInvalid(loomRedOpCreatePreMulSum(&op, nullptr, loomFloat32, loomScalarDevice, a[0]), a[0], "scalar is NULL");
  expectInvalid(loomRedOpCreatePreMulSum(&op, &scalar, loomFloat32, static_cast<loomScalarResidence_t>(7), a[0]), a[0],
                "residence=7");
  ASSERT_EQ(loomRedOpDestroy(op, a[0]), loomSuccess);
  expectInvalid(loomAllReduce(in.data(), out.data(), 4, loomFloat32, op, a[0], nullptr), a[0], "destroyed");
  expectInvalid(loomRedOpDestroy(op, a[0]), a[0], "destroyed");
  loom::test::destroyAll(a);
  loom::test::destroyAll(b);
}

TEST(CollectiveErrors, BadLoomAlgoIsNamed) {
  for (const char* bad : {"allreduce:nosuch", "nosuch", "gather:ring", "everything:ring"}) {
    ScopedEnv e("LOOM_ALGO", bad);
    auto comms = loom::test::initThreadComms(1);
    float x = 1;
    expectInvalid(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), comms[0], "LOOM_ALGO");
    loom::test::destroyAll(comms);
  }
}

// Ranks that pass different counts fail where the mismatch shows, and the
// others by its notice: nobody hangs, nothing is reduced with garbage
// (mismatch_test covers every algorithm and kind of mismatch).
TEST(CollectiveErrors, MismatchedCountsFailInsteadOfCorrupting) {
  for (const char* algorithm : {"ring", "shm"}) {
    ScopedEnv algo("LOOM_ALGO", algorithm);
    auto comms = loom::test::initThreadComms(2);
    std::vector<loomResult_t> results(2);
    loom::test::onThreads(2, [&](int r) {
      std::vector<float> buf(64, 1.0f);
      results[static_cast<size_t>(r)] = loomAllReduce(buf.data(), buf.data(), r == 0 ? 64 : 32, loomFloat32, loomSum,
                                                      comms[static_cast<size_t>(r)], nullptr);
    });
    EXPECT_NE(results[0], loomSuccess) << algorithm;
    EXPECT_NE(results[1], loomSuccess) << algorithm;
    bool named = false;
    for (int r = 0; r < 2; ++r) {
      named |= std::string(loomGetLastError(comms[static_cast<size_t>(r)])).find("matching counts") != std::string::npos;
    }
    EXPECT_TRUE(named) << algorithm << ": " << loomGetLastError(comms[0]) << " / " << loomGetLastError(comms[1]);
    for (auto& c : comms) loomCommAbort(c);
  }
}

// LOOM_CHECK=1: ranks that call different collectives, counts, types, ops or
// roots all fail with the same message naming each group and its call, on
// any algorithm (here the shared segment, rings, direct); agreeing calls run.
TEST(CollectiveErrors, LoomCheckNamesRanksThatCallDifferentCollectives) {
  ScopedEnv check("LOOM_CHECK", "1");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "30000");
  using Call = std::function<loomResult_t(loomComm_t, std::vector<float>&)>;
  const Call allreduce100 = [](loomComm_t c, std::vector<float>& b) {
    return loomAllReduce(b.data(), b.data(), 100, loomFloat32, loomSum, c, nullptr);
  };
  struct Case {
    Call odd;  // what rank 1 calls while ranks 0 and 2 call allreduce100
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {[](loomComm_t c, std::vector<float>& b) { return loomAllReduce(b.data(), b.data(), 101, loomFloat32, loomSum, c, nullptr); },
       "ranks 0,2 called allreduce #1 of count 100 float32 sum; rank 1 called allreduce #1 of count 101 float32 sum"},
      {[](loomComm_t c, std::vector<float>& b) { return loomAllGather(b.data(), b.data() + 100, 100, loomFloat32, c, nullptr); },
       "rank 1 called allgather #1 of count 100 float32"},
      {[](loomComm_t c, std::vector<float>& b) { return loomAllReduce(b.data(), b.data(), 100, loomFloat32, loomMax, c, nullptr); },
       "rank 1 called allreduce #1 of count 100 float32 max"},
      {[](loomComm_t c, std::vector<float>& b) { return loomAllReduce(b.data(), b.data(), 100, loomInt32, loomSum, c, nullptr); },
       "rank 1 called allreduce #1 of count 100 int32 sum"}};
  for (const char* algorithm : {"shm", "ring", "direct"}) {
    ScopedEnv algo("LOOM_ALGO", algorithm);
    for (const Case& k : cases) {
      auto comms = loom::test::initThreadComms(3);
      std::vector<loomResult_t> results(3);
      loom::test::onThreads(3, [&](int r) {
        std::vector<float> buf(1000, 1.0f);
        loomComm_t comm = comms[static_cast<size_t>(r)];
        results[static_cast<size_t>(r)] = r == 1 ? k.odd(comm, buf) : allreduce100(comm, buf);
      });
      for (int r = 0; r < 3; ++r) {
        SCOPED_TRACE(std::string(algorithm) + ", rank " + std::to_string(r));
        expectError(results[static_cast<size_t>(r)], loomInvalidUsage, comms[static_cast<size_t>(r)], k.mentions);
      }
      loom::test::destroyAll(comms);
    }
    // Agreeing ranks are not disturbed, and the sequence numbers stay in step.
    auto comms = loom::test::initThreadComms(3);
    loom::test::onThreads(3, [&](int r) {
      std::vector<float> buf(1000, 1.0f);
      for (int i = 0; i < 3; ++i) EXPECT_EQ(allreduce100(comms[static_cast<size_t>(r)], buf), loomSuccess);
      EXPECT_EQ(buf[0], 27.0f);
    });
    loom::test::destroyAll(comms);
  }
  // A rooted collective whose root differs.
  auto comms = loom::test::initThreadComms(2);
  std::vector<loomResult_t> results(2);
  loom::test::onThreads(2, [&](int r) {
    std::vector<float> buf(10, 1.0f);
    results[static_cast<size_t>(r)] = loomBroadcast(buf.data(), buf.data(), 10, loomFloat32, r, comms[static_cast<size_t>(r)], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    expectError(results[static_cast<size_t>(r)], loomInvalidUsage, comms[static_cast<size_t>(r)],
                "rank 0 called broadcast #1 of count 10 float32 root 0; rank 1 called broadcast #1 of count 10 float32 root 1");
  }
  loom::test::destroyAll(comms);
}

// On the shared segment, a rank whose communicator goes away while the
// others wait for it fails them at once, naming it, instead of at the timeout.
TEST(CollectiveErrors, ARankThatLeavesTheSegmentFailsItsPeersAtOnce) {
  ScopedEnv algo("LOOM_ALGO", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  auto comms = loom::test::initThreadComms(2);
  loom::test::onThreads(2, [&](int r) {  // maps the segment on both
    float x = 1;
    EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr), loomSuccess);
  });
  const auto started = std::chrono::steady_clock::now();
  std::thread leaver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loomCommAbort(comms[1]);
    comms[1] = nullptr;
  });
  float x = 1;
  expectError(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), loomRemoteError, comms[0], "rank 1");
  leaver.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  loomCommAbort(comms[0]);
}

// Ranks as threads read each other's heap buffers in place. One that fails out
// of such a call (its owner may free its buffers as soon as it returns) first
// waits for a peer still reading them, and from then on its peers read
// nothing more of it: they fail naming it instead of reading freed memory.
TEST(CollectiveErrors, ARankFailingOutOfAnInPlaceCallWaitsForItsReaders) {
  namespace shm = loom::coll::shm;
  auto comms = loom::test::initThreadComms(2);
  std::vector<std::vector<float>> buffers(2, std::vector<float>(1024, 1.0f));
  std::vector<shm::NodeArea*> nodes(2);
  loom::test::onThreads(2, [&](int r) {  // both map the node's segment, and offer their buffers for one call
    auto& comm = static_cast<loom::Communicator&>(*comms[static_cast<size_t>(r)]);
    shm::NodeArea& node = loom::coll::CommState::of(comm).nodeArea(4096);
    nodes[static_cast<size_t>(r)] = &node;
    node.startCall({.sequence = 1, .bytes = 4096, .call = 1, .root = 0}, 4096);
    float* mine = buffers[static_cast<size_t>(r)].data();
    node.offerBuffers(mine, 4096, mine, 4096);
    node.arrive(node.nextStep(), "test call");
    EXPECT_NE(node.peerBuffers(), nullptr);
  });

  std::atomic<bool> inside{false}, doneReading{false};
  std::thread reader([&] {
    const shm::PeerReads reading(*nodes[0], "test call");
    inside = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a long read of rank 1's buffers
    doneReading = true;
  });
  while (!inside) std::this_thread::yield();
  nodes[1]->abandonCall();
  EXPECT_TRUE(doneReading) << "rank 1 returned while rank 0 still read its buffers";
  reader.join();
  try {
    const shm::PeerReads again(*nodes[0], "test call");
    ADD_FAILURE() << "rank 0 may read the buffers of rank 1, which failed out";
  } catch (const loom::Error& e) {
    EXPECT_EQ(e.code(), loomRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 1 failed out"), std::string::npos) << e.what();
  }
  loom::test::destroyAll(comms);
}

// The opposite case: a rank whose part is done may leave while a slower peer
// still reads what it sent. Rank 0 waits asleep (the rank it needs comes 20 ms
// late), and rank 1, alone on the one CPU this test allows, sends, finishes
// and destroys its communicator before rank 0 runs again: rank 0 must find
// rank 1's data, not a closed connection. Over each transport, on every
// algorithm that exchanges with the peer.
TEST(CollectiveErrors, ARankThatFinishesAndLeavesDoesNotFailASlowerPeer) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  OnOneCpu pinned;  // the ranks' threads, and the engines' they start, inherit it
  for (const char* transport : {"socket", "shm"}) {
    ScopedEnv only("LOOM_TRANSPORT", transport);
    for (const char* algorithm : {"allreduce:rd", "allreduce:ring", "allreduce:direct"}) {
      ScopedEnv algo("LOOM_ALGO", algorithm);
      for (int round = 0; round < 5; ++round) {
        SCOPED_TRACE(std::string(transport) + ", " + algorithm + ", round " + std::to_string(round));
        auto comms = loom::test::initThreadComms(2);
        loom::test::onThreads(2, [&](int r) {
          loomComm_t& comm = comms[static_cast<size_t>(r)];
          float x = 1;
          EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, nullptr), loomSuccess);  // connects
          if (r == 0) {
            const sched_param idle{};
            EXPECT_EQ(pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle), 0);
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          x = static_cast<float>(r + 1);
          EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, nullptr), loomSuccess) << loomGetLastError(comm);
          EXPECT_EQ(x, 3.0f);
          if (r == 1) {
            EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
            comm = nullptr;
          }
        });
        loom::test::destroyAll(comms);
      }
    }
  }
}

// On the node segment a small broadcast's root, and a gather's other ranks,
// return before their peers have read what they staged (NodeArea::depart):
// such a rank may destroy its communicator at once, and its slower peers
// must still find what it staged, not fail because it left.
TEST(CollectiveErrors, ARankThatStagedAndLeftDoesNotFailItsReaders) {
  ScopedEnv algo("LOOM_ALGO", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  for (const bool gather : {false, true}) {
    SCOPED_TRACE(gather ? "gather" : "broadcast");
    auto comms = loom::test::initThreadComms(3);
    std::atomic<int> left{0};  // the ranks that staged and destroyed their communicators
    const int leavers = gather ? 2 : 1;
    loom::test::onThreads(3, [&](int r) {
      loomComm_t& comm = comms[static_cast<size_t>(r)];
      int32_t x = 1;
      ASSERT_EQ(loomAllReduce(&x, &x, 1, loomInt32, loomSum, comm, nullptr), loomSuccess);  // maps the segment
      const bool leaves = gather ? r != 0 : r == 0;
      if (!leaves) {
        while (left.load() < leavers) std::this_thread::yield();  // they are gone before this rank reads
      }
      for (int call = 0; call < 3; ++call) {
        std::vector<int32_t> in(4, 10 * r + call), out(12, -1);
        const loomResult_t result =
            gather ? loomGather(in.data(), out.data(), 4, loomInt32, 0, comm, nullptr)
                   : loomBroadcast(in.data(), out.data(), 4, loomInt32, 0, comm, nullptr);
        EXPECT_EQ(result, loomSuccess) << "rank " << r << ", call " << call << ": " << loomGetLastError(comm);
        if (gather && r == 0) {
          for (int q = 0; q < 3; ++q) EXPECT_EQ(out[static_cast<size_t>(4 * q)], 10 * q + call) << "call " << call;
        } else if (!gather) {
          EXPECT_EQ(out[0], call) << "rank " << r << ", call " << call;
        }
      }
      if (leaves) {
        EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
        comm = nullptr;
        ++left;
      }
    });
    loom::test::destroyAll(comms);
  }
}

// A rank that never joins: the others get loomTimeout naming whom they waited for.
TEST(CollectiveErrors, AMissingRankTimesOutNamingIt) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1000");
  auto comms = loom::test::initThreadComms(2);
  float x = 1;
  expectError(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), loomTimeout, comms[0], "rank 1");
  for (auto& c : comms) loomCommAbort(c);
}

// The error names the call as the ranks number it, after a change of
// collective and across a carry (collectives/call_name counts in place): an
// all-gather and eighteen all-reduces on the node segment, then a twentieth
// call that rank 1 never makes.
TEST(CollectiveErrors, ATimeoutNamesTheCallByItsNumber) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1000");
  ScopedEnv algo("LOOM_ALGO", "shm");
  auto comms = loom::test::initThreadComms(2);
  loom::test::onThreads(2, [&](int r) {
    loomComm_t comm = comms[static_cast<size_t>(r)];
    float x = 1;
    float gathered[2] = {};
    for (int call = 1; call <= 19; ++call) {
      const loomResult_t result = call == 1 ? loomAllGather(&x, gathered, 1, loomFloat32, comm, nullptr)
                                            : loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, nullptr);
      ASSERT_EQ(result, loomSuccess) << "rank " << r << ", call " << call << ": " << loomGetLastError(comm);
    }
  });
  float x = 1;
  expectError(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[0], nullptr), loomTimeout, comms[0],
              "allreduce #20: rank 1");
  for (auto& c : comms) loomCommAbort(c);
}

// A small broadcast's root runs ahead of its receivers through its arrival
// lines (shm/node_area.hpp) and waits for them only when it comes back to
// a line one has not read: there it names the call that receiver never
// reached, not the one it is in. Rank 1 makes two broadcasts, rank 0 goes
// on alone: calls #3 onwards return at once until it needs call #3's line
// again, which times out naming broadcast #3 and rank 1.
TEST(CollectiveErrors, ARootThatRanAheadNamesTheCallItsReceiverNeverReached) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1000");
  ScopedEnv algo("LOOM_ALGO", "shm");
  auto comms = loom::test::initThreadComms(2);
  loom::test::onThreads(2, [&](int r) {
    char x[8] = {};
    for (int call = 1; call <= 2; ++call) {
      ASSERT_EQ(loomBroadcast(x, x, sizeof x, loomInt8, 0, comms[static_cast<size_t>(r)], nullptr), loomSuccess)
          << "rank " << r << ", call " << call << ": " << loomGetLastError(comms[static_cast<size_t>(r)]);
    }
  });
  char x[8] = {};
  int call = 3;
  loomResult_t result = loomSuccess;
  for (; call <= 200 && result == loomSuccess; ++call) result = loomBroadcast(x, x, sizeof x, loomInt8, 0, comms[0], nullptr);
  EXPECT_GT(call, 40) << "the root waited for its receiver before it needed a line again";
  expectError(result, loomTimeout, comms[0], "broadcast #3 (int8, root 0): rank 1");
  for (auto& c : comms) loomCommAbort(c);
}

// The flight recorder: rank 0 runs three all-reduces, rank 1 only two. Rank
// 0's third times out, and its record (JSON, LOOM_FLIGHT_RECORDER_FILE with
// %r) shows #1 and #2 done on the tuner's algorithm and #3 failed with the
// timeout's message; rank 1, which failed nothing, wrote nothing.
TEST(CollectiveErrors, FlightRecorderKeepsWhatRanBeforeAFailure) {
  const std::string pattern = ::testing::TempDir() + "loom-flight-" + std::to_string(::getpid()) + ".%r.json";
  auto path = [&](int r) { return ::testing::TempDir() + "loom-flight-" + std::to_string(::getpid()) + "." + std::to_string(r) + ".json"; };
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1000");
  ScopedEnv file("LOOM_FLIGHT_RECORDER_FILE", pattern);
  auto comms = loom::test::initThreadComms(2);
  loom::test::onThreads(2, [&](int r) {
    std::vector<float> x(256, 1.0f);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(loomAllReduce(x.data(), x.data(), x.size(), loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr),
                loomSuccess);
    }
  });
  float y = 1;
  expectError(loomAllReduce(&y, &y, 1, loomFloat32, loomSum, comms[0], nullptr), loomTimeout, comms[0], "rank 1");
  const std::string json = loom::test::readFile(path(0));
  EXPECT_NE(json.find("\"rank\": 0"), std::string::npos) << json;
  const std::string entry(R"re("sequence": ([0-9]+),\s*"collective": "allreduce",\s*"count": ([0-9]+),\s*"datatype": "float32",\s*"algorithm": "([a-z]+)",\s*"state": "([a-z]+)")re");
  std::vector<std::string> seen;
  for (const auto& m : loom::test::searchAll(json, entry)) {
    seen.push_back(m[1] + " " + m[2] + " " + m[4]);
    EXPECT_NE(m[3], "-") << m.str();
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"1 256 done", "2 256 done", "3 1 failed"})) << json;
  EXPECT_NE(json.find("\"error\": \""), std::string::npos) << json;
  // Rank 0's survey, by rank: where it failed, and that rank 1 never came to #3.
  const std::string survey(R"re("survey": \[\s*"idle after allreduce #3 \(failed [0-9]+ ms ago\)",\s*"idle after allreduce #2 \(done [0-9]+ ms ago\)"\s*\])re");
  EXPECT_TRUE(loom::test::contains(json, survey)) << json;
  EXPECT_FALSE(std::ifstream(path(1)).good()) << "rank 1 failed nothing";
  std::remove(path(0).c_str());
  for (auto& c : comms) loomCommAbort(c);
}

// loomCommAbort from another thread ends a collective waiting for a rank that
// never joins, long before its deadline.
TEST(CollectiveErrors, AbortFromAnotherThreadEndsAWaitingCollective) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  auto comms = loom::test::initThreadComms(2);
  const auto started = std::chrono::steady_clock::now();
  loomResult_t result = loomSuccess;
  std::thread waiter([&] {
    std::vector<float> big(1 << 20, 1.0f);
    result = loomAllReduce(big.data(), big.data(), big.size(), loomFloat32, loomSum, comms[1], nullptr);
  });
  EXPECT_EQ(loom::test::abortOnceInside(comms[1]), loomSuccess);
  waiter.join();
  EXPECT_EQ(result, loomInvalidUsage);
  // Generous for a loaded machine, yet far below the 60 s deadline: only the abort can have ended it.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  loomCommAbort(comms[0]);
}

}  // namespace
