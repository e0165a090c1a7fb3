// Point-to-point between ranks that are threads of this process, over both
// transports: every dtype and the awkward counts, groups, host streams,
// mismatches, bad arguments, deadlines and abort.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/datatype.hpp"
#include "comm/communicator.hpp"
#include "comm/engine/engine.hpp"
#include "tests/support/pattern.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/transports.hpp"

using loom::test::firstMismatch;
using loom::test::fillPattern;
using loom::test::messageSeed;
using loom::test::onThreads;
using loom::test::ScopedEnv;
using namespace std::chrono_literals;

namespace {

constexpr loomDataType_t kTypes[] = {loomInt8,  loomUint8,   loomInt32,   loomUint32,  loomInt64,
                                     loomUint64, loomFloat16, loomBfloat16, loomFloat32, loomFloat64};

class P2p : public ::testing::TestWithParam<const char*> {
 protected:
  loom::test::TransportScope transport_{GetParam()};
  ScopedEnv smallFifo_{"LOOM_BUFFSIZE", "262144"};  // 8 slots of 32 KiB: big messages pipeline
};

// Rank 0 and 1 exchange a message of `count` elements each way, at an odd offset.
void exchange(std::vector<loomComm_t>& comms, loomDataType_t type, size_t count, uint64_t index) {
  onThreads(2, [&](int r) {
    const int peer = 1 - r;
    const size_t bytes = count * loom::datatypeSize(type);
    std::vector<std::byte> out(bytes + 3), in(bytes + 3);
    auto sendView = std::span(out).subspan(1, bytes);  // unaligned on purpose
    auto recvView = std::span(in).subspan(3, bytes);
    fillPattern(sendView, messageSeed(r, peer, index));
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomSend(sendView.data(), count, type, peer, comms[r], nullptr), loomSuccess);
    ASSERT_EQ(loomRecv(recvView.data(), count, type, peer, comms[r], nullptr), loomSuccess);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
    EXPECT_EQ(firstMismatch(recvView, messageSeed(peer, r, index)), -1) << "type " << type << " count " << count;
  });
}

TEST_P(P2p, EveryDtypeAndAwkwardCountsArriveExactly) {
  auto comms = loom::test::initThreadComms(2);
  uint64_t index = 0;
  for (auto type : kTypes) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, (size_t{1} << 20) + 3}) {
      exchange(comms, type, count, index++);
    }
  }
  loom::test::destroyAll(comms);
}

TEST_P(P2p, SendToSelfInsideAGroup) {
  auto comms = loom::test::initThreadComms(1);
  std::vector<std::byte> out(100000), in(100000);
  fillPattern(out, 7);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomSend(out.data(), out.size(), loomUint8, 0, comms[0], nullptr), loomSuccess);
  ASSERT_EQ(loomRecv(in.data(), in.size(), loomUint8, 0, comms[0], nullptr), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(firstMismatch(in, 7), -1);
  loom::test::destroyAll(comms);
}

// Sends to itself that pair with its receives from itself in one group are
// one copy each, as NCCL makes them, with no connection to itself (whose
// FIFO would carry each message in slots, copied twice; the engine opens one
// for the first message it carries there): of every size, on a rank of a
// larger communicator too, in place as well.
TEST_P(P2p, SendsToSelfInAGroupAreCopiesOverNoConnection) {
  for (const int n : {1, 2}) {
    auto comms = loom::test::initThreadComms(n);
    onThreads(n, [&](int r) {
      const std::vector<size_t> sizes = {0, 1, 4097, (size_t{5} << 20) + 3};  // the last past the FIFO
      std::vector<std::vector<std::byte>> out, in;
      for (size_t i = 0; i < sizes.size(); ++i) {
        out.emplace_back(sizes[i]);
        in.emplace_back(sizes[i]);
        fillPattern(out.back(), messageSeed(r, r, i));
      }
      std::vector<std::byte> both(333);
      fillPattern(both, messageSeed(r, r, 99));
      ASSERT_EQ(loomGroupStart(), loomSuccess);
      for (size_t i = 0; i < sizes.size(); ++i) {  // sends, then receives: paired in order
        ASSERT_EQ(loomSend(out[i].data(), sizes[i], loomUint8, r, comms[r], nullptr), loomSuccess);
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_EQ(loomRecv(in[i].data(), sizes[i], loomUint8, r, comms[r], nullptr), loomSuccess);
      }
      ASSERT_EQ(loomSend(both.data(), both.size(), loomUint8, r, comms[r], nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(both.data(), both.size(), loomUint8, r, comms[r], nullptr), loomSuccess);
      ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[r]);
      for (size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(firstMismatch(in[i], messageSeed(r, r, i)), -1) << n << " ranks, rank " << r << ", " << sizes[i] << " bytes";
      }
      EXPECT_EQ(firstMismatch(both, messageSeed(r, r, 99)), -1) << "in place";
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(static_cast<loom::Communicator&>(*comms[static_cast<size_t>(r)]).engine().quietWithSelf())
          << n << " ranks, rank " << r << ": a connection to itself was opened";
    }
    loom::test::destroyAll(comms);
  }
}

// A send to itself made alone travels on the rank's connection to itself
// and waits there for its receive; a later group's sends to itself then
// queue behind it, as the engine matches them, and are not copied ahead of
// it: the group's receive gets the first message, the next receive the
// group's.
TEST_P(P2p, ASendToSelfAloneStaysFirstInLine) {
  auto comms = loom::test::initThreadComms(1);
  int32_t first = 11, second = 22, x = 0, y = 0;
  ASSERT_EQ(loomSend(&first, 1, loomInt32, 0, comms[0], nullptr), loomSuccess) << loomGetLastError(comms[0]);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomSend(&second, 1, loomInt32, 0, comms[0], nullptr), loomSuccess);
  ASSERT_EQ(loomRecv(&x, 1, loomInt32, 0, comms[0], nullptr), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(comms[0]);
  ASSERT_EQ(loomRecv(&y, 1, loomInt32, 0, comms[0], nullptr), loomSuccess) << loomGetLastError(comms[0]);
  EXPECT_EQ(x, 11);
  EXPECT_EQ(y, 22);
  loom::test::destroyAll(comms);
}

TEST_P(P2p, RingExchangeOfEightRanksInAGroup) {
  constexpr int n = 8;
  auto comms = loom::test::initThreadComms(n);
  constexpr size_t bytes = 1 << 20;  // 4x the FIFO: only a grouped exchange avoids deadlock
  onThreads(n, [&](int r) {
    std::vector<std::byte> out(bytes), in(bytes);
    for (uint64_t iter = 0; iter < 3; ++iter) {
      fillPattern(out, messageSeed(r, (r + 1) % n, iter));
      ASSERT_EQ(loomGroupStart(), loomSuccess);
      ASSERT_EQ(loomSend(out.data(), bytes, loomUint8, (r + 1) % n, comms[r], nullptr), loomSuccess);
      ASSERT_EQ(loomRecv(in.data(), bytes, loomUint8, (r + n - 1) % n, comms[r], nullptr), loomSuccess);
      ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
      EXPECT_EQ(firstMismatch(in, messageSeed((r + n - 1) % n, r, iter)), -1);
    }
  });
  loom::test::destroyAll(comms);
}

TEST_P(P2p, ThousandsOfSmallMessagesBothWaysAtOnce) {
  auto comms = loom::test::initThreadComms(2);
  constexpr int messages = 3000;
  onThreads(2, [&](int r) {
    const int peer = 1 - r;
    loomStream_t sends = nullptr, recvs = nullptr;
    ASSERT_EQ(loomStreamCreate(&sends), loomSuccess);
    ASSERT_EQ(loomStreamCreate(&recvs), loomSuccess);
    std::vector<uint64_t> out(messages), in(messages, 0);
    for (int i = 0; i < messages; ++i) {
      out[i] = messageSeed(r, peer, static_cast<uint64_t>(i));
      ASSERT_EQ(loomSend(&out[i], 1, loomUint64, peer, comms[r], sends), loomSuccess);
      ASSERT_EQ(loomRecv(&in[i], 1, loomUint64, peer, comms[r], recvs), loomSuccess);
    }
    EXPECT_EQ(loomStreamSynchronize(sends), loomSuccess) << loomGetLastError(nullptr);
    EXPECT_EQ(loomStreamSynchronize(recvs), loomSuccess) << loomGetLastError(nullptr);
    for (int i = 0; i < messages; ++i) ASSERT_EQ(in[i], messageSeed(peer, r, static_cast<uint64_t>(i))) << i;
    EXPECT_EQ(loomStreamDestroy(sends), loomSuccess);
    EXPECT_EQ(loomStreamDestroy(recvs), loomSuccess);
  });
  loom::test::destroyAll(comms);
}

TEST_P(P2p, AStreamSendReturnsBeforeTheReceiverPosts) {
  auto comms = loom::test::initThreadComms(2);
  std::vector<std::byte> out(3 << 20), in(3 << 20);
  fillPattern(out, 11);
  loomStream_t stream = nullptr;
  ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
  ASSERT_EQ(loomSend(out.data(), out.size(), loomUint8, 1, comms[0], stream), loomSuccess);  // does not block
  ASSERT_EQ(loomRecv(in.data(), in.size(), loomUint8, 0, comms[1], nullptr), loomSuccess);
  EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);
  EXPECT_EQ(firstMismatch(in, 11), -1);
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  loom::test::destroyAll(comms);
}

TEST_P(P2p, MismatchedSizesAreAnErrorNamingBoth) {
  auto comms = loom::test::initThreadComms(2);
  std::vector<int32_t> out(10), in(12);
  std::string message;
  onThreads(2, [&](int r) {
    if (r == 0) {
      EXPECT_EQ(loomSend(out.data(), 10, loomInt32, 1, comms[0], nullptr), loomSuccess);
    } else {
      EXPECT_EQ(loomRecv(in.data(), 12, loomInt32, 0, comms[1], nullptr), loomInvalidUsage);
      message = loomGetLastError(comms[1]);
    }
  });
  EXPECT_NE(message.find("48 bytes from rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("sent a 40-byte point-to-point message where this rank expects a 48-byte"), std::string::npos)
      << message;
  loom::test::destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Transports, P2p, ::testing::ValuesIn(loom::test::threadTransportsUnderTest()),
                         loom::test::transportName);

TEST(P2pErrors, BadArgumentsAreNamed) {
  auto comms = loom::test::initThreadComms(1);
  int x = 0;
  auto expectNamed = [&](loomResult_t result, const char* name) {
    EXPECT_EQ(result, loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comms[0])).find(name), std::string::npos) << loomGetLastError(comms[0]);
  };
  expectNamed(loomSend(nullptr, 1, loomInt32, 0, comms[0], nullptr), "sendbuff is NULL");
  expectNamed(loomRecv(nullptr, 1, loomInt32, 0, comms[0], nullptr), "recvbuff is NULL");
  expectNamed(loomSend(&x, 1, loomInt32, 1, comms[0], nullptr), "peer=1");
  expectNamed(loomSend(&x, 1, loomInt32, -1, comms[0], nullptr), "peer=-1");
  expectNamed(loomSend(&x, 1, static_cast<loomDataType_t>(42), 0, comms[0], nullptr), "datatype=42");
  expectNamed(loomSend(&x, SIZE_MAX / 2, loomInt32, 0, comms[0], nullptr), "count=");
  expectNamed(loomSend(&x, 1, loomInt32, 0, comms[0], reinterpret_cast<loomStream_t>(&x)), "stream");
  EXPECT_EQ(loomSend(&x, 1, loomInt32, 0, nullptr, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage);
  EXPECT_EQ(loomStreamSynchronize(reinterpret_cast<loomStream_t>(&x)), loomInvalidArgument);
  EXPECT_EQ(loomStreamCreate(nullptr), loomInvalidArgument);
  loom::test::destroyAll(comms);
}

TEST(P2pErrors, ASilentPeerIsATimeoutNamingIt) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "1000");
  auto comms = loom::test::initThreadComms(2);
  int x = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(loomRecv(&x, 1, loomInt32, 1, comms[0], nullptr), loomTimeout);  // rank 1 never sends
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("from rank 1"), std::string::npos);
  // The connection is still good: a later exchange works.
  onThreads(2, [&](int r) {
    int v = r == 1 ? 42 : 0;
    if (r == 1) {
      EXPECT_EQ(loomSend(&v, 1, loomInt32, 0, comms[1], nullptr), loomSuccess);
    } else {
      EXPECT_EQ(loomRecv(&v, 1, loomInt32, 1, comms[0], nullptr), loomSuccess);
      EXPECT_EQ(v, 42);
    }
  });
  loom::test::destroyAll(comms);
}

TEST(P2pErrors, SendingToARankThatLeftFailsAtOnceNamingIt) {
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "20000");
  auto comms = loom::test::initThreadComms(2);
  ASSERT_EQ(loomCommDestroy(comms[1]), loomSuccess);  // its listener is gone
  comms[1] = nullptr;
  int x = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(loomSend(&x, 1, loomInt32, 1, comms[0], nullptr), loomRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("rank 1"), std::string::npos) << loomGetLastError(comms[0]);
  loom::test::destroyAll(comms);
}

TEST(P2pErrors, AbortUnblocksAWaitingReceive) {
  auto comms = loom::test::initThreadComms(2);
  loomResult_t result = loomSuccess;
  std::thread waiter([&] {
    int x = 0;
    result = loomRecv(&x, 1, loomInt32, 1, comms[0], nullptr);
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(loom::test::abortOnceInside(comms[0]), loomSuccess);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // the default deadline is far longer
  EXPECT_EQ(result, loomInvalidUsage);
  comms[0] = nullptr;
  loom::test::destroyAll(comms);
}

}  // namespace
