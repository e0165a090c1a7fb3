// CUDA detection: skips without a device, checks what bootstrap reports with one.
#include <gtest/gtest.h>

#include "base/device/copy_bandwidth.hpp"
#include "base/device/cuda.hpp"
#include "comm/communicator.hpp"
#include "tests/support/ranks.hpp"

TEST(Cuda, DevicesAreReportedToPeers) {
  if (loom::cuda::deviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device visible (built " << (loom::cuda::compiledWithCuda() ? "with" : "without") << " CUDA)";
  }
  EXPECT_TRUE(loom::cuda::compiledWithCuda());
  auto comms = loom::test::initThreadComms(2);
  for (const auto& p : comms[0]->peers()) EXPECT_EQ(p.cudaDeviceCount, loom::cuda::deviceCount());
  loom::test::destroyAll(comms);
}

// nvbandwidth's copies (loom-diag's GPU matrices): measured where a device
// is, refused by name where none is or the device does not exist.
TEST(CopyBandwidth, MeasuresEveryKindOrSaysWhyNot) {
  using loom::cuda::CopyKind;
  const int count = loom::cuda::deviceCount();
  const auto none = loom::cuda::measureCopy(CopyKind::HostToDevice, count, -1, 1 << 20, 3);
  EXPECT_EQ(none.GBps, 0.0);
  EXPECT_NE(none.error.find("no CUDA device"), std::string::npos) << none.error;
  if (count == 0) {
    GTEST_SKIP() << "no CUDA device: only the refusals are checked (" << none.error << ")";
  }
  for (CopyKind kind : {CopyKind::HostToDevice, CopyKind::DeviceToHost, CopyKind::DeviceToDevice}) {
    const auto r = loom::cuda::measureCopy(kind, 0, 0, 16 << 20, 3);
    EXPECT_EQ(r.error, "") << loom::cuda::copyKindName(kind);
    EXPECT_GT(r.GBps, 0.5) << loom::cuda::copyKindName(kind);  // any PCIe link moves more than this
  }
  const auto badPeer = loom::cuda::measureCopy(CopyKind::DeviceToDevice, 0, count, 1 << 20, 3);
  EXPECT_NE(badPeer.error.find("no CUDA device " + std::to_string(count)), std::string::npos) << badPeer.error;
}
