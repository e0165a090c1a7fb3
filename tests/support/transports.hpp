// The transports this build has that connect ranks of one host, as
// LOOM_TRANSPORT names them: what the transport-parameterized tests run
// over (ucx only where the build found UCX).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom::test {

inline std::vector<const char*> transportsUnderTest() {
#if LOOM_TEST_UCX
  return {"shm", "socket", "ucx"};
#else
  return {"shm", "socket"};
#endif
}

// Names a test by its transport: ".../ucx" rather than ".../2".
inline std::string transportName(const ::testing::TestParamInfo<const char*>& info) { return info.param; }

}  // namespace loom::test
