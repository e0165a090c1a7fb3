// What a collective call costs before any data moves: the public API's path
// (argument checks, the caller's group, the tuner's choice, the flight
// recorder and the progress a peer may ask about) on a 1-rank communicator,
// whose call has nothing to wait for. Every small collective of more ranks
// pays this on top of its hand-offs: Open MPI's 2-rank 8-byte broadcast
// receiver takes about 0.07 us in all (bench/RESULTS.md, "the small cells to
// the hundredth of a microsecond").
#include <benchmark/benchmark.h>
#include <loom/loom.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

// One 1-rank communicator for the whole run.
loomComm_t comm() {
  static loomComm_t made = [] {
    loomUniqueId id;
    loomComm_t c = nullptr;
    if (loomGetUniqueId(&id) != loomSuccess || loomCommInitRank(&c, 1, id, 0) != loomSuccess) {
      std::fprintf(stderr, "loom-bench-call: cannot make a 1-rank communicator: %s\n", loomGetLastError(nullptr));
      std::exit(1);
    }
    return c;
  }();
  return made;
}

void require(loomResult_t r, benchmark::State& state) {
  if (r != loomSuccess) state.SkipWithError(loomGetLastError(comm()));
}

// One collective of 8 bytes, out of place, or in place where state.range(0) is 1.
using Collective = loomResult_t (*)(const void* in, void* out, loomComm_t comm);
void OneCollective(benchmark::State& state, Collective call) {
  uint64_t in = 1, out = 0;
  uint64_t* dst = state.range(0) == 1 ? &in : &out;
  const loomComm_t c = comm();
  for (auto _ : state) require(call(&in, dst, c), state);
}
BENCHMARK_CAPTURE(OneCollective, Broadcast, [](const void* in, void* out, loomComm_t c) {
  return loomBroadcast(in, out, 1, loomUint64, 0, c, nullptr);
})->Arg(0)->Arg(1);
BENCHMARK_CAPTURE(OneCollective, AllReduce, [](const void* in, void* out, loomComm_t c) {
  return loomAllReduce(in, out, 1, loomUint64, loomSum, c, nullptr);
})->Arg(0)->Arg(1);
BENCHMARK_CAPTURE(OneCollective, AllGather, [](const void* in, void* out, loomComm_t c) {
  return loomAllGather(in, out, 1, loomUint64, c, nullptr);
})->Arg(0)->Arg(1);
BENCHMARK_CAPTURE(OneCollective, ReduceScatter, [](const void* in, void* out, loomComm_t c) {
  return loomReduceScatter(in, out, 1, loomUint64, loomSum, c, nullptr);
})->Arg(0)->Arg(1);

// A send to itself and its receive, in one group: the point-to-point path.
void SendRecvToSelf(benchmark::State& state) {
  uint64_t in = 1, out = 0;
  const loomComm_t c = comm();  // made outside the group: an init inside one waits for its end
  for (auto _ : state) {
    require(loomGroupStart(), state);
    require(loomSend(&in, 1, loomUint64, 0, c, nullptr), state);
    require(loomRecv(&out, 1, loomUint64, 0, c, nullptr), state);
    require(loomGroupEnd(), state);
  }
}
BENCHMARK(SendRecvToSelf);

}  // namespace

BENCHMARK_MAIN();
