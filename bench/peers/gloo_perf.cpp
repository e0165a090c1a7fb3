// Gloo's collectives (TCP transport on loopback, file-store rendezvous)
// measured with loom-perf's method (sweep.hpp), as the peer in bench/compare.
// Forks -N ranks itself (or, with --rank, runs one rank of a job spread over
// machines); float32 sums, out of place. Gloo's reduce-scatter
// has no options-style API in this version, so it is not measured.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/peers/sweep.hpp"

namespace {

void runRank(const loom::bench::Sweep& s, int rank, const std::string& storeDir) {
  gloo::transport::tcp::attr attr(s.address.c_str());
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(storeDir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, s.nranks);
  context->connectFullMesh(store, device);
  const int n = s.nranks;
  const size_t maxElements = s.maxBytes / sizeof(float) + 1;
  std::vector<float> send(maxElements, 1.0f), recv(maxElements, 0.0f);

  auto run = [&](size_t bytes) {
    const size_t count = bytes / sizeof(float);
    if (s.collective == "all_reduce") {
      gloo::AllreduceOptions opts(context);
      opts.setInput(send.data(), count);
      opts.setOutput(recv.data(), count);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(opts);
    } else if (s.collective == "all_gather") {
      gloo::AllgatherOptions opts(context);
      opts.setInput(send.data(), count / static_cast<size_t>(n));
      opts.setOutput(recv.data(), count / static_cast<size_t>(n) * static_cast<size_t>(n));
      gloo::allgather(opts);
    } else if (s.collective == "broadcast") {
      gloo::BroadcastOptions opts(context);
      if (rank == 0) opts.setInput(send.data(), count);
      opts.setOutput(recv.data(), count);
      opts.setRoot(0);
      gloo::broadcast(opts);
    }
  };
  auto barrier = [&] {
    gloo::BarrierOptions opts(context);
    gloo::barrier(opts);
  };
  auto slowest = [&](double us) {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(&us, 1);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(opts);
    return us;
  };
  loom::bench::runSweep(s, rank, n, run, barrier, slowest, send.data());
}

}  // namespace

int main(int argc, char** argv) {
  const loom::bench::Sweep s = loom::bench::parseSweep(argc, argv);
  if (s.collective == "reduce_scatter" || s.collective == "sendrecv") {
    std::fprintf(stderr, "gloo_perf: %s is not measured (no options-style reduce-scatter in this Gloo; "
                 "point-to-point is not a collective of its)\n", s.collective.c_str());
    return 3;
  }
  if (s.rank >= 0) {  // one rank of a job spread over machines (or network namespaces)
    runRank(s, s.rank, s.store);
    return 0;
  }
  char dir[] = "/tmp/gloo-perf-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  std::vector<pid_t> children;
  for (int rank = 0; rank < s.nranks; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      runRank(s, rank, dir);
      std::fflush(stdout);
      ::_exit(0);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::system((std::string("rm -rf ") + dir).c_str());
  return failed;
}
