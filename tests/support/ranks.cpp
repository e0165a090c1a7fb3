#include "tests/support/ranks.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "comm/communicator.hpp"

namespace loom::test {

void onThreads(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

std::vector<loomComm_t> initThreadComms(int n) {
  loomUniqueId id;
  EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  onThreads(n, [&](int r) {
    EXPECT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), loomSuccess) << loomGetLastError(nullptr);
  });
  return comms;
}

void destroyAll(std::vector<loomComm_t>& comms) {
  for (auto& c : comms) {
    if (c != nullptr) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
    c = nullptr;
  }
}

loomResult_t abortOnceInside(loomComm_t comm) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (comm->activeCalls.load(std::memory_order_acquire) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no call started on the communicator within 60 s";
      break;
    }
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(50ms);
  return loomCommAbort(comm);
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  ::setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
  else ::unsetenv(name_.c_str());
}

}  // namespace loom::test
