#include "base/counters.hpp"

#include <atomic>
#include <string>

namespace loom::counters {
namespace {

std::array<std::atomic<uint64_t>, kCounterCount> values{};

}  // namespace

void add(Counter counter, uint64_t n) {
  values[static_cast<size_t>(counter)].fetch_add(n, std::memory_order_relaxed);
}

uint64_t value(Counter counter) { return values[static_cast<size_t>(counter)].load(std::memory_order_relaxed); }

std::optional<Counter> named(std::string_view name) {
  for (size_t i = 0; i < kCounterCount; ++i)
    if (kCounterNames[i] == name) return static_cast<Counter>(i);
  return std::nullopt;
}

std::string_view allNames() {
  static const std::string names = [] {
    std::string all;
    for (const std::string_view name : kCounterNames) all.append(all.empty() ? "" : ", ").append(name);
    return all;
  }();
  return names;
}

}  // namespace loom::counters
