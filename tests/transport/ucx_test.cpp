// The UCX transport between real processes, beyond the matrices that run
// over every transport (p2p_process_test, p2p_test, mismatch_test,
// hygiene_test): every collective, type and op across "hosts" (each rank
// its own LOOM_HOSTID, so every byte crosses UCX, which then reports a dead
// peer itself) over UCX's tcp, and on one host over UCX's shared memory; a
// rank killed across hosts; a UCX that cannot start is an error naming it;
// a sender that leaves Loom once its send returned still delivers it. And a
// connection's two ends in one process: when credits come back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include "tests/support/processes.hpp"
#include "tests/support/ranks.hpp"

#if LOOM_TEST_UCX

#include "base/cancellation.hpp"
#include "transport/ucx/drainer.hpp"
#include "transport/ucx/ucp.hpp"
#include "transport/ucx/ucx_connection.hpp"

using loom::test::ProcessResult;
using namespace std::chrono_literals;

namespace {

using Env = std::map<std::string, std::string>;

// `argv` as ranks 0..n-1 of one job over UCX, each rank on a host of its
// own, with `env` added.
std::vector<ProcessResult> runAcrossHosts(int n, const std::vector<std::string>& argv, const Env& env,
                                          std::chrono::seconds timeout = 120s) {
  static int jobs = 0;
  const auto store = std::filesystem::temp_directory_path() /
                     ("loom-ucx-" + std::to_string(::getpid()) + "-" + std::to_string(jobs++));
  std::filesystem::create_directories(store);
  std::vector<std::vector<std::string>> argvs;
  std::vector<Env> envs;
  for (int r = 0; r < n; ++r) {
    argvs.push_back(argv);
    Env e = env;
    e.insert({{"LOOM_RANK", std::to_string(r)},
              {"LOOM_LOCAL_RANK", "0"},
              {"LOOM_WORLD_SIZE", std::to_string(n)},
              {"LOOM_STORE_ADDR", "file://" + store.string()},
              {"LOOM_HOSTID", "host" + std::to_string(r)},
              {"LOOM_TRANSPORT", "ucx"}});
    envs.push_back(std::move(e));
  }
  auto results = loom::test::runProcesses(argvs, envs, timeout);
  std::filesystem::remove_all(store);
  return results;
}

const std::vector<std::string> kReductions = {"all_reduce", "reduce_scatter", "reduce"};
const std::vector<std::string> kMovements = {"broadcast", "all_gather", "alltoall", "gather", "scatter"};

// Every type and op in plain builds; the sanitizers see UCX's path with one
// of each (the types and ops themselves are theirs in collectives_test), as
// every type x op x size x collective under them cost minutes of CI.
std::vector<std::string> perfArgs(const std::string& collective) {
  constexpr bool kFull = LOOM_TEST_FULL_MATRIX;
  std::vector<std::string> args = {LOOM_PERF_BIN, collective, "-b", "8", "-e", "256K", "-f", "8",
                                   "-n",          "2",        "-w", "1", "-d", kFull ? "all" : "int32"};
  if (std::find(kReductions.begin(), kReductions.end(), collective) != kReductions.end()) {
    args.insert(args.end(), {"-o", kFull ? "all" : "sum"});
  }
  return args;
}

void expectExact(const std::vector<ProcessResult>& results, const std::string& what) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exitCode, 0) << what << ", rank " << r << "\n" << results[r].output;
  }
  EXPECT_NE(results[0].output.find("# Out of bounds values : 0 OK"), std::string::npos) << what << "\n"
                                                                                         << results[0].output;
  EXPECT_NE(results[0].output.find("ucx to 1"), std::string::npos) << what << "\n" << results[0].output;
}

TEST(Ucx, EveryCollectiveTypeAndOpIsExactAcrossHostsOverTcp) {
  std::vector<std::string> all = kReductions;
  all.insert(all.end(), kMovements.begin(), kMovements.end());
  for (const std::string& collective : all) {
    expectExact(runAcrossHosts(3, perfArgs(collective), {{"UCX_TLS", "tcp"}}), collective + ", tuned");
  }
  for (const std::string collective : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"}) {
    expectExact(runAcrossHosts(4, perfArgs(collective), {{"UCX_TLS", "tcp"}, {"LOOM_ALGO", "ring"}}),
                collective + ", ring");
  }
}

TEST(Ucx, CollectivesAreExactOnOneHostOverSharedMemory) {
  for (const std::string collective : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"}) {
    std::vector<std::string> argv = {LOOMRUN_BIN, "-n", "3"};
    const auto args = perfArgs(collective);
    argv.insert(argv.end(), args.begin(), args.end());
    // The ring: on one host the tuner would take the node's shared segment
    // and no connection at all.
    const auto r = loom::test::runProcess(argv, {{"LOOM_TRANSPORT", "ucx"}, {"UCX_TLS", "sm"}, {"LOOM_ALGO", "ring"}},
                                          120s);
    EXPECT_EQ(r.exitCode, 0) << collective << "\n" << r.output;
    EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << collective << "\n" << r.output;
    // Loom's tcp settings stay out of a UCX that runs no tcp (it warns of each one it did not use).
    EXPECT_EQ(r.output.find("invalid configurations"), std::string::npos) << collective << "\n" << r.output;
  }
}

// Across hosts UCX itself reports the dead peer (UCP_ERR_HANDLING_MODE_PEER).
TEST(Ucx, ARankKilledAcrossHostsIsNamedWithinTheDeadline) {
  for (int victim : {0, 1}) {
    auto results = runAcrossHosts(2, {LOOM_TEST_P2P_BIN, "victim", std::to_string(victim), "300"},
                                  {{"UCX_TLS", "tcp"}, {"LOOM_TIMEOUT_MS", "3000"}}, 60s);
    const auto& killed = results[static_cast<size_t>(victim)];
    const auto& survivor = results[static_cast<size_t>(1 - victim)];
    EXPECT_EQ(killed.exitCode, 128 + SIGKILL) << killed.output;
    EXPECT_EQ(survivor.exitCode, 0) << survivor.output;
    EXPECT_NE(survivor.output.find("rank " + std::to_string(victim)), std::string::npos) << survivor.output;
    EXPECT_LT(survivor.elapsed, 20s);
  }
}

// A UCX send completes once UCX holds its bytes, not once they left: over
// tcp with slots larger than the socket's buffers, the tail of the last slot
// is still UCX's when loomSend returns. Here the sender then stays out of
// Loom until the receiver has everything: the transport's drainer thread
// must write that tail, or the receiver times out (transport/ucx/drainer.hpp).
TEST(Ucx, ASenderThatLeavesLoomOnceItsSendReturnedStillDeliversIt) {
  using loom::test::ScopedEnv;
  const ScopedEnv transport("LOOM_TRANSPORT", "ucx"), timeout("LOOM_TIMEOUT_MS", "5000"), tls("UCX_TLS", "tcp"),
      tx("UCX_TCP_TX_SEG_SIZE", "1m"), rx("UCX_TCP_RX_SEG_SIZE", "1m"), sndbuf("UCX_TCP_SNDBUF", "64k"),
      rcvbuf("UCX_TCP_RCVBUF", "64k");
  auto comms = loom::test::initThreadComms(2);
  constexpr size_t kBytes = 8 << 20;
  std::atomic<bool> received{false};
  loom::test::onThreads(2, [&](int rank) {
    std::vector<uint8_t> buffer(kBytes);
    if (rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) buffer[i] = static_cast<uint8_t>(i * 131 + 7);
      ASSERT_EQ(loomSend(buffer.data(), kBytes, loomUint8, 1, comms[0], nullptr), loomSuccess);
      const auto until = std::chrono::steady_clock::now() + 30s;  // no Loom call until the peer has it all
      while (!received.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      return;
    }
    const loomResult_t result = loomRecv(buffer.data(), kBytes, loomUint8, 0, comms[1], nullptr);
    received = true;
    ASSERT_EQ(result, loomSuccess) << loomGetLastError(comms[1]);
    size_t wrong = 0;
    for (size_t i = 0; i < kBytes; ++i) wrong += buffer[i] != static_cast<uint8_t>(i * 131 + 7);
    EXPECT_EQ(wrong, 0u);
  });
  // Both at once: a UCX endpoint's closing flush waits on its peer's worker.
  loom::test::onThreads(2, [&](int rank) { EXPECT_EQ(loomCommDestroy(comms[rank]), loomSuccess); });
}

// A UCX connection's two ends in this process, wired as the transport wires
// them (ucx_transport.cpp): the sending end's endpoint to the receiving
// end's worker, a socket pair as their control socket.
struct UcxEnds {
  loom::Cancellation cancel;  // fired before the ends go: a closing flush would wait for a worker nobody progresses
  std::unique_ptr<loom::transport::ucx::UcxRecvConnection> receiver;
  std::unique_ptr<loom::transport::ucx::UcxSendConnection> sender;

  explicit UcxEnds(loom::transport::FifoShape shape) {
    using namespace loom::transport::ucx;
    auto context = std::make_shared<UcpContext>(shape.slotBytes + sizeof(loom::transport::SlotTag));
    auto in = std::make_unique<Worker>(context);
    auto out = std::make_unique<Worker>(context);
    out->connect(in->address(), PeerErrors::ByControlSocket, "rank 1");
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    receiver = std::make_unique<UcxRecvConnection>(std::move(in), loom::net::Socket(fds[0], "rank 0"), shape);
    sender = std::make_unique<UcxSendConnection>(std::move(out), loom::net::Socket(fds[1], "rank 1"), shape, &cancel,
                                                 std::make_shared<Drainer>());
  }
  ~UcxEnds() { cancel.cancel(); }

  // Progresses both ends until the receiver shows its next slot (at most 10 s).
  std::optional<loom::transport::RecvSlot> next() {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      sender->progress();
      receiver->progress();
      if (auto slot = receiver->peek()) return slot;
    }
    return std::nullopt;
  }
  void commit(uint32_t bytes) {
    ASSERT_FALSE(sender->reserve().empty());
    sender->commit({.messageBytes = bytes, .bytes = bytes});
  }
};

// While full slots stream (a message larger than a slot), each release
// credits the sender at once, which keeps its window full; after short
// ones, credits come once half the FIFO is free (a write per small message
// cost latency).
TEST(UcxFifo, CreditsComeBackPerFullSlotAndPerHalfFifoAfterShortOnes) {
  const loom::transport::FifoShape shape{.slots = 4, .slotBytes = 4096};
  UcxEnds ends(shape);
  for (int i = 0; i < 4; ++i) ends.commit(shape.slotBytes);
  EXPECT_TRUE(ends.sender->reserve().empty());  // no credit left
  for (int i = 0; i < 4; ++i) {
    auto slot = ends.next();
    ASSERT_TRUE(slot.has_value()) << "slot " << i;
    EXPECT_EQ(slot->data.size(), shape.slotBytes);
    ends.receiver->release();
    // The credit is on the control socket once release() returns; reserve() reads it.
    ASSERT_FALSE(ends.sender->reserve().empty()) << "no credit after full slot " << i;
    ends.commit(8);
  }
  EXPECT_TRUE(ends.sender->reserve().empty());  // four short slots in flight
  auto slot = ends.next();
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->data.size(), 8u);
  ends.receiver->release();
  EXPECT_TRUE(ends.sender->reserve().empty()) << "a credit after one short slot of four";
  ASSERT_TRUE(ends.next().has_value());
  ends.receiver->release();
  EXPECT_FALSE(ends.sender->reserve().empty()) << "no credit once half the FIFO is free";
}

// UCX_TLS as UCX reads it: names and aliases, or "^" and the ones to leave out.
TEST(UcxSettings, TcpSegmentsAreSetOnlyWhereUcxTlsLeavesTcp) {
  using loom::transport::ucx::tcpMayRun;
  for (const char* tls : {static_cast<const char*>(nullptr), "", "tcp", "sm,tcp", "rc,tcp:aux", "all", "^sm", "^rc,ud"}) {
    EXPECT_TRUE(tcpMayRun(tls)) << (tls ? tls : "(unset)");
  }
  for (const char* tls : {"sm", "shm,self", "rc,ud", "^tcp", "^sm,tcp", "tcpx", "^all,tcp"}) {
    EXPECT_FALSE(tcpMayRun(tls)) << tls;
  }
}

TEST(Ucx, AUcxThatCannotStartIsAnErrorNamingIt) {
  // UCX_TLS naming no transport UCX has leaves it none to start with.
  auto results = runAcrossHosts(2, {LOOM_PERF_BIN, "all_reduce", "-b", "8", "-e", "8"}, {{"UCX_TLS", "bogus"}}, 60s);
  for (const auto& r : results) {
    EXPECT_NE(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("initializing UCX"), std::string::npos) << r.output;
    EXPECT_LT(r.elapsed, 30s);
  }
}

}  // namespace

#else

TEST(Ucx, NotBuilt) { GTEST_SKIP() << "this build has no UCX (LOOM_UCX, pkg-config ucx)"; }

#endif
