#include "collectives/flight_recorder.hpp"

#include <cstdio>

#include "base/coarse_clock.hpp"
#include "base/datatype.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "base/rank_file.hpp"

namespace loom::coll {
namespace {

const char* stateName(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::Running: return "running";
    case FlightRecorder::State::Done: return "done";
    case FlightRecorder::State::Failed: return "failed";
  }
  return "?";
}

}  // namespace

FlightRecorder::Entry& FlightRecorder::start(uint32_t sequence, const Collective& c,
                                             std::chrono::system_clock::time_point at) {
  // Field by field, not `e = Entry{}`: that builds and moves a string on
  // every call, where clearing the old error keeps its capacity.
  Entry& e = ring_[started_++ % kCapacity];
  e.sequence = sequence;
  e.kind = c.kind;
  e.count = c.count;
  e.type = c.type;
  e.algorithm = "-";
  e.state = State::Running;
  e.started = at;
  e.ended = {};
  e.error.clear();
  return e;
}

void FlightRecorder::finish(Entry& e, std::chrono::system_clock::time_point at) {
  e.state = State::Done;
  e.ended = at;
}

void FlightRecorder::fail(Entry& e, const std::string& error, std::chrono::system_clock::time_point at) {
  e.state = State::Failed;
  e.ended = at;
  e.error = error;
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  std::vector<Entry> out;
  const uint64_t first = started_ > kCapacity ? started_ - kCapacity : 0;
  for (uint64_t i = first; i < started_; ++i) out.push_back(ring_[i % kCapacity]);
  return out;
}

std::string FlightRecorder::text(int rank, const std::vector<std::string>& survey) const {
  const auto all = entries();
  std::string out = "flight recorder of rank " + std::to_string(rank) + ", last " + std::to_string(all.size()) +
                    " collectives:";
  for (const Entry& e : all) {
    char line[256];
    const long long ms = e.state == State::Running
                             ? 0
                             : std::chrono::duration_cast<std::chrono::milliseconds>(e.ended - e.started).count();
    std::snprintf(line, sizeof line, "\n  #%u %s count %zu %s, %s: %s after %lld ms", e.sequence,
                  collectiveName(e.kind), e.count, datatypeName(e.type), e.algorithm, stateName(e.state), ms);
    out += line;
    if (!e.error.empty()) out += " (" + e.error + ")";
  }
  if (!survey.empty()) out += "\nwhere every rank is, as rank " + std::to_string(rank) + " asked them:";
  for (size_t r = 0; r < survey.size(); ++r) out += "\n  rank " + std::to_string(r) + ": " + survey[r];
  return out;
}

std::string FlightRecorder::json(int rank, const std::vector<std::string>& survey) const {
  JsonWriter json;
  json.beginObject().field("rank", rank).key("collectives").beginArray();
  for (const Entry& e : entries()) {
    json.beginObject().field("sequence", static_cast<long long>(e.sequence)).field("collective", collectiveName(e.kind));
    json.field("count", static_cast<long long>(e.count)).field("datatype", datatypeName(e.type));
    json.field("algorithm", e.algorithm).field("state", stateName(e.state));
    json.field("started_us", microsSinceEpoch(e.started));
    if (e.state == State::Running) json.key("ended_us").null();
    else json.field("ended_us", microsSinceEpoch(e.ended));
    if (!e.error.empty()) json.field("error", e.error);
    json.endObject();
  }
  json.endArray();
  if (!survey.empty()) {
    json.key("survey").beginArray();
    for (const auto& line : survey) json.value(line);
    json.endArray();
  }
  json.endObject();
  return json.str();
}

void reportFlight(const FlightRecorder& recorder, int rank, const std::vector<std::string>& survey) {
  LOOM_WARN(Coll, "%s", recorder.text(rank, survey).c_str());
  if (auto pattern = env::getIfSet("LOOM_FLIGHT_RECORDER_FILE")) {
    if (auto path = rankFilePath(*pattern, rank, Writers::EveryRank)) {
      try {
        writeTextFile(*path, recorder.json(rank, survey), "LOOM_FLIGHT_RECORDER_FILE");
      } catch (const Error& e) {
        LOOM_WARN(Coll, "%s", e.what());  // the collective's own error is the one to report
      }
    }
  }
}

}  // namespace loom::coll
