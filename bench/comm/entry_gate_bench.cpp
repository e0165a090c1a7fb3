// The entry gate's hand-off (comm/entry_gate.hpp): threads, each driving one
// rank of a GPU they share, each iteration entering one call and passing the
// gate once every peer has entered its own: what a small call of threads on
// one GPU pays at the host before it queues anything. Google Benchmark divides
// the real time by every thread's iterations together, so one round is the
// Time column x threads.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/entry_gate.hpp"

namespace {

void EntryGateRound(benchmark::State& state) {
  // One gate per thread count, shared by its threads; each thread runs as
  // many iterations as the others, so every rank's calls stay matched.
  static std::mutex made;
  static std::map<int, std::unique_ptr<loom::EntryGate>> gates;
  const int n = state.threads();
  loom::EntryGate* gate = nullptr;
  {
    std::lock_guard lock(made);
    auto& slot = gates[n];
    if (!slot) slot = std::make_unique<loom::EntryGate>();
    gate = slot.get();
  }
  const int rank = state.thread_index();
  std::vector<bool> besides(static_cast<size_t>(n), true);
  besides[static_cast<size_t>(rank)] = false;
  for (auto _ : state) {
    gate->enterCall(rank, besides);
    gate->pass(rank, std::chrono::seconds(60));
  }
}
BENCHMARK(EntryGateRound)->Threads(2)->Threads(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
