// Logging: LOOM_DEBUG picks the level, LOOM_DEBUG_SUBSYS the subsystems,
// LOOM_DEBUG_FILE the destination. Every line carries host, pid and the rank
// of the communicator the calling thread is working for.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace loom {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum class Subsys : uint32_t {
  Init = 1u << 0,
  Bootstrap = 1u << 1,
  Net = 1u << 2,
  Comm = 1u << 3,
  Launch = 1u << 4,
  Coll = 1u << 5,
  Tuning = 1u << 6,
  Graph = 1u << 7,  // topology: discovery, placement
};

struct LogConfig {
  LogLevel level = LogLevel::Warn;
  uint32_t subsystems = ~0u;
  std::string file;  // empty: stderr; %h and %p substituted
};

// Parses LOOM_DEBUG, LOOM_DEBUG_SUBSYS and LOOM_DEBUG_FILE; bad values are
// loomInvalidArgument naming the variable.
LogConfig logConfigFromEnv();
// Replaces the process's log configuration (the first log call reads the environment).
void configureLogging(const LogConfig& config);

// What logEnabled reads: the level (-1 until the first question reads the
// environment) and the subsystems' mask; configureLogging writes them.
namespace log_state {
extern std::atomic<int> level;
extern std::atomic<uint32_t> subsystems;
}  // namespace log_state
// logEnabled's first question: reads the environment, then answers.
bool logEnabledFirst(LogLevel level, Subsys subsys);
// Inline: every call of the API asks it (its trace), and a collective a few
// times more, where a call into the library cost 35 instructions of a
// 1-rank call's 1,450.
inline bool logEnabled(LogLevel level, Subsys subsys) {
  const int current = log_state::level.load(std::memory_order_acquire);
  if (current < 0) [[unlikely]] return logEnabledFirst(level, subsys);
  return static_cast<int>(level) <= current &&
         (log_state::subsystems.load(std::memory_order_relaxed) & static_cast<uint32_t>(subsys)) != 0;
}
void logMessage(LogLevel level, Subsys subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// Within its scope, this thread's log lines carry `rank` (threads can be ranks).
class LogRankScope {
 public:
  explicit LogRankScope(int rank);
  ~LogRankScope();
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int previous_;
};

}  // namespace loom

#define LOOM_LOG(level, subsys, ...)                                                            \
  do {                                                                                          \
    if (::loom::logEnabled(::loom::LogLevel::level, ::loom::Subsys::subsys))                    \
      ::loom::logMessage(::loom::LogLevel::level, ::loom::Subsys::subsys, __VA_ARGS__);         \
  } while (0)
#define LOOM_WARN(subsys, ...) LOOM_LOG(Warn, subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) LOOM_LOG(Info, subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) LOOM_LOG(Trace, subsys, __VA_ARGS__)
