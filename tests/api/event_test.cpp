// Events on host streams (loomEventCreate and friends): a point recorded on
// a stream whose collective cannot finish yet (its peer has not called) is
// in progress, by the stream's order and not by timing; a stream told to
// wait for it waits; the peer's call lets both through. Recording again
// marks a new point, an event may go before its point is reached, and bad
// handles are named.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <loom/loom.hpp>

#include <string>
#include <thread>
#include <vector>

#include "tests/support/ranks.hpp"

namespace {

using loom::test::destroyAll;
using loom::test::initThreadComms;

std::string lastError() { return loomGetLastError(nullptr); }

TEST(Events, APointWaitsForTheStreamsWorkAndAnotherStreamWaitsForIt) {
  auto comms = initThreadComms(2);
  std::vector<int32_t> mine{1, 2, 3}, theirs{10, 20, 30};
  loomStream_t busy = nullptr, after = nullptr;
  loomEvent_t reduced = nullptr, followed = nullptr;
  ASSERT_EQ(loomStreamCreate(&busy), loomSuccess);
  ASSERT_EQ(loomStreamCreate(&after), loomSuccess);
  ASSERT_EQ(loomEventCreate(&reduced), loomSuccess);
  ASSERT_EQ(loomEventCreate(&followed), loomSuccess);
  EXPECT_EQ(loomEventQuery(reduced), loomSuccess);  // nothing recorded: nothing to wait for
  // Rank 0's all-reduce cannot finish before rank 1 calls.
  ASSERT_EQ(loomAllReduce(mine.data(), mine.data(), 3, loomInt32, loomSum, comms[0], busy), loomSuccess);
  ASSERT_EQ(loomEventRecord(reduced, busy), loomSuccess);
  EXPECT_EQ(loomEventQuery(reduced), loomInProgress);
  ASSERT_EQ(loomStreamWaitEvent(after, reduced), loomSuccess);
  ASSERT_EQ(loomEventRecord(followed, after), loomSuccess);
  EXPECT_EQ(loomEventQuery(followed), loomInProgress);  // `after` waits for `busy`
  std::thread peer([&] {
    EXPECT_EQ(loomAllReduce(theirs.data(), theirs.data(), 3, loomInt32, loomSum, comms[1], nullptr), loomSuccess);
  });
  EXPECT_EQ(loomEventSynchronize(followed), loomSuccess);
  EXPECT_EQ(loomEventQuery(reduced), loomSuccess);  // `followed` came after it
  EXPECT_EQ(mine, (std::vector<int32_t>{11, 22, 33}));
  peer.join();
  EXPECT_EQ(loomStreamSynchronize(busy), loomSuccess);
  EXPECT_EQ(loomEventDestroy(reduced), loomSuccess);
  EXPECT_EQ(loomEventDestroy(followed), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(busy), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(after), loomSuccess);
  destroyAll(comms);
}

// Recording again forgets the older point (CUDA's rule): recorded on a
// blocking stream, the event is done while the earlier point still waits;
// and an event destroyed before its point is reached goes quietly.
TEST(Events, RecordingAgainMarksTheNewPointAndAPendingEventMayGo) {
  auto comms = initThreadComms(2);
  std::vector<float> mine{1}, theirs{2};
  loomStream_t busy = nullptr;
  loomEvent_t event = nullptr, dropped = nullptr;
  ASSERT_EQ(loomStreamCreate(&busy), loomSuccess);
  ASSERT_EQ(loomEventCreate(&event), loomSuccess);
  ASSERT_EQ(loomEventCreate(&dropped), loomSuccess);
  ASSERT_EQ(loomAllReduce(mine.data(), mine.data(), 1, loomFloat32, loomSum, comms[0], busy), loomSuccess);
  ASSERT_EQ(loomEventRecord(event, busy), loomSuccess);
  ASSERT_EQ(loomEventRecord(dropped, busy), loomSuccess);
  EXPECT_EQ(loomEventQuery(event), loomInProgress);
  ASSERT_EQ(loomEventRecord(event, nullptr), loomSuccess);  // a blocking stream: reached at once
  EXPECT_EQ(loomEventQuery(event), loomSuccess);
  EXPECT_EQ(loomEventSynchronize(event), loomSuccess);
  EXPECT_EQ(loomEventDestroy(dropped), loomSuccess);  // its point is still ahead on `busy`
  EXPECT_EQ(loomAllReduce(theirs.data(), theirs.data(), 1, loomFloat32, loomSum, comms[1], nullptr), loomSuccess);
  EXPECT_EQ(loomStreamSynchronize(busy), loomSuccess);
  EXPECT_EQ(mine[0], 3.0f);
  EXPECT_EQ(loomEventDestroy(event), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(busy), loomSuccess);
  destroyAll(comms);
}

TEST(Events, BadHandlesAreNamed) {
  loomEvent_t event = nullptr;
  EXPECT_EQ(loomEventCreate(nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("event"), std::string::npos) << lastError();
  ASSERT_EQ(loomEventCreate(&event), loomSuccess);
  int notAStream = 0;
  EXPECT_EQ(loomEventRecord(event, reinterpret_cast<loomStream_t>(&notAStream)), loomInvalidArgument);
  EXPECT_NE(lastError().find("stream"), std::string::npos) << lastError();
  EXPECT_EQ(loomStreamWaitEvent(nullptr, event), loomInvalidArgument);
  EXPECT_NE(lastError().find("stream"), std::string::npos) << lastError();
  EXPECT_EQ(loomEventQuery(nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("event is not a live loom event"), std::string::npos) << lastError();
  EXPECT_EQ(loomEventDestroy(event), loomSuccess);
  EXPECT_EQ(loomEventSynchronize(event), loomInvalidArgument);  // destroyed
  EXPECT_EQ(loomEventDestroy(event), loomInvalidArgument);
}

// <loom/loom.hpp>: Event, and Stream::wait.
TEST(Events, TheCppInterface) {
  auto comms = loom::Comm::all(2);
  std::vector<double> mine{1.5}, theirs{2.5};
  loom::Stream busy, after;
  loom::Event reduced, followed;
  comms[0].allReduce(std::span(mine), std::span(mine), loomSum, &busy);
  reduced.record(busy);
  after.wait(reduced);
  followed.record(after);
  EXPECT_FALSE(reduced.done());
  EXPECT_FALSE(followed.done());
  comms[1].allReduce(std::span(theirs), std::span(theirs));
  followed.synchronize();
  EXPECT_TRUE(reduced.done());
  EXPECT_EQ(mine[0], 4.0);
}

}  // namespace
