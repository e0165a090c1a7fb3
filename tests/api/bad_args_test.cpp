// Bad arguments: loomInvalidArgument and a message naming the argument.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include "comm/communicator.hpp"
#include "tests/support/ranks.hpp"

namespace {

void expectInvalid(loomResult_t r, loomComm_t comm, const std::string& mentions) {
  EXPECT_EQ(r, loomInvalidArgument);
  std::string message = loomGetLastError(comm);
  EXPECT_NE(message.find(mentions), std::string::npos) << "'" << message << "' does not mention '" << mentions << "'";
}

}  // namespace

TEST(BadArgs, InitRank) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  expectInvalid(loomCommInitRank(nullptr, 1, id, 0), nullptr, "comm is NULL");
  expectInvalid(loomCommInitRank(&comm, 0, id, 0), nullptr, "nranks=0");
  expectInvalid(loomCommInitRank(&comm, -3, id, 0), nullptr, "nranks=-3");
  expectInvalid(loomCommInitRank(&comm, 2, id, -1), nullptr, "rank=-1");
  expectInvalid(loomCommInitRank(&comm, 2, id, 2), nullptr, "rank=2");
  EXPECT_EQ(comm, nullptr);
  expectInvalid(loomGetUniqueId(nullptr), nullptr, "uniqueId is NULL");
  expectInvalid(loomCommInitAll(nullptr, 2, nullptr), nullptr, "comms is NULL");
  loomComm_t comms[1];
  expectInvalid(loomCommInitAll(comms, 0, nullptr), nullptr, "ndev=0");
}

TEST(BadArgs, Config) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  loomConfig_t raw{};  // not from LOOM_CONFIG_INITIALIZER
  expectInvalid(loomCommInitRankConfig(&comm, 1, id, 0, &raw), nullptr, "LOOM_CONFIG_INITIALIZER");
  loomConfig_t c = LOOM_CONFIG_INITIALIZER;
  c.blocking = 5;
  expectInvalid(loomCommInitRankConfig(&comm, 1, id, 0, &c), nullptr, "config->blocking");
  c = LOOM_CONFIG_INITIALIZER;
  c.timeoutMs = 0;
  expectInvalid(loomCommInitRankConfig(&comm, 1, id, 0, &c), nullptr, "config->timeoutMs");
  c = LOOM_CONFIG_INITIALIZER;
  c.deterministic = 2;
  expectInvalid(loomCommInitRankConfig(&comm, 1, id, 0, &c), nullptr, "config->deterministic");
}

TEST(BadArgs, QueriesAndTeardown) {
  int v = 0;
  expectInvalid(loomCommCount(nullptr, &v), nullptr, "comm is NULL");
  expectInvalid(loomCommUserRank(nullptr, &v), nullptr, "comm is NULL");
  expectInvalid(loomCommDestroy(nullptr), nullptr, "comm is NULL");
  expectInvalid(loomCommAbort(nullptr), nullptr, "comm is NULL");
  expectInvalid(loomCommBarrier(nullptr), nullptr, "comm is NULL");
  expectInvalid(loomGetVersion(nullptr), nullptr, "version is NULL");
  auto comms = loom::test::initThreadComms(1);
  expectInvalid(loomCommCount(comms[0], nullptr), comms[0], "count is NULL");
  expectInvalid(loomCommUserRank(comms[0], nullptr), comms[0], "rank is NULL");
  expectInvalid(loomCommLocalRank(comms[0], nullptr), comms[0], "localRank is NULL");
  expectInvalid(loomCommGetAsyncError(comms[0], nullptr), comms[0], "asyncError is NULL");
  expectInvalid(loomCommCuDevice(comms[0], nullptr), comms[0], "device is NULL");
  expectInvalid(loomCommSplit(comms[0], 0, 0, nullptr, nullptr), comms[0], "newcomm is NULL");
  // The per-communicator message stays with its communicator.
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("newcomm"), std::string::npos);
  loom::test::destroyAll(comms);
}

TEST(BadArgs, VersionIsReported) {
  int v = 0;
  EXPECT_EQ(loomGetVersion(&v), loomSuccess);
  EXPECT_EQ(v, LOOM_VERSION_CODE);
}

TEST(BadArgs, SocketIfnameThatMatchesNothingIsNamed) {
  loom::test::ScopedEnv e("LOOM_SOCKET_IFNAME", "=nosuchif0");
  loomUniqueId id;
  expectInvalid(loomGetUniqueId(&id), nullptr, "LOOM_SOCKET_IFNAME='=nosuchif0' matches no usable interface");
}

TEST(BadArgs, SocketIfnameLoopbackIsHonoured) {
  loom::test::ScopedEnv e("LOOM_SOCKET_IFNAME", "lo");
  auto comms = loom::test::initThreadComms(2);
  for (auto c : comms) {
    for (const auto& p : c->peers()) EXPECT_TRUE(p.bootstrapAddress.starts_with("127.0.0.1:")) << p.bootstrapAddress;
  }
  loom::test::destroyAll(comms);
}
