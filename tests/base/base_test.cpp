// comm/base: error strings, the env table (and docs/configuration.md's copy of it), logging.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <mutex>
#include <chrono>
#include <atomic>
#include <climits>
#include <cstdint>
#include <iterator>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/copy_bytes.hpp"
#include "base/datatype.hpp"
#include "base/env.hpp"
#include "base/futex_lock.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/process.hpp"
#include "tests/support/ranks.hpp"

using loom::test::ScopedEnv;

TEST(Errors, EveryResultHasItsOwnString) {
  std::set<std::string> seen;
  for (int r = loomSuccess; r < loomNumResults; ++r) {
    std::string s = loomGetErrorString(static_cast<loomResult_t>(r));
    EXPECT_FALSE(s.empty());
    EXPECT_NE(s, "unknown result code");
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(loomNumResults));
  // The largest value C++ lets the enum hold (its range is 0..15); a C caller may pass any int.
  EXPECT_STREQ(loomGetErrorString(static_cast<loomResult_t>(15)), "unknown result code");
}

TEST(Env, DefaultsComeFromTheTable) {
  ::unsetenv("LOOM_TIMEOUT_MS");
  EXPECT_EQ(loom::env::get("LOOM_TIMEOUT_MS"), "300000");
  ScopedEnv e("LOOM_TIMEOUT_MS", "1234");
  EXPECT_EQ(loom::env::getInt("LOOM_TIMEOUT_MS", 1, 1000000), 1234);
}

TEST(Env, BadIntegerNamesTheVariable) {
  ScopedEnv e("LOOM_TIMEOUT_MS", "12ms");
  try {
    loom::env::getInt("LOOM_TIMEOUT_MS", 1, 1000000);
    FAIL() << "no error";
  } catch (const loom::Error& err) {
    EXPECT_EQ(err.code(), loomInvalidArgument);
    EXPECT_NE(std::string(err.what()).find("LOOM_TIMEOUT_MS"), std::string::npos);
  }
}

TEST(Env, UndeclaredVariableIsRefused) {
  EXPECT_THROW(loom::env::get("LOOM_NOT_DECLARED"), loom::Error);
}

TEST(Env, ConfigurationPageMatchesTheTable) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md not found";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string readme = ss.str();
  const std::string begin = "<!-- env-table:begin -->\n", end = "<!-- env-table:end -->";
  auto b = readme.find(begin), e = readme.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(readme.substr(b + begin.size(), e - b - begin.size()), loom::env::markdownTable())
      << "regenerate it: scripts/update-env-table";
}

TEST(Env, TableIsSortedAndUnique) {
  auto t = loom::env::table();
  for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1].name, t[i].name);
  for (const auto& v : t) {
    EXPECT_TRUE(v.name.starts_with("LOOM_")) << v.name;
    EXPECT_FALSE(v.doc.empty()) << v.name;
  }
}

TEST(Logging, BadLevelAndSubsystemAreNamed) {
  {
    ScopedEnv e("LOOM_DEBUG", "LOUD");
    EXPECT_THROW(loom::logConfigFromEnv(), loom::Error);
  }
  ScopedEnv e("LOOM_DEBUG_SUBSYS", "INIT,NOPE");
  try {
    loom::logConfigFromEnv();
    FAIL();
  } catch (const loom::Error& err) {
    EXPECT_NE(std::string(err.what()).find("NOPE"), std::string::npos);
  }
}

TEST(Logging, SubsystemExclusion) {
  ScopedEnv e("LOOM_DEBUG_SUBSYS", "^NET,LAUNCH");
  auto c = loom::logConfigFromEnv();
  EXPECT_EQ(c.subsystems & static_cast<uint32_t>(loom::Subsys::Net), 0u);
  EXPECT_EQ(c.subsystems & static_cast<uint32_t>(loom::Subsys::Launch), 0u);
  EXPECT_NE(c.subsystems & static_cast<uint32_t>(loom::Subsys::Init), 0u);
}

TEST(Logging, FileGetsHostPidAndRankPrefix) {
  std::string pattern = ::testing::TempDir() + "loomlog.%h.%p";
  loom::LogConfig c;
  c.level = loom::LogLevel::Info;
  c.file = pattern;
  loom::configureLogging(c);
  {
    loom::LogRankScope scope(7);
    LOOM_INFO(Init, "hello %d", 42);
    LOOM_TRACE(Init, "not at INFO");
  }
  loom::configureLogging(loom::LogConfig{});
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string path = ::testing::TempDir() + "loomlog." + host + "." + std::to_string(::getpid());
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, std::string(host) + ":" + std::to_string(::getpid()) + ":7 loom INFO INIT hello 42");
  EXPECT_FALSE(std::getline(in, line)) << "TRACE leaked at INFO: " << line;
  ::unlink(path.c_str());
}

// copyBytes takes one of two paths by size and by the buffers' relative
// alignment: every byte is copied, and none past the end, on both sides of
// the size edge (2 KiB) and of the 64-byte blocks, co-aligned or not.
TEST(CopyBytes, CopiesEveryByteAndNoMoreAtAnyRelativeAlignment) {
  std::vector<std::byte> src(3 * 4096 + 128), dst(src.size() + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + i / 251);
  for (size_t from : {0, 16}) {
    for (size_t to : {0, 1, 8, 16, 48, 64}) {
      for (size_t bytes : {0, 1, 63, 2047, 2048, 2049, 2048 + 63, 4096, 3 * 4096}) {
        std::fill(dst.begin(), dst.end(), std::byte{0xee});
        loom::copyBytes(dst.data() + to, src.data() + from, bytes);
        const std::string where = std::to_string(from) + " -> " + std::to_string(to) + ", " + std::to_string(bytes);
        EXPECT_EQ(std::memcmp(dst.data() + to, src.data() + from, bytes), 0) << where;
        EXPECT_EQ(dst[to + bytes], std::byte{0xee}) << where;
        if (to != 0) {
          EXPECT_EQ(dst[to - 1], std::byte{0xee}) << where;
        }
      }
    }
  }
}

// A peer killed a moment ago is a zombie until its launcher reaps it, and
// kill(pid, 0) still finds it: the liveness checks must count it as exited.
TEST(Processes, AZombieHasExitedAsMuchAsAReapedProcess) {
  EXPECT_FALSE(loom::processHasExited(::getpid()));
  EXPECT_FALSE(loom::processHasExited(0));
  EXPECT_FALSE(loom::processHasExited(-1));
  int wake[2];
  ASSERT_EQ(::pipe(wake), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    char byte;
    while (::read(wake[0], &byte, 1) < 0) {
    }
    ::_exit(0);
  }
  ::close(wake[0]);
  EXPECT_FALSE(loom::processHasExited(child)) << "a child that waits on its pipe runs";
  ASSERT_EQ(::write(wake[1], "x", 1), 1);
  ::close(wake[1]);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
  EXPECT_TRUE(loom::processHasExited(child)) << "a zombie";
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(loom::processHasExited(child)) << "reaped";
}

// Every type's size is its C type's, and a value that is no type is refused by name.
TEST(Datatypes, EverySizeIsItsCTypesAndOthersAreRefused) {
  const std::pair<loomDataType_t, size_t> sizes[] = {
      {loomInt8, sizeof(int8_t)},   {loomUint8, sizeof(uint8_t)},   {loomInt32, sizeof(int32_t)},
      {loomUint32, sizeof(uint32_t)}, {loomInt64, sizeof(int64_t)}, {loomUint64, sizeof(uint64_t)},
      {loomFloat16, 2},             {loomFloat32, sizeof(float)},   {loomFloat64, sizeof(double)},
      {loomBfloat16, 2}};
  static_assert(std::size(sizes) == loomNumTypes);
  for (const auto& [type, size] : sizes) EXPECT_EQ(loom::datatypeSize(type), size) << loom::datatypeName(type);
  for (const int bad : {-1, static_cast<int>(loomNumTypes), 1000, INT_MAX, INT_MIN}) {
    try {
      loom::datatypeSize(static_cast<loomDataType_t>(bad));
      ADD_FAILURE() << "datatype " << bad << " was given a size";
    } catch (const loom::Error& e) {
      EXPECT_EQ(e.code(), loomInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("datatype=" + std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

// The lock a communicator's calls take: threads that contend for it each get
// it alone (a plain counter under it loses no increment), and one that finds
// it held long sleeps until the holder gives it back, then holds it.
TEST(FutexLock, ThreadsTakeItOneAtATimeAndAWaiterSleepsUntilItIsGivenBack) {
  loom::FutexLock lock;
  uint64_t counter = 0;  // not atomic: the lock alone orders the threads' increments
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard hold(lock);
        ++counter;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kEach);

  std::atomic<bool> held{false};
  std::atomic<bool> given{false};
  lock.lock();
  std::thread waiter([&] {
    std::lock_guard hold(lock);  // sleeps: the lock is held for 50 ms
    held.store(true);
    EXPECT_TRUE(given.load()) << "the waiter took the lock while it was still held";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(held.load());
  EXPECT_FALSE(lock.try_lock());
  given.store(true);
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(held.load());
  EXPECT_TRUE(lock.try_lock()) << "the waiter gave it back";
  lock.unlock();
}
