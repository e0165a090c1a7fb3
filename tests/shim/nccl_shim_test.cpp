// Loom's libnccl.so.2: its header is NCCL's ABI (a fact table of NCCL's
// layouts and numbers below), a program written for NCCL runs on it across
// processes with every collective exact, and NCCL's variables reach Loom.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nccl.h>
#include "tests/support/processes.hpp"
#include "tests/support/text_match.hpp"

namespace {

// NCCL's layouts on LP64, from its header: ncclConfig_t's fields in order
// (2.27's end at nvlsCTAs, 2.28 adds two, 2.30-2.31 the rest), the
// per-collective config and the simulation info.
TEST(NcclAbi, StructsAreLaidOutAsNcclLaysThemOut) {
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
  EXPECT_EQ(offsetof(ncclConfig_t, size), 0u);
  EXPECT_EQ(offsetof(ncclConfig_t, magic), 8u);
  EXPECT_EQ(offsetof(ncclConfig_t, version), 12u);
  EXPECT_EQ(offsetof(ncclConfig_t, blocking), 16u);
  EXPECT_EQ(offsetof(ncclConfig_t, netName), 32u);
  EXPECT_EQ(offsetof(ncclConfig_t, splitShare), 40u);
  EXPECT_EQ(offsetof(ncclConfig_t, commName), 48u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlsCTAs), 68u);  // the last of 2.27
  EXPECT_EQ(offsetof(ncclConfig_t, nvlinkCentricSched), 76u);
  EXPECT_EQ(offsetof(ncclConfig_t, nvlsHostMode), 112u);
  EXPECT_EQ(sizeof(ncclConfig_t), 120u);
  EXPECT_EQ(offsetof(ncclCollConfig_t, ext), 16u);
  EXPECT_EQ(offsetof(ncclCollConfig_t, algSelection), 40u);
  EXPECT_EQ(offsetof(ncclCollConfig_t, userProfilerTag), 56u);
  EXPECT_EQ(sizeof(ncclCollConfig_t), 64u);
  EXPECT_EQ(offsetof(ncclSimInfo_t, estimatedTime), 16u);
  EXPECT_EQ(sizeof(ncclWaitSignalDesc_t), 16u);
  EXPECT_EQ(sizeof(ncclRedOp_t), 4u);
  EXPECT_EQ(sizeof(ncclDataType_t), 4u);
}

TEST(NcclAbi, NumbersAreNcclsAndTheVersionIs2277) {
  EXPECT_EQ(NCCL_VERSION_CODE, 22707);
  EXPECT_EQ(NCCL_VERSION(2, 27, 7), 22707);
  EXPECT_EQ(NCCL_VERSION(2, 8, 4), 2804);  // the old encoding below 2.9
  const std::map<int, int> results{{ncclSuccess, 0},      {ncclUnhandledCudaError, 1}, {ncclSystemError, 2},
                                   {ncclInternalError, 3}, {ncclInvalidArgument, 4},   {ncclInvalidUsage, 5},
                                   {ncclRemoteError, 6},   {ncclInProgress, 7},        {ncclTimeout, 8},
                                   {ncclNumResults, 9}};
  for (const auto& [value, want] : results) EXPECT_EQ(value, want);
  const std::map<int, int> types{{ncclInt8, 0},    {ncclChar, 0},     {ncclUint8, 1},      {ncclInt32, 2},
                                 {ncclInt, 2},     {ncclUint32, 3},   {ncclInt64, 4},      {ncclUint64, 5},
                                 {ncclFloat16, 6}, {ncclHalf, 6},     {ncclFloat32, 7},    {ncclFloat, 7},
                                 {ncclFloat64, 8}, {ncclDouble, 8},   {ncclBfloat16, 9},   {ncclFloat8e4m3, 10},
                                 {ncclFloat8e5m2, 11}, {ncclNumTypes, 12}};
  for (const auto& [value, want] : types) EXPECT_EQ(value, want);
  EXPECT_EQ(ncclSum, 0);
  EXPECT_EQ(ncclProd, 1);
  EXPECT_EQ(ncclMax, 2);
  EXPECT_EQ(ncclMin, 3);
  EXPECT_EQ(ncclAvg, 4);
  EXPECT_EQ(ncclNumOps, 5);
  EXPECT_EQ(static_cast<long>(ncclMaxRedOp), 0x7fffffffL);
  EXPECT_EQ(ncclScalarDevice, 0);
  EXPECT_EQ(ncclScalarHostImmediate, 1);
  EXPECT_EQ(NCCL_CONFIG_UNDEF_INT, INT_MIN);
  EXPECT_EQ(NCCL_SPLIT_NOCOLOR, -1);
  EXPECT_EQ(NCCL_API_MAGIC, 0xcafebeefu);
  EXPECT_EQ(NCCL_SHRINK_ABORT, 1);
  EXPECT_EQ(NCCL_WIN_REQUIRED_ALIGNMENT, 4096);
  const ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(config.size, sizeof(ncclConfig_t));
  EXPECT_EQ(config.magic, 0xcafebeefu);
  EXPECT_EQ(config.version, 22707u);
  EXPECT_EQ(config.blocking, INT_MIN);
  EXPECT_EQ(config.netName, nullptr);
  EXPECT_EQ(config.nvlsHostMode, INT_MIN);
  const ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
  EXPECT_EQ(coll.forceAlgSelection, 1);
  EXPECT_EQ(coll.userProfilerTag, 0u);
}

struct Job {
  std::vector<loom::test::ProcessResult> ranks;
};

// n processes of a program written for NCCL (`binary` RANK NRANKS DIR
// `extra`...), with extra environment.
Job runProgram(int n, const std::map<std::string, std::string>& env = {}, const char* binary = LOOM_NCCL_PROGRAM_BIN,
               const std::vector<std::string>& extra = {}) {
  const std::string dir = ::testing::TempDir() + "loom-nccl-" + std::to_string(::getpid()) + "-" + std::to_string(n);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < n; ++r) {
    argvs.push_back({binary, std::to_string(r), std::to_string(n), dir});
    argvs.back().insert(argvs.back().end(), extra.begin(), extra.end());
    envs.push_back(env);
  }
  Job job{loom::test::runProcesses(argvs, envs, std::chrono::seconds(120))};
  std::filesystem::remove_all(dir);
  return job;
}

void expectEveryRankOk(const Job& job) {
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    EXPECT_EQ(job.ranks[r].exitCode, 0) << "rank " << r << ":\n" << job.ranks[r].output;
    EXPECT_NE(job.ranks[r].output.find("rank " + std::to_string(r) + " ok"), std::string::npos)
        << job.ranks[r].output;
  }
}

// Every collective, every type and op, send/recv, a split, PreMulSum and bad
// input's codes, exactly, as a program written for NCCL sees them.
TEST(NcclShim, AProgramWrittenForNcclRunsEveryCollectiveExactly) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    expectEveryRankOk(runProgram(n));
  }
}

TEST(NcclShim, OverSockets) { expectEveryRankOk(runProgram(3, {{"LOOM_TRANSPORT", "socket"}})); }

// PyTorch 2.x's call sequences (programs/torch_replay.cpp): non-blocking
// inits polled, new_group's split, the lazy 2-rank communicator of an
// unbatched send/recv, batch_isend_irecv of 8 MiB each way around a lazy
// init, coalesced all-gathers and reduce-scatters, a watchdog thread,
// finalize in orders that differ, aborts inside a group; every result
// exact. On host buffers and on the fake device's, whose 8 MiB go by handle.
TEST(TorchReplay, HostBuffers) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    expectEveryRankOk(runProgram(n, {{"LOOM_TIMEOUT_MS", "20000"}}, LOOM_TORCH_REPLAY_BIN, {"host"}));
  }
}

TEST(TorchReplay, DeviceBuffers) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    expectEveryRankOk(runProgram(n, {{"LOOM_TIMEOUT_MS", "20000"}}, LOOM_TORCH_REPLAY_BIN, {"device"}));
  }
}

// As PyTorch calls: every call on its communicator's CUDA stream (the fake
// device's), held at a stream gate, waited for before the results are read.
// With the IPC cache off too: a receive by handle on a held stream must not
// close the sender's view there (closing synchronizes the device, whose
// stream waits for that very receive; the fake device ends the process).
TEST(TorchReplay, DeviceBuffersOnStreams) {
  for (const char* cache : {"1", "0"}) {
    for (int n : {2, 3}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, LOOM_CUDA_IPC_CACHE=" + cache);
      expectEveryRankOk(runProgram(n, {{"LOOM_TIMEOUT_MS", "20000"}, {"LOOM_CUDA_IPC_CACHE", cache}},
                                   LOOM_TORCH_REPLAY_BIN, {"stream"}));
    }
  }
}

// NCCL's variables reach Loom: NCCL_DEBUG=INFO logs, NCCL_ALGO=Tree picks the
// tree; a LOOM_* variable set too wins; one Loom has no equivalent for is
// said to be ignored.
TEST(NcclShim, NcclVariablesBecomeLoomsAndLoomsWin) {
  auto job = runProgram(2, {{"NCCL_DEBUG", "INFO"}, {"NCCL_ALGO", "Tree"}});
  expectEveryRankOk(job);
  EXPECT_NE(job.ranks[0].output.find("loom INFO"), std::string::npos) << job.ranks[0].output;
  EXPECT_NE(job.ranks[0].output.find(": tree, chunk"), std::string::npos) << job.ranks[0].output;
  job = runProgram(2, {{"NCCL_DEBUG", "INFO"}, {"NCCL_ALGO", "Tree"}, {"LOOM_ALGO", "ring"}});
  expectEveryRankOk(job);
  EXPECT_EQ(job.ranks[0].output.find(": tree, chunk"), std::string::npos) << job.ranks[0].output;
  EXPECT_NE(job.ranks[0].output.find(": ring, chunk"), std::string::npos) << job.ranks[0].output;
  job = runProgram(2, {{"NCCL_ALGO", "NVLS"}});
  expectEveryRankOk(job);
  EXPECT_NE(job.ranks[0].output.find("NCCL_ALGO=NVLS names no single algorithm Loom has (Ring, Tree); ignored"),
            std::string::npos)
      << job.ranks[0].output;
}

// NCCL_COMM_ID: every rank calls ncclGetUniqueId itself and gets the id of
// the root at that address, which rank 0 starts at its init; nothing is
// passed between the ranks. Twice, so the second job's rank 0 binds the
// port again.
TEST(NcclShim, NcclCommIdLetsEveryRankMakeTheIdItself) {
  const std::string at = "127.0.0.1:" + std::to_string(loom::test::freePort());
  for (int round = 0; round < 2; ++round) {
    auto job = runProgram(3, {{"NCCL_COMM_ID", at}});
    expectEveryRankOk(job);
  }
}

// NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL traces every call as it returns,
// one line each: its arguments, communicator, rank and result, a refused
// one with its error.
TEST(NcclShim, NcclDebugCollTracesEveryCall) {
  auto job = runProgram(2, {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "COLL"}});
  expectEveryRankOk(job);
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    const std::string& out = job.ranks[r].output;
    const std::string rankOf = " rank " + std::to_string(r) + " of 2: ";
    EXPECT_TRUE(loom::test::contains(
        out, "loomAllReduce\\(sendbuff=0x[0-9a-f]+ recvbuff=0x[0-9a-f]+ count=1003 datatype=int8 op=0 root=0 "
             "stream=\\(nil\\)\\) comm 0x[0-9a-f]+" + rankOf + "no error"))
        << out;
    EXPECT_TRUE(loom::test::contains(out, "loomSend\\(buff=0x[0-9a-f]+ count=4 datatype=float32 peer=-3 "
                                                      "stream=\\(nil\\)\\) comm 0x[0-9a-f]+" + rankOf +
                                                      "invalid argument"))
        << out;
    EXPECT_TRUE(loom::test::contains(out, "loomCommInitRankConfig\\(nranks=2 rank=" + std::to_string(r) +
                                                      " blocking=1\\): no error"))
        << out;
  }
  // Without COLL among the subsystems, no call is traced.
  job = runProgram(2, {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"}});
  expectEveryRankOk(job);
  EXPECT_EQ(job.ranks[0].output.find("loomAllReduce("), std::string::npos) << job.ranks[0].output;
}

}  // namespace
