#include "training/parallel/timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace loom::train {
namespace {

constexpr const char* kNames[] = {"forward", "backward", "send", "receive", "optimizer", "gather", "weights", "reduce"};

std::string microseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

}  // namespace

std::vector<double> packEvents(std::span<const TimelineEvent> events) {
  std::vector<double> out;
  out.reserve(events.size() * kPackedEventDoubles);
  for (const TimelineEvent& e : events) {
    out.insert(out.end(), {static_cast<double>(e.kind), static_cast<double>(e.micro), static_cast<double>(e.chunk),
                           e.start, e.end});
  }
  return out;
}

std::vector<TimelineEvent> unpackEvents(std::span<const double> packed) {
  std::vector<TimelineEvent> out;
  for (size_t at = 0; at + kPackedEventDoubles <= packed.size(); at += kPackedEventDoubles) {
    const double kind = packed[at];
    if (kind < 0 || kind >= static_cast<double>(std::size(kNames))) continue;
    out.push_back({static_cast<TimelineEvent::Kind>(static_cast<int>(kind)), static_cast<int>(packed[at + 1]),
                   static_cast<int>(packed[at + 2]), packed[at + 3], packed[at + 4]});
  }
  return out;
}

void writeChromeTrace(const std::string& path, const std::vector<std::vector<TimelineEvent>>& ranks) {
  double origin = std::numeric_limits<double>::infinity();
  for (const auto& events : ranks) {
    for (const auto& e : events) origin = std::min(origin, e.start);
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  const auto add = [&](const std::string& record) {
    out += (first ? "  " : ",\n  ") + record;
    first = false;
  };
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string tid = std::to_string(r);
    add("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " + tid + ", \"args\": {\"name\": \"rank " +
        tid + "\"}}");
    std::vector<TimelineEvent> events = ranks[r];
    std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
    double busyUntil = events.empty() ? 0 : events.front().start;
    for (const TimelineEvent& e : events) {
      if (e.start > busyUntil) {
        add("{\"name\": \"idle\", \"cat\": \"idle\", \"ph\": \"X\", \"pid\": 0, \"tid\": " + tid +
            ", \"ts\": " + microseconds(busyUntil - origin) + ", \"dur\": " + microseconds(e.start - busyUntil) + "}");
      }
      std::string name = kNames[static_cast<size_t>(e.kind)];
      if (e.micro >= 0) name += " " + std::to_string(e.micro);
      add("{\"name\": \"" + name + "\", \"cat\": \"" + kNames[static_cast<size_t>(e.kind)] +
          "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " + tid + ", \"ts\": " + microseconds(e.start - origin) +
          ", \"dur\": " + microseconds(e.end - e.start) + ", \"args\": {\"micro_batch\": " + std::to_string(e.micro) +
          ", \"chunk\": " + std::to_string(e.chunk) + "}}");
      busyUntil = std::max(busyUntil, e.end);
    }
  }
  out += "\n]}\n";
  std::ofstream file(path);
  file << out;
  if (!file) throw std::runtime_error("--timeline " + path + ": cannot write");
}

}  // namespace loom::train
