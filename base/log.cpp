#include "base/log.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>

#include "base/env.hpp"
#include "base/error.hpp"

namespace loom {
namespace {

constexpr std::array<std::pair<std::string_view, Subsys>, 8> kSubsysNames{{
    {"INIT", Subsys::Init},
    {"BOOTSTRAP", Subsys::Bootstrap},
    {"NET", Subsys::Net},
    {"COMM", Subsys::Comm},
    {"LAUNCH", Subsys::Launch},
    {"COLL", Subsys::Coll},
    {"TUNING", Subsys::Tuning},
    {"GRAPH", Subsys::Graph},
}};

std::string_view subsysName(Subsys s) {
  for (auto [name, value] : kSubsysNames) {
    if (value == s) return name;
  }
  return "?";
}

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string substitute(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') { out += hostName(); ++i; continue; }
      if (c == 'p') { out += std::to_string(::getpid()); ++i; continue; }
    }
    out += pattern[i];
  }
  return out;
}

struct FileCloser {
  void operator()(FILE* f) const { if (f != nullptr) std::fclose(f); }
};

struct Logger {
  std::mutex mutex;
  LogConfig config;
  std::unique_ptr<FILE, FileCloser> file;  // null: stderr

  void apply(const LogConfig& c) {
    std::lock_guard lock(mutex);
    config = c;
    file.reset();
    if (!c.file.empty()) file.reset(std::fopen(substitute(c.file).c_str(), "a"));
    log_state::subsystems.store(c.subsystems, std::memory_order_relaxed);
    log_state::level.store(static_cast<int>(c.level), std::memory_order_release);
  }
};

Logger& logger() {
  static Logger instance;
  return instance;
}

thread_local int tlsRank = -1;

}  // namespace

LogConfig logConfigFromEnv() {
  LogConfig c;
  std::string level = env::get("LOOM_DEBUG");
  if (level == "NONE") c.level = LogLevel::None;
  else if (level == "WARN") c.level = LogLevel::Warn;
  else if (level == "INFO") c.level = LogLevel::Info;
  else if (level == "TRACE") c.level = LogLevel::Trace;
  else throw Error(loomInvalidArgument, "LOOM_DEBUG='" + level + "' is not one of NONE, WARN, INFO, TRACE");

  std::string list = env::get("LOOM_DEBUG_SUBSYS");
  bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  uint32_t mask = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name == "ALL") {
      mask = ~0u;
    } else if (!name.empty()) {
      bool found = false;
      for (auto [n, value] : kSubsysNames) {
        if (n == name) { mask |= static_cast<uint32_t>(value); found = true; }
      }
      if (!found) throw Error(loomInvalidArgument, "LOOM_DEBUG_SUBSYS names an unknown subsystem '" + name + "'");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  c.subsystems = exclude ? ~mask : mask;
  c.file = env::get("LOOM_DEBUG_FILE");
  return c;
}

void configureLogging(const LogConfig& config) { logger().apply(config); }

namespace log_state {
std::atomic<int> level{-1};
std::atomic<uint32_t> subsystems{0};
}  // namespace log_state

bool logEnabledFirst(LogLevel level, Subsys subsys) {
  LogConfig c;
  try {
    c = logConfigFromEnv();
  } catch (const Error& e) {
    std::fprintf(stderr, "loom: %s; logging at WARN\n", e.what());
  }
  logger().apply(c);
  return static_cast<int>(level) <= static_cast<int>(c.level) && (c.subsystems & static_cast<uint32_t>(subsys)) != 0;
}

void logMessage(LogLevel level, Subsys subsys, const char* fmt, ...) {
  static const std::string host = hostName();
  static constexpr const char* kLevelNames[] = {"NONE", "WARN", "INFO", "TRACE"};
  char body[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(body, sizeof body, fmt, args);
  va_end(args);

  Logger& l = logger();
  std::lock_guard lock(l.mutex);
  FILE* out = l.file ? l.file.get() : stderr;
  std::string rank = tlsRank >= 0 ? std::to_string(tlsRank) : "-";
  std::fprintf(out, "%s:%d:%s loom %s %.*s %s\n", host.c_str(), static_cast<int>(::getpid()), rank.c_str(),
               kLevelNames[static_cast<int>(level)], static_cast<int>(subsysName(subsys).size()),
               subsysName(subsys).data(), body);
  std::fflush(out);
}

LogRankScope::LogRankScope(int rank) : previous_(tlsRank) { tlsRank = rank; }
LogRankScope::~LogRankScope() { tlsRank = previous_; }

}  // namespace loom
