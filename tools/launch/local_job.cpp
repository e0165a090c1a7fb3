#include "tools/launch/local_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace loom::launch {
namespace {

constexpr auto kTermGrace = std::chrono::seconds(3);
constexpr auto kDrainGrace = std::chrono::seconds(1);

std::atomic<int> gForwardSignal{0};
void onSignal(int sig) { gForwardSignal.store(sig); }

struct Rank {
  pid_t pid = -1;
  int out = -1;  // stdout pipe
  int err = -1;  // stderr pipe
  std::string outLine, errLine;
  bool exited = false;
};

// A scratch directory for the job's file store, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "loomrun.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Forwards complete lines from `fd`; at EOF flushes the rest. Returns false at EOF.
bool pump(int fd, int rank, std::string& pending, int to, bool prefix) {
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  bool eof = n <= 0;
  if (!eof) pending.append(buf, static_cast<size_t>(n));
  std::string tag = prefix ? "[" + std::to_string(rank) + "] " : "";
  size_t start = 0;
  for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
    writeAll(to, tag + pending.substr(start, nl + 1 - start));
  }
  pending.erase(0, start);
  if (eof && !pending.empty()) {
    writeAll(to, tag + pending + "\n");
    pending.clear();
  }
  return !eof;
}

std::string describe(int rank, pid_t pid, int status) {
  std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFSIGNALED(status)) {
    return who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

// A fresh LOOM_STORE_SECRET for the job (32 hex digits), unless the caller's
// environment already has one: a store the ranks serve then admits only them.
std::string storeSecret() {
  if (const char* given = std::getenv("LOOM_STORE_SECRET"); given != nullptr && *given != '\0') return given;
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
  }
  std::string hex;
  for (unsigned char b : bytes) {
    constexpr char kDigits[] = "0123456789abcdef";
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
  }
  return hex;
}

pid_t spawn(const JobOptions& options, int rank, const std::string& store, const std::string& secret, int outFd,
            int errFd) {
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string rankText = std::to_string(rank), sizeText = std::to_string(options.nranks);
  pid_t parent = ::getpid();
  // Block the signals we forward until the child has dropped our handlers:
  // a SIGTERM that arrived in between would otherwise run our handler in the
  // child and be lost, leaving the rank to run until SIGKILL.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  sigaddset(&forwarded, SIGINT);
  sigaddset(&forwarded, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) ::setpgid(pid, pid);  // also here, so no signal can race the child's own call
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return pid;
  }
  // Child: only async-signal-safe calls and exec from here on.
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::setpgid(0, 0);                     // its own group: ending a rank ends what it started
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);  // a pending SIGTERM now ends the child
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  if (::getppid() != parent) ::_exit(127);
  ::dup2(outFd, STDOUT_FILENO);
  if (errFd >= 0) ::dup2(errFd, STDERR_FILENO);
  ::setenv("LOOM_RANK", rankText.c_str(), 1);
  ::setenv("LOOM_LOCAL_RANK", rankText.c_str(), 1);
  ::setenv("LOOM_WORLD_SIZE", sizeText.c_str(), 1);
  ::setenv("LOOM_STORE_ADDR", store.c_str(), 1);
  ::setenv("LOOM_STORE_SECRET", secret.c_str(), 1);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "loomrun: cannot execute %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

JobResult runLocalJob(const JobOptions& options) {
  if (options.nranks < 1) throw std::invalid_argument("the number of ranks must be at least 1");
  if (options.argv.empty()) throw std::invalid_argument("no program to run");
  TempDir storeDir;
  std::string store = "file://" + storeDir.path();
  const std::string secret = storeSecret();

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  struct sigaction oldInt {}, oldTerm {};
  ::sigaction(SIGINT, &sa, &oldInt);
  ::sigaction(SIGTERM, &sa, &oldTerm);

  std::vector<Rank> ranks(static_cast<size_t>(options.nranks));
  for (int r = 0; r < options.nranks; ++r) {
    // Unprefixed stderr is the launcher's own, so a rank can see a terminal
    // there (loom-perf's progress line); stdout stays piped, whole lines at a time.
    int outPipe[2], errPipe[2] = {-1, -1};
    if (::pipe2(outPipe, O_CLOEXEC) != 0 || (options.prefixOutput && ::pipe2(errPipe, O_CLOEXEC) != 0)) {
      throw std::runtime_error("pipe failed");
    }
    auto& rank = ranks[static_cast<size_t>(r)];
    rank.pid = spawn(options, r, store, secret, outPipe[1], errPipe[1]);
    ::close(outPipe[1]);
    if (errPipe[1] >= 0) ::close(errPipe[1]);
    rank.out = outPipe[0];
    rank.err = errPipe[0];
  }

  JobResult result;
  int running = options.nranks;
  auto killAt = std::chrono::steady_clock::time_point::max();  // when SIGKILL follows SIGTERM
  auto terminateAll = [&](int sig) {
    for (auto& r : ranks) ::kill(-r.pid, sig);  // the rank's whole process group
  };
  // After the last rank exits, output still in the pipes is drained for a
  // moment; a grandchild that keeps a pipe open must not hold the job.
  auto drainUntil = std::chrono::steady_clock::time_point::max();
  auto pipesOpen = [&] {
    return std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.out >= 0 || r.err >= 0; });
  };

  while (running > 0 || (pipesOpen() && std::chrono::steady_clock::now() < drainUntil)) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;  // rank index, is stderr
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].out >= 0) { fds.push_back({ranks[i].out, POLLIN, 0}); owners.emplace_back(i, false); }
      if (ranks[i].err >= 0) { fds.push_back({ranks[i].err, POLLIN, 0}); owners.emplace_back(i, true); }
    }
    ::poll(fds.data(), fds.size(), 20);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      auto [i, isErr] = owners[k];
      Rank& r = ranks[i];
      int& fd = isErr ? r.err : r.out;
      if (!pump(fd, static_cast<int>(i), isErr ? r.errLine : r.outLine, isErr ? STDERR_FILENO : STDOUT_FILENO,
                options.prefixOutput)) {
        ::close(fd);
        fd = -1;
      }
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& r = ranks[i];
      int status = 0;
      if (r.exited || ::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.exited = true;
      if (--running == 0) drainUntil = std::chrono::steady_clock::now() + kDrainGrace;
      bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      if (failed && result.failedRank < 0) {
        result.failedRank = static_cast<int>(i);
        result.exitCode = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        result.failure = describe(static_cast<int>(i), r.pid, status);
        std::fprintf(stderr, "loomrun: %s; ending the other ranks\n", result.failure.c_str());
        terminateAll(SIGTERM);
        killAt = std::chrono::steady_clock::now() + kTermGrace;
      }
    }
    if (int sig = gForwardSignal.exchange(0); sig != 0) {
      terminateAll(sig);
      killAt = std::min(killAt, std::chrono::steady_clock::now() + kTermGrace);
    }
    if (running > 0 && std::chrono::steady_clock::now() >= killAt) {
      terminateAll(SIGKILL);
      killAt = std::chrono::steady_clock::time_point::max();
    }
  }
  for (auto& r : ranks) {
    if (r.out >= 0) ::close(r.out);
    if (r.err >= 0) ::close(r.err);
  }
  terminateAll(SIGKILL);  // whatever the ranks left behind in their groups
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  return result;
}

bool launchedAsRank() {
  for (const char* v : {"LOOM_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* s = std::getenv(v); s != nullptr && *s != '\0') return true;
  }
  return false;
}

int relaunchAsLocalJob(int nranks, int argc, char** argv) {
  JobOptions job;
  job.nranks = nranks;
  job.prefixOutput = false;
  job.argv.assign(argv, argv + argc);
  job.argv[0] = "/proc/self/exe";
  return runLocalJob(job).exitCode;
}

}  // namespace loom::launch
