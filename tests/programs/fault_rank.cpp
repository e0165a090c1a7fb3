// A rank for the fault tests: real processes, real faults.
//   loom_test_fault kill|stop|kill-watcher-aborts VICTIMS DIR COUNT
// Every rank runs all-reduces of COUNT floats. Each victim (VICTIMS: a rank,
// or several with commas) starts one and, 20 ms in, SIGKILLs itself (kill)
// or SIGSTOPs itself (stop), having written its pid and the steady-clock
// time of the fault to DIR/victim.RANK. The others must see their all-reduce
// fail with loomRemoteError naming a victim; each prints how long after the
// fault that was ("detected after X ms"), waits until the watchdogs have
// named every victim failed (and no other rank), shrinks the communicator
// to the survivors, checks an all-reduce among them exactly, then
// SIGKILLs a stopped victim. Exit 0 only if all of that held. With
// LOOM_TEST_FAULT_DEVICE=1 the buffer is device memory (a GPU's, else the
// fake device's): the all-reduces read each other's in place.
// kill-watcher-aborts (3 ranks, one victim): the victim is killed as with
// kill; the rank that watches it (the next) all-reduces and aborts its
// communicator the moment its watchdog declares the victim (a thread that
// spins on loomCommGetAsyncError), as a program that gives up on a failure
// does; the third rank makes no call and waits for its watchdog to name a
// failed rank: the first it names must be the victim, not the watcher
// whose heartbeats ended with its abort ("first failed rank F"). The
// watcher holds the third rank stopped (SIGSTOP) from before the victim
// dies until its own abort has ended, so that the third finds the
// watcher's notice and the end of its heartbeats waiting together.
#include <loom/loom.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/device_memory.hpp"

namespace {

long long nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int fail(const char* what, loomComm_t comm) {
  std::printf("FAIL %s: %s\n", what, loomGetLastError(comm));
  return 1;
}

// Waits up to 10 s for `path` to exist; false if it never does.
bool waitForFile(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    if (std::ifstream(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Writes `text` to `path` whole (renamed into place).
void writeFile(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp");
    out << text;
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// kill-watcher-aborts' survivors (above main).
int watcherAborts(loomComm_t comm, int rank, int size, int victim, float* buffer, size_t count, const std::string& dir) {
  if (size != 3) return fail("kill-watcher-aborts runs on 3 ranks", comm);
  const int third = (victim + 2) % size;
  if (rank == (victim + 1) % size) {
    long long pid = 0;
    if (!waitForFile(dir + "/third") || !(std::ifstream(dir + "/third") >> pid)) return fail("the third rank's pid", comm);
    ::kill(static_cast<pid_t>(pid), SIGSTOP);
    writeFile(dir + "/stopped", "1\n");
    std::thread aborter([&] {
      loomResult_t async = loomSuccess;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (async == loomSuccess && std::chrono::steady_clock::now() < until) loomCommGetAsyncError(comm, &async);
      loomCommAbort(comm);
    });
    loomAllReduce(buffer, buffer, count, loomFloat32, loomSum, comm, nullptr);  // ends with the abort
    aborter.join();
    ::kill(static_cast<pid_t>(pid), SIGCONT);
    std::printf("rank %d: aborted\n", rank);
    return 0;
  }
  if (rank != third) return fail("not a rank of kill-watcher-aborts", comm);
  writeFile(dir + "/third", std::to_string(::getpid()) + "\n");
  std::vector<int> failed(static_cast<size_t>(size), -1);
  int failedCount = 0;
  for (int i = 0; i < 20000 && failedCount == 0; ++i) {
    if (loomCommGetFailedRanks(comm, failed.data(), size, &failedCount) != loomSuccess) {
      return fail("loomCommGetFailedRanks", comm);
    }
    if (failedCount == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (failedCount == 0) return fail("no rank was named failed within 20 s", comm);
  std::printf("rank %d: first failed rank %d\n", rank, failed[0]);
  loomCommAbort(comm);
  return failed[0] == victim ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a test that kills a hung rank still shows how far it got
  const std::string mode = argv[1];
  std::vector<int> victims;
  {
    std::istringstream list(argv[2]);
    for (std::string v; std::getline(list, v, ',');) victims.push_back(std::atoi(v.c_str()));
    std::sort(victims.begin(), victims.end());
  }
  const std::string victimFiles = std::string(argv[3]) + "/victim.";
  const size_t count = std::strtoull(argv[4], nullptr, 10);

  loomComm_t comm = nullptr;
  if (loomCommInitFromEnv(&comm, nullptr) != loomSuccess) return fail("init", nullptr);
  int rank = -1, size = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &size);
  std::vector<float> data(count, 1.0f);
  const char* onDevice = std::getenv("LOOM_TEST_FAULT_DEVICE");
  std::optional<loom::test::DeviceBuffer> device;
  float* buffer = data.data();  // what the all-reduces run on
  if (onDevice != nullptr && std::string(onDevice) == "1") {
    device.emplace(count * sizeof(float));
    device->upload(data.data());
    buffer = reinterpret_cast<float*>(device->data());
  }
  if (loomAllReduce(buffer, buffer, count, loomFloat32, loomSum, comm, nullptr) != loomSuccess) {
    return fail("warm-up all-reduce", comm);
  }

  if (std::find(victims.begin(), victims.end(), rank) != victims.end()) {
    std::thread reduce([&] { loomAllReduce(buffer, buffer, count, loomFloat32, loomSum, comm, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::string file = victimFiles + std::to_string(rank);
    {
      std::ofstream out(file + ".tmp");
      out << ::getpid() << " " << nowUs() << "\n";
    }
    std::rename((file + ".tmp").c_str(), file.c_str());
    // The third rank stopped first: it must not see this rank die itself.
    if (mode == "kill-watcher-aborts" && !waitForFile(std::string(argv[3]) + "/stopped")) return 4;
    ::raise(mode == "stop" ? SIGSTOP : SIGKILL);
    reduce.join();  // only after SIGCONT, which the test never sends
    return 3;
  }

  if (mode == "kill-watcher-aborts") return watcherAborts(comm, rank, size, victims.at(0), buffer, count, argv[3]);

  // The survivors: all-reduce until one fails.
  loomResult_t result = loomSuccess;
  for (int i = 0; i < 100000 && result == loomSuccess; ++i) {
    result = loomAllReduce(buffer, buffer, count, loomFloat32, loomSum, comm, nullptr);
  }
  const long long failedAt = nowUs();
  const std::string message = loomGetLastError(comm);
  // Each victim's pid, and the first fault's time.
  std::vector<long long> pids;
  long long faultAt = 0;
  for (int v : victims) {
    long long pid = 0, at = 0;
    for (int i = 0; i < 1000 && !(std::ifstream(victimFiles + std::to_string(v)) >> pid >> at); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid == 0) return fail("a victim wrote no pid", comm);
    pids.push_back(pid);
    faultAt = faultAt == 0 ? at : std::min(faultAt, at);
  }
  std::printf("rank %d: detected after %.1f ms: %s\n", rank, static_cast<double>(failedAt - faultAt) / 1000.0,
              message.c_str());
  if (result != loomRemoteError) return fail("the all-reduce did not fail with loomRemoteError", comm);
  if (std::none_of(victims.begin(), victims.end(),
                   [&](int v) { return message.find("rank " + std::to_string(v)) != std::string::npos; })) {
    return fail("the error does not name a victim", comm);
  }
  loomResult_t async = loomSuccess;
  loomCommGetAsyncError(comm, &async);
  if (async != loomRemoteError) return fail("loomCommGetAsyncError is not loomRemoteError", comm);

  // Go on without the ranks the watchdogs declared failed: the victims, and
  // only they. A call that met a dead connection first may come before the
  // watchdog's notice, which follows within the bound docs/failures.md states.
  std::vector<int> failed(static_cast<size_t>(size), -1);
  int failedCount = 0;
  const auto enough = static_cast<int>(victims.size());
  for (int i = 0; i < 1000 && failedCount < enough; ++i) {
    if (loomCommGetFailedRanks(comm, failed.data(), size, &failedCount) != loomSuccess) {
      return fail("loomCommGetFailedRanks", comm);
    }
    if (failedCount < enough) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  failed.resize(static_cast<size_t>(std::min(failedCount, size)));
  std::sort(failed.begin(), failed.end());
  std::printf("rank %d: failed ranks:", rank);
  for (int f : failed) std::printf(" %d", f);
  std::printf("\n");
  if (failed != victims) return fail("loomCommGetFailedRanks does not name the victims alone", comm);
  loomComm_t survivors = nullptr;
  if (loomCommShrink(comm, failed.data(), static_cast<int>(failed.size()), &survivors, nullptr, LOOM_SHRINK_DEFAULT) !=
      loomSuccess) {
    return fail("loomCommShrink", comm);
  }
  int newRank = -1, newSize = 0;
  loomCommUserRank(survivors, &newRank);
  loomCommCount(survivors, &newSize);
  const auto below = std::count_if(victims.begin(), victims.end(), [&](int v) { return v < rank; });
  if (newSize != size - enough || newRank != rank - below) {
    std::printf("FAIL shrink made rank %d of %d of rank %d of %d\n", newRank, newSize, rank, size);
    return 1;
  }
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 7);
  if (device) device->upload(data.data());
  if (loomAllReduce(buffer, buffer, count, loomFloat32, loomSum, survivors, nullptr) != loomSuccess) {
    return fail("all-reduce among the survivors", survivors);
  }
  if (device) device->download(data.data());
  int rankSum = size * (size + 1) / 2;  // the survivors' rank + 1, summed
  for (int v : victims) rankSum -= v + 1;
  for (size_t i = 0; i < count; ++i) {
    if (data[i] != static_cast<float>(rankSum) * static_cast<float>(i % 7)) {
      std::printf("FAIL survivors' all-reduce: element %zu is %g\n", i, static_cast<double>(data[i]));
      return 1;
    }
  }
  std::printf("rank %d: survivors' rank %d of %d ok\n", rank, newRank, newSize);
  // Only now: until the survivors' shrink, rank 0 may still be surveying the stopped rank.
  if (mode == "stop") {
    for (long long pid : pids) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  if (loomCommDestroy(survivors) != loomSuccess) return fail("destroying the survivors' communicator", nullptr);
  if (loomCommDestroy(comm) != loomSuccess) return fail("destroying the revoked communicator", nullptr);
  return 0;
}
