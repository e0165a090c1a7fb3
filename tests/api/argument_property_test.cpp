// A property test over the C API, as a new user porting NCCL code meets it:
// random and extreme arguments for every collective and for send/recv on 3
// ranks: counts near SIZE_MAX / size and negative ints passed as size_t,
// roots and peers out of range, unknown datatypes and ops, NULL buffers,
// buffers in place by each collective's rule and overlapping otherwise.
// Every rank makes the same call, so the arguments are bad on every rank
// or on none. The property: every call returns well within its deadline,
// and either every rank refuses it with loomInvalidArgument naming the
// argument, or every rank succeeds and holds the exact result.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/ranks.hpp"
#include "tools/check/collective_call.hpp"

namespace {

using loom::check::Case;
using loom::check::Coll;
using loom::check::Op;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;
constexpr auto kWithin = std::chrono::seconds(5);  // the deadline below is 60 s

enum class Buffers { Separate, InPlace, Shifted, NullSend, NullRecv };

// One call, made the same way by every rank.
struct Draw {
  Coll coll;
  int type;  // a loomDataType_t or not
  int op;    // a loomRedOp_t or not
  size_t count;
  int root;  // also the peer offset of send/recv
  Buffers buffers;
};

bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter; }
// Collectives whose every rank reads sendbuff and writes recvbuff (so a
// buffer fault is a fault on every rank).
bool everyRankUsesBoth(Coll c) {
  return c == Coll::AllReduce || c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll;
}
size_t blocksOf(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll || c == Coll::Gather ||
                 c == Coll::Scatter
             ? kRanks
             : 1;
}

Draw draw(std::mt19937_64& rng) {
  const auto pick = [&](auto... values) {
    const std::vector<std::common_type_t<decltype(values)...>> v{values...};
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  Draw d;
  d.coll = pick(Coll::Broadcast, Coll::Reduce, Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather, Coll::AlltoAll,
                Coll::Gather, Coll::Scatter, Coll::SendRecv);
  d.type = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? pick(-1, 10, 42, INT_MAX, INT_MIN)
                                                              : std::uniform_int_distribution<int>(0, 9)(rng);
  d.op = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? pick(-1, 5, 99, INT_MAX)
                                                            : std::uniform_int_distribution<int>(0, 4)(rng);
  const size_t size = d.type >= 0 && d.type <= 9 ? loom::check::typeSize(static_cast<loomDataType_t>(d.type)) : 1;
  d.count = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                ? pick(SIZE_MAX, SIZE_MAX / size, SIZE_MAX / size + 1, SIZE_MAX / size - 1,
                       static_cast<size_t>(-1), static_cast<size_t>(-5), static_cast<size_t>(INT_MIN),
                       size_t{1} << 62, (LOOM_MAX_BUFFER_BYTES / size) + 1, LOOM_MAX_BUFFER_BYTES + 1)
                : pick(size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{1000}, size_t{4099});
  d.root = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? pick(-1, kRanks, INT_MAX, INT_MIN)
                                                              : std::uniform_int_distribution<int>(0, kRanks - 1)(rng);
  d.buffers = pick(Buffers::Separate, Buffers::Separate, Buffers::InPlace, Buffers::InPlace, Buffers::Shifted,
                   Buffers::NullSend, Buffers::NullRecv);
  if (!everyRankUsesBoth(d.coll) && d.buffers != Buffers::Separate && d.buffers != Buffers::InPlace) {
    d.buffers = Buffers::Separate;  // a root-only buffer's fault would be one rank's alone
  }
  if (d.coll == Coll::SendRecv && d.buffers == Buffers::InPlace) d.buffers = Buffers::Separate;
  if (d.buffers == Buffers::Shifted && d.count < 2) d.buffers = Buffers::Separate;  // one element apart: no overlap
  return d;
}

// What the C API must answer for `d`, as loom.h states its rules.
bool acceptable(const Draw& d) {
  if (d.type < 0 || d.type > 9) return false;
  const bool reduces = d.coll == Coll::Reduce || d.coll == Coll::AllReduce || d.coll == Coll::ReduceScatter;
  if (reduces && (d.op < 0 || d.op > 4)) return false;
  if ((rooted(d.coll) || d.coll == Coll::SendRecv) && (d.root < 0 || d.root >= kRanks)) return false;
  const size_t size = loom::check::typeSize(static_cast<loomDataType_t>(d.type));
  size_t bytes = 0;
  if (__builtin_mul_overflow(d.count, size * blocksOf(d.coll), &bytes) || bytes > LOOM_MAX_BUFFER_BYTES) return false;
  if (d.count == 0) return true;  // no buffer is touched
  if (d.buffers == Buffers::NullSend || d.buffers == Buffers::NullRecv) return false;
  if (d.buffers == Buffers::Shifted) return false;
  return !(d.coll == Coll::AlltoAll && d.buffers == Buffers::InPlace);
}

// Rank r's call of `d`: its case (for the checks) and its buffers.
struct RankCall {
  Case c;
  std::vector<std::byte> a, b;
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
};

RankCall prepare(const Draw& d, int rank) {
  RankCall rc;
  const bool valid = acceptable(d);
  const auto type = static_cast<loomDataType_t>(d.type >= 0 && d.type <= 9 ? d.type : 0);
  constexpr Op kCheckOp[] = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg};  // by loomRedOp_t value
  rc.c = {d.coll, type, kCheckOp[d.op >= 0 && d.op <= 4 ? d.op : 0], kRanks, rank,
          d.coll == Coll::SendRecv ? 0 : d.root, d.count};
  const size_t size = loom::check::typeSize(type);
  // Real buffers only where the call is valid (a huge count's are never touched: it must be refused first).
  const size_t elements = valid ? std::max(loom::check::sendElements(rc.c), loom::check::recvElements(rc.c)) : 64;
  rc.a.resize((elements + 1) * size);
  rc.b.resize((elements + 1) * size);
  rc.send = rc.a.data();
  rc.recv = rc.b.data();
  const size_t own = static_cast<size_t>(d.coll == Coll::Gather || d.coll == Coll::Scatter ? d.root : rank) *
                     (valid ? d.count : 0) * size;
  switch (d.buffers) {
    case Buffers::Separate: break;
    case Buffers::InPlace:
      switch (d.coll) {
        case Coll::AllGather: case Coll::Gather: rc.recv = rc.a.data(); rc.send = rc.a.data() + own; break;
        case Coll::ReduceScatter: case Coll::Scatter: rc.send = rc.a.data(); rc.recv = rc.a.data() + own; break;
        default: rc.recv = rc.send; break;
      }
      break;
    case Buffers::Shifted: rc.recv = rc.send + size; break;  // overlapping, in place by no rule
    case Buffers::NullSend: rc.send = nullptr; break;
    case Buffers::NullRecv: rc.recv = nullptr; break;
  }
  if (valid && d.count != 0) loom::check::fillSend(rc.c, rc.send);
  return rc;
}

std::string describe(const Draw& d) {
  const char* buffers[] = {"separate", "in place", "shifted", "NULL send", "NULL recv"};
  return std::string(loom::check::collName(d.coll)) + " type=" + std::to_string(d.type) + " op=" +
         std::to_string(d.op) + " count=" + std::to_string(d.count) + " root/peer=" + std::to_string(d.root) + " " +
         buffers[static_cast<int>(d.buffers)];
}

TEST(ArgumentProperty, EveryCallRefusesOnEveryRankOrIsExact) {
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT_MS", "60000");
  auto comms = loom::test::initThreadComms(kRanks);
  std::mt19937_64 rng(20261124);
  int refused = 0;
  int ran = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    const Draw d = draw(rng);
    const bool valid = acceptable(d);
    std::vector<loomResult_t> results(kRanks);
    std::vector<std::string> messages(kRanks), wrong(kRanks);
    std::vector<Clock::duration> took(kRanks);
    loom::test::onThreads(kRanks, [&](int r) {
      RankCall rc = prepare(d, r);
      loomComm_t comm = comms[static_cast<size_t>(r)];
      const auto start = Clock::now();
      loomResult_t result;
      if (d.coll == Coll::SendRecv) {
        const int peer = d.root;  // send to rank + peer, receive from rank - peer, or out of range
        const bool inRange = peer >= 0 && peer < kRanks;
        const int to = inRange ? (r + peer) % kRanks : peer;
        const int from = inRange ? (r + kRanks - peer) % kRanks : peer;
        rc.c.coll = Coll::SendRecv;
        loomGroupStart();
        result = loomSend(rc.send, d.count, static_cast<loomDataType_t>(d.type), to, comm, nullptr);
        const loomResult_t received = loomRecv(rc.recv, d.count, static_cast<loomDataType_t>(d.type), from, comm, nullptr);
        if (result == loomSuccess) result = received;
        const loomResult_t ended = loomGroupEnd();
        if (result == loomSuccess) result = ended;
        // The exact result of a shift by `peer`: rank - peer's input.
        if (result == loomSuccess && inRange && d.count != 0) {
          Case shifted = rc.c;
          shifted.rank = from;
          std::vector<std::byte> expected(rc.b.size());
          loom::check::fillSend(shifted, expected.data());
          if (!std::equal(rc.recv, rc.recv + d.count * loom::check::typeSize(rc.c.type), expected.begin())) {
            wrong[static_cast<size_t>(r)] = "received data is not rank " + std::to_string(from) + "'s";
          }
        }
      } else {
        Case call = rc.c;  // as the user makes it: the drawn datatype and root, valid or not
        call.type = static_cast<loomDataType_t>(d.type);
        call.root = d.root;
        result = loom::check::callCollective(call, rc.send, rc.recv, static_cast<loomRedOp_t>(d.op), comm, nullptr);
        if (result == loomSuccess && d.count != 0 && loom::check::hasResult(rc.c)) {
          wrong[static_cast<size_t>(r)] = loom::check::checkResult(rc.c, rc.recv);
        }
      }
      took[static_cast<size_t>(r)] = Clock::now() - start;
      results[static_cast<size_t>(r)] = result;
      messages[static_cast<size_t>(r)] = loomGetLastError(comm);
    });
    for (int r = 0; r < kRanks; ++r) {
      const auto i = static_cast<size_t>(r);
      SCOPED_TRACE(describe(d) + ", rank " + std::to_string(r) + ": " + messages[i]);
      EXPECT_LT(took[i], kWithin);
      if (valid) {
        EXPECT_EQ(results[i], loomSuccess);
        EXPECT_EQ(wrong[i], "");
      } else {
        EXPECT_EQ(results[i], loomInvalidArgument);
      }
    }
    (valid ? ran : refused) += 1;
    if (::testing::Test::HasFailure()) break;  // one call's report is enough to go on
  }
  EXPECT_GT(refused, 100);  // the draw reaches both sides of the rules
  EXPECT_GT(ran, 100);
  loom::test::destroyAll(comms);
}

}  // namespace
