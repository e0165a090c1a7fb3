// The limits bench/compare quotes and the placement it records.
//
// Without arguments: memcpy bandwidth between two 64 MiB buffers on 1 and on
// 2 threads (GB/s of bytes copied, median of 7).
//
// --crosscore: the one-way latency of a cache line between CPUs 0 and 1 (two
// threads, each bound to one, hand a counter back and forth; median of 9
// batches). On the project's 2-vCPU VMs the host places the two vCPUs close
// (about 0.03 us, cores that share a cache) or far (0.12-0.18 us), and moves
// them between the two over minutes: small collectives of two ranks run at
// that line's pace, so a run's figures mean little without it.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

double copyGBps(int threads) {
  constexpr size_t kBytes = 64u << 20;
  std::vector<std::vector<char>> src(static_cast<size_t>(threads)), dst(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    src[static_cast<size_t>(t)].assign(kBytes, 1);
    dst[static_cast<size_t>(t)].assign(kBytes, 0);
  }
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { std::memcpy(dst[static_cast<size_t>(t)].data(), src[static_cast<size_t>(t)].data(), kBytes); });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    runs.push_back(static_cast<double>(kBytes) * threads / s / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// Binds the calling thread to `cpu` (mayRunOnFirstTwo says first whether it may).
void bindTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// The counter two threads hand back and forth, alone in an aligned pair of
// cache lines (the pair a core's prefetcher fetches together), apart from
// either thread's stack.
struct alignas(128) Handoff {
  std::atomic<long> counter{0};
};

// The spin loop's hint to the core (x86's pause): without it the loop's
// codegen alone moved the figure between 0.028 and 0.048 us here, with it
// two different loops agreed.
inline void spinHint() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Answers the values from `from` up to `last`, every second one: each side
// waits for the other's value and answers with the next (the even values
// are CPU 0's to answer, the odd ones CPU 1's).
void play(Handoff& h, long from, long last) {
  for (long i = from; i < last; i += 2) {
    while (h.counter.load(std::memory_order_acquire) != i) spinHint();
    h.counter.store(i + 1, std::memory_order_release);
  }
}

// Whether this process may run on CPUs 0 and 1.
bool mayRunOnFirstTwo() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_ISSET(0, &set) && CPU_ISSET(1, &set);
}

// The microseconds one hand-off of the counter between CPUs 0 and 1 took,
// per batch of `handoffs`, both threads bound and spinning throughout
// (threads started between batches measured slower hand-offs here).
std::vector<double> oneWayUs(int batches, long handoffs) {
  const auto h = std::make_unique<Handoff>();
  std::thread other([h = h.get(), total = batches * handoffs] {
    bindTo(1);
    play(*h, 1, total);
  });
  bindTo(0);
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    play(*h, b * handoffs, (b + 1) * handoffs);
    while (h->counter.load(std::memory_order_acquire) != (b + 1) * handoffs) spinHint();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                 static_cast<double>(handoffs));
  }
  other.join();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--crosscore") == 0) {
    if (!mayRunOnFirstTwo()) {
      std::printf("crosscore_oneway_us nan\n");  // no two CPUs to bind to
    } else {
      std::vector<double> batches = oneWayUs(9, 20000);
      std::sort(batches.begin(), batches.end());
      std::printf("crosscore_oneway_us %.3f\n", batches[batches.size() / 2]);
    }
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: loom-bench-membw [--crosscore]\n");
    return 2;
  }
  std::printf("memcpy_1thread_GBps %.2f\n", copyGBps(1));
  std::printf("memcpy_2threads_GBps %.2f\n", copyGBps(2));
  return 0;
}
