// The transports this build has that connect ranks of one host, as
// LOOM_TRANSPORT names them: what the transport-parameterized tests run
// over (ucx only where the build found UCX). Ranks that are threads of one
// process also run over ibverbs, on the verbs transport's in-process fake.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/ranks.hpp"
#include "transport/ibverbs/fake_verbs.hpp"

namespace loom::test {

inline std::vector<const char*> transportsUnderTest() {
#if LOOM_TEST_UCX
  return {"shm", "socket", "ucx"};
#else
  return {"shm", "socket"};
#endif
}

// transportsUnderTest() and the verbs transport on its fake: for ranks as threads only.
inline std::vector<const char*> threadTransportsUnderTest() {
  auto all = transportsUnderTest();
  all.push_back("ibverbs");
  return all;
}

// LOOM_TRANSPORT=name for the scope, with the fake verbs installed for
// "ibverbs" (this machine has no RDMA device).
class TransportScope {
 public:
  explicit TransportScope(const std::string& name) : env_("LOOM_TRANSPORT", name) {
    if (name != "ibverbs") return;
    fake_ = std::make_unique<transport::ibverbs::FakeVerbs>();
    installed_ = std::make_unique<transport::ibverbs::ScopedVerbs>(*fake_);
  }
  transport::ibverbs::FakeVerbs* fake() const { return fake_.get(); }

 private:
  ScopedEnv env_;
  std::unique_ptr<transport::ibverbs::FakeVerbs> fake_;
  std::unique_ptr<transport::ibverbs::ScopedVerbs> installed_;  // goes first
};

// Names a test by its transport: ".../ucx" rather than ".../2".
inline std::string transportName(const ::testing::TestParamInfo<const char*>& info) { return info.param; }

}  // namespace loom::test
