// Ranks that disagree about a collective, with LOOM_CHECK unset: another
// count, another collective, another datatype (of another size or the same),
// another root. Over shared memory and sockets, on every algorithm that
// applies, every rank must end with loomInvalidUsage naming a peer, within a
// bound far below LOOM_TIMEOUT_MS: no rank waits out its deadline. A rank
// whose part needed nothing from the others (a broadcast's root) may finish
// first; it learns of the mismatch by the notice its peers send
// (loomCommGetAsyncError), and its next call fails.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/ranks.hpp"
#include "tests/support/text_match.hpp"
#include "tests/support/transports.hpp"
#include "tools/check/collective_call.hpp"

namespace {

using loom::check::Case;
using loom::check::Coll;
using loom::test::ScopedEnv;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;
constexpr int kOdd = 1;  // the rank that calls something else
// Far below the deadline (LOOM_TIMEOUT_MS below) and far above what a
// mismatch costs (a few ms, more under the sanitizers): a rank that took
// this long waited for its deadline.
constexpr auto kFailsWithin = std::chrono::seconds(5);

struct Mismatch {
  const char* what;
  Case agreed;  // what every other rank calls (rank and nranks filled in per rank)
  Case odd;
};

Case make(Coll coll, size_t count, loomDataType_t type = loomFloat32, int root = 0) {
  return {coll, type, loom::check::Op::Sum, kRanks, 0, root, count};
}

// What the other ranks and rank 1 call, for a collective that `algorithm` runs.
std::vector<Mismatch> mismatchesOf(Coll coll, Coll other) {
  std::vector<Mismatch> m = {
      {"count", make(coll, 1000), make(coll, 600)},
      {"datatype size", make(coll, 1000, loomFloat32), make(coll, 1000, loomFloat64)},
      {"datatype", make(coll, 1000, loomFloat32), make(coll, 1000, loomInt32)},
  };
  if (other != coll) m.push_back({"collective", make(coll, 1000), make(other, 1000)});
  if (coll == Coll::Broadcast || coll == Coll::Reduce || coll == Coll::Gather || coll == Coll::Scatter) {
    m.push_back({"root", make(coll, 1000, loomFloat32, 0), make(coll, 1000, loomFloat32, 2)});
  }
  return m;
}

// Whether `comm` knows within kFailsWithin that the ranks are out of step.
bool learnsOfIt(loomComm_t comm) {
  const auto until = Clock::now() + kFailsWithin;
  loomResult_t state = loomSuccess;
  while (Clock::now() < until) {
    if (loomCommGetAsyncError(comm, &state) == loomSuccess && state == loomInvalidUsage) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void expectEveryRankFailsFast(const Mismatch& m, const std::string& where) {
  auto comms = loom::test::initThreadComms(kRanks);
  std::vector<loomResult_t> results(kRanks);
  std::vector<Clock::duration> took(kRanks);
  std::vector<std::string> messages(kRanks);
  loom::test::onThreads(kRanks, [&](int r) {
    Case c = r == kOdd ? m.odd : m.agreed;
    c.rank = r;
    std::vector<std::byte> send(loom::check::sendElements(c) * 8 + 64), recv(loom::check::recvElements(c) * 8 + 64);
    loomComm_t comm = comms[static_cast<size_t>(r)];
    const auto start = Clock::now();
    const bool pair = c.coll == Coll::SendRecv;
    if (pair) loomGroupStart();
    loomResult_t result = loom::check::callCollective(c, send.data(), recv.data(), loomSum, comm, nullptr);
    if (pair && loomGroupEnd() != loomSuccess && result == loomSuccess) result = loomInvalidUsage;
    took[static_cast<size_t>(r)] = Clock::now() - start;
    results[static_cast<size_t>(r)] = result;
    messages[static_cast<size_t>(r)] = loomGetLastError(comm);
  });
  const std::string namesAPeer("rank [0-9]+ (sent|called|found|is in|finished)");
  for (int r = 0; r < kRanks; ++r) {
    const auto i = static_cast<size_t>(r);
    SCOPED_TRACE(where + ", " + m.what + " mismatch, rank " + std::to_string(r));
    EXPECT_LT(took[i], kFailsWithin) << messages[i];
    if (results[i] == loomSuccess) {
      EXPECT_TRUE(learnsOfIt(comms[i])) << "rank " << r << " finished and was never told";
      continue;
    }
    EXPECT_EQ(results[i], loomInvalidUsage) << messages[i];
    EXPECT_TRUE(loom::test::contains(messages[i], namesAPeer)) << messages[i];
  }
  // Nobody may go on: the connections hold the other call's data.
  for (int r = 0; r < kRanks; ++r) {
    float x = 1;
    EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr),
              loomInvalidUsage);
  }
  loom::test::destroyAll(comms);
}

struct Algorithm {
  const char* name;
  std::vector<std::pair<Coll, Coll>> runs;  // a collective it runs, and another it runs
};

const std::vector<Algorithm> kAlgorithms = {
    {"ring",
     {{Coll::AllReduce, Coll::AllGather},
      {Coll::AllGather, Coll::ReduceScatter},
      {Coll::ReduceScatter, Coll::AllReduce},
      {Coll::Broadcast, Coll::Reduce},
      {Coll::Reduce, Coll::Broadcast}}},
    {"rd", {{Coll::AllReduce, Coll::AllReduce}}},
    {"tree", {{Coll::AllReduce, Coll::AllReduce}}},
    {"direct",
     {{Coll::AllReduce, Coll::AllGather},
      {Coll::AllGather, Coll::AlltoAll},
      {Coll::ReduceScatter, Coll::AllReduce},
      {Coll::Reduce, Coll::Gather},
      {Coll::AlltoAll, Coll::AllGather},
      {Coll::Gather, Coll::Scatter},
      // Not Scatter against Gather: with rank 1 in a gather (a non-root only
      // sends) and the root in a scatter (it only sends), each rank that
      // receives gets what it expects, and no rank can tell; LOOM_CHECK can.
      {Coll::Scatter, Coll::AllGather}}},
    {"shm",
     {{Coll::AllReduce, Coll::AllGather},
      {Coll::AllGather, Coll::ReduceScatter},
      {Coll::ReduceScatter, Coll::AllReduce},
      {Coll::Broadcast, Coll::Reduce},
      {Coll::Reduce, Coll::Broadcast},
      {Coll::AlltoAll, Coll::Gather},
      {Coll::Gather, Coll::Scatter},
      // What direct cannot see: the segment's first step carries every call.
      {Coll::Scatter, Coll::Gather}}},
};

class Mismatches : public ::testing::TestWithParam<const char*> {};

TEST_P(Mismatches, EveryRankFailsFastNamingAPeer) {
  const std::string transport = GetParam();
  loom::test::TransportScope transportScope(transport);
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  ScopedEnv check("LOOM_CHECK", "0");
  for (const Algorithm& a : kAlgorithms) {
    if (std::string(a.name) == "shm" && transport != "shm") continue;  // the segment needs shared memory
    ScopedEnv algo("LOOM_ALGO", a.name);
    for (const auto& [coll, other] : a.runs) {
      for (const Mismatch& m : mismatchesOf(coll, other)) {
        expectEveryRankFailsFast(m, transport + ", " + a.name + ", " + loom::check::collName(coll));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Mismatches, ::testing::ValuesIn(loom::test::threadTransportsUnderTest()),
                         loom::test::transportName);

}  // namespace
