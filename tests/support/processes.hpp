// Runs real processes for the tests: a command with extra environment,
// its output captured, with a deadline after which it is killed.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::test {

struct ProcessResult {
  int exitCode = -1;   // 128 + signal when killed, -1 when it timed out
  std::string output;  // stdout and stderr together
  std::chrono::milliseconds elapsed{0};
  // From a KillRule's kill to this process's exit; -1 when it ended before
  // the kill, or nothing was killed. What "the others stop soon after" is
  // measured by, whatever the start-up cost (the sanitizers' is seconds).
  std::chrono::milliseconds afterKill{-1};
  int pid = -1;  // the process's id while it ran (segment names carry it)
};

ProcessResult runProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(60));

// Process `victim` gets SIGKILL once process `watched`'s output holds `trigger`.
struct KillRule {
  size_t victim;
  size_t watched;
  std::string trigger;
};

// Starts several processes at once and waits for all of them.
std::vector<ProcessResult> runProcesses(const std::vector<std::vector<std::string>>& argvs,
                                        const std::vector<std::map<std::string, std::string>>& envs,
                                        std::chrono::seconds timeout = std::chrono::seconds(60),
                                        const std::optional<KillRule>& kill = std::nullopt);

// A TCP port that was free a moment ago.
int freePort();

}  // namespace loom::test
