// CUDA detection: skips without a device, checks what bootstrap reports with one.
#include <gtest/gtest.h>

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
