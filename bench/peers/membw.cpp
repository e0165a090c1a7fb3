// The memory limit bench/compare quotes: memcpy bandwidth between two 64 MiB
// buffers on 1 and on 2 threads (GB/s of bytes copied, median of 7).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

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

}  // namespace

int main() {
  std::printf("memcpy_1thread_GBps %.2f\n", copyGBps(1));
  std::printf("memcpy_2threads_GBps %.2f\n", copyGBps(2));
  return 0;
}
