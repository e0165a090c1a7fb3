#include "tests/support/processes.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace loom::test {
namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;
  ProcessResult result;
  bool done = false;
};

Child start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) std::abort();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipeFds[1], STDOUT_FILENO);
    ::dup2(pipeFds[1], STDERR_FILENO);
    for (const auto& [k, v] : env) {
      if (v.empty()) ::unsetenv(k.c_str());
      else ::setenv(k.c_str(), v.c_str(), 1);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipeFds[1]);
  Child child{pid, pipeFds[0], {}, false};
  child.result.pid = pid;
  return child;
}

}  // namespace

std::vector<ProcessResult> runProcesses(const std::vector<std::vector<std::string>>& argvs,
                                        const std::vector<std::map<std::string, std::string>>& envs,
                                        std::chrono::seconds timeout, const std::optional<KillRule>& kill) {
  auto t0 = std::chrono::steady_clock::now();
  bool victimKilled = false;
  std::chrono::steady_clock::time_point killedAt;
  std::vector<Child> children;
  for (size_t i = 0; i < argvs.size(); ++i) children.push_back(start(argvs[i], i < envs.size() ? envs[i] : std::map<std::string, std::string>{}));
  bool killed = false;
  for (;;) {
    bool all = true;
    std::vector<pollfd> fds;
    for (auto& c : children) {
      if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 20);
    const auto readable = [&](int fd) {  // a read of a quiet pipe would block until its child writes
      for (const auto& p : fds) {
        if (p.fd == fd) return p.revents != 0;
      }
      return false;
    };
    for (auto& c : children) {
      if (c.out >= 0 && readable(c.out)) {
        char buf[4096];
        ssize_t n = ::read(c.out, buf, sizeof buf);
        if (n > 0) c.result.output.append(buf, static_cast<size_t>(n));
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) { ::close(c.out); c.out = -1; }
      }
      if (!c.done) {
        int status = 0;
        if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
          c.done = true;
          const auto now = std::chrono::steady_clock::now();
          c.result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - t0);
          if (victimKilled) c.result.afterKill = std::chrono::duration_cast<std::chrono::milliseconds>(now - killedAt);
          c.result.exitCode = killed ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
      }
      all = all && c.done && c.out < 0;
    }
    if (kill && !victimKilled && kill->victim < children.size() && kill->watched < children.size()) {
      Child& v = children[kill->victim];
      if (!v.done && children[kill->watched].result.output.find(kill->trigger) != std::string::npos) {
        ::kill(v.pid, SIGKILL);
        victimKilled = true;
        killedAt = std::chrono::steady_clock::now();
      }
    }
    if (all) break;
    if (!killed && std::chrono::steady_clock::now() - t0 > timeout) {
      killed = true;
      for (auto& c : children) {
        if (!c.done) ::kill(c.pid, SIGKILL);
      }
    }
  }
  std::vector<ProcessResult> results;
  for (auto& c : children) results.push_back(std::move(c.result));
  return results;
}

ProcessResult runProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                         std::chrono::seconds timeout) {
  return runProcesses({argv}, {env}, timeout).front();
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace loom::test
