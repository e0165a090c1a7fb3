#include "training/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "training/sha256.hpp"

namespace loom::train {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 2;  // 1: per-rank state in the writer's own layout
constexpr size_t kDigestChars = 64;
constexpr int kKept = 2;  // checkpoints kept: the newest and the one before it

// "step-00000012": names that sort in step order.
std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08llu", static_cast<unsigned long long>(step));
  return name;
}

std::string partName(int rank) { return "part-" + std::to_string(rank) + ".bin"; }

void makeDir(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw std::runtime_error("--checkpoint " + dir + ": " + error.message());
}

// Writes `bytes` to `path` whole or not at all.
void writeWhole(const std::string& path, const std::string& bytes) {
  const std::string aside = path + ".partial";
  {
    std::ofstream out(aside, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error(aside + ": cannot write");
  }
  if (std::rename(aside.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
}

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": missing");
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

template <class T>
void append(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Takes values off the front of a part's bytes, refusing to run past them.
class Reader {
 public:
  Reader(const std::string& bytes, std::string path) : bytes_(bytes), path_(std::move(path)) {}
  template <class T>
  T take() {
    T v;
    need(sizeof v);
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  size_t at() const { return at_; }

 private:
  void need(size_t n) const {
    if (bytes_.size() - at_ < n) throw std::runtime_error(path_ + ": truncated checkpoint");
  }
  const std::string& bytes_;
  std::string path_;
  size_t at_ = 0;
};

Settings readSettings(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--resume: " + path + " is missing");
  Settings found;
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) found[line.substr(0, space)] = line.substr(space + 1);
  }
  return found;
}

uint64_t number(const Settings& s, const std::string& key, const std::string& path) {
  const auto it = s.find(key);
  if (it == s.end()) throw std::invalid_argument("--resume: " + path + " has no " + key);
  try {
    return std::stoull(it->second);
  } catch (const std::exception&) {
    throw std::invalid_argument("--resume: " + path + ": " + key + " " + it->second + " is not a number");
  }
}

}  // namespace

// A part as read: its runs, where each one's values start, and its bytes.
struct CheckpointReader::Part {
  struct Run {
    size_t offset, count, at;  // at: the first value's byte in `bytes`
  };
  std::string path;
  std::vector<Run> runs;
  std::string bytes;
};

void writePart(const std::string& dir, const CheckpointInfo& info, int rank, int parts,
               std::span<const StateRun> runs) {
  const std::string folder = dir + "/" + stepName(info.step);
  makeDir(folder);
  std::string bytes(kMagic, sizeof kMagic);
  append(bytes, kVersion);
  append(bytes, static_cast<int32_t>(rank));
  append(bytes, static_cast<int32_t>(parts));
  append(bytes, info.step);
  append(bytes, static_cast<uint64_t>(info.components));
  append(bytes, static_cast<uint64_t>(runs.size()));
  for (const StateRun& r : runs) {
    if (r.values.size() != r.count * info.components) {
      throw std::logic_error("checkpoint: a run of " + std::to_string(r.count) + " parameters holds " +
                             std::to_string(r.values.size()) + " values, not " + std::to_string(info.components) +
                             " components of them");
    }
    append(bytes, static_cast<uint64_t>(r.offset));
    append(bytes, static_cast<uint64_t>(r.count));
  }
  for (const StateRun& r : runs) {
    if (!r.values.empty()) bytes.append(reinterpret_cast<const char*>(r.values.data()), r.values.size() * sizeof(float));
  }
  Sha256 sha;
  sha.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
  bytes += sha.hex();
  writeWhole(folder + "/" + partName(rank), bytes);
}

void publishCheckpoint(const std::string& dir, const CheckpointInfo& info, int parts, const Settings& settings) {
  const std::string name = stepName(info.step);
  std::string text = "step " + std::to_string(info.step) + "\noptimizer-steps " + std::to_string(info.optimizerSteps) +
                     "\nparams " + std::to_string(info.params) + "\ncomponents " + std::to_string(info.components) +
                     "\nparts " + std::to_string(parts) + "\n";
  for (const auto& [key, value] : settings) text += key + " " + value + "\n";
  writeWhole(dir + "/" + name + "/manifest", text);
  writeWhole(dir + "/latest", name + "\n");
  // The newest kKept step folders stay; a folder newer than this one (a
  // later step of a run that was stopped, then resumed from before it) is
  // stale and goes too.
  std::vector<std::string> steps;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string n = entry.path().filename().string();
    if (entry.is_directory() && n.starts_with("step-")) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  int kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const bool keep = *it <= name && kept < kKept;
    if (keep) ++kept;
    std::error_code ignored;  // a folder another job removes first is gone either way
    if (!keep) fs::remove_all(dir + "/" + *it, ignored);
  }
}

std::vector<StateRun> runsOf(std::span<const Placement> places, const std::vector<std::span<float>>& components) {
  std::vector<StateRun> runs;
  for (const Placement& p : places) {
    if (p.count == 0) continue;
    StateRun run{p.dense, p.count, {}};
    run.values.reserve(p.count * components.size());
    for (const auto& c : components) {
      const auto from = c.subspan(p.local, p.count);
      run.values.insert(run.values.end(), from.begin(), from.end());
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

CheckpointReader::CheckpointReader(const std::string& dir, const Settings& required) {
  std::ifstream latest(dir + "/latest");
  std::string name;
  if (!latest || !std::getline(latest, name) || !name.starts_with("step-")) {
    throw std::invalid_argument("--resume: no checkpoint in " + dir + " (no " + dir + "/latest)");
  }
  path_ = dir + "/" + name;
  const std::string manifest = path_ + "/manifest";
  settings_ = readSettings(manifest);
  for (const auto& [key, value] : required) {
    const auto it = settings_.find(key);
    if (it == settings_.end()) throw std::invalid_argument("--resume: the checkpoint in " + dir + " does not say its " + key);
    if (it->second != value) {
      throw std::invalid_argument("--resume: the checkpoint in " + dir + " was written with " + key + " " +
                                  it->second + ", not " + value);
    }
  }
  info_.step = number(settings_, "step", manifest);
  info_.optimizerSteps = number(settings_, "optimizer-steps", manifest);
  info_.params = number(settings_, "params", manifest);
  info_.components = number(settings_, "components", manifest);
  parts_ = static_cast<int>(number(settings_, "parts", manifest));
  if (parts_ < 1 || info_.components < 1) throw std::invalid_argument("--resume: " + manifest + " names no state");
  loaded_.resize(static_cast<size_t>(parts_));
}

CheckpointReader::~CheckpointReader() = default;

const CheckpointReader::Part& CheckpointReader::part(int index) const {
  auto& slot = loaded_[static_cast<size_t>(index)];
  if (slot) return *slot;
  auto p = std::make_unique<Part>();
  p->path = path_ + "/" + partName(index);
  p->bytes = readWhole(p->path);
  if (p->bytes.size() < kDigestChars) throw std::runtime_error(p->path + ": truncated checkpoint");
  const std::string digest = p->bytes.substr(p->bytes.size() - kDigestChars);
  p->bytes.resize(p->bytes.size() - kDigestChars);
  Sha256 sha;
  sha.update(std::as_bytes(std::span(p->bytes.data(), p->bytes.size())));
  if (sha.hex() != digest) throw std::runtime_error(p->path + ": its SHA-256 does not match (torn or altered)");
  Reader r(p->bytes, p->path);
  char magic[sizeof kMagic];
  for (char& c : magic) c = r.take<char>();
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0 || r.take<uint32_t>() != kVersion) {
    throw std::runtime_error(p->path + ": not a Loom checkpoint of version " + std::to_string(kVersion));
  }
  if (r.take<int32_t>() != index || r.take<int32_t>() != parts_ || r.take<uint64_t>() != info_.step ||
      r.take<uint64_t>() != info_.components) {
    throw std::runtime_error(p->path + ": written for another part, step or state than its manifest says");
  }
  const auto count = r.take<uint64_t>();
  size_t values = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const auto offset = r.take<uint64_t>();
    const auto n = r.take<uint64_t>();
    if (offset > info_.params || n > info_.params - offset) {
      throw std::runtime_error(p->path + ": a run past the model's " + std::to_string(info_.params) + " parameters");
    }
    p->runs.push_back({offset, n, 0});
    values += n * info_.components;
  }
  size_t at = r.at();
  if (p->bytes.size() - at != values * sizeof(float)) throw std::runtime_error(p->path + ": truncated checkpoint");
  for (auto& run : p->runs) {
    run.at = at;
    at += run.count * info_.components * sizeof(float);
  }
  slot = std::move(p);
  return *slot;
}

void CheckpointReader::read(size_t component, size_t offset, std::span<float> out) const {
  if (component >= info_.components) {
    throw std::runtime_error(path_ + ": holds " + std::to_string(info_.components) + " components of state, not " +
                             std::to_string(component + 1));
  }
  size_t filled = 0;  // parameters of out found so far; runs never overlap
  for (int index = 0; index < parts_ && filled < out.size(); ++index) {
    const Part& p = part(index);
    for (const Part::Run& run : p.runs) {
      const size_t from = std::max(run.offset, offset);
      const size_t to = std::min(run.offset + run.count, offset + out.size());
      if (from >= to) continue;
      const size_t byte = run.at + (component * run.count + (from - run.offset)) * sizeof(float);
      std::memcpy(out.data() + (from - offset), p.bytes.data() + byte, (to - from) * sizeof(float));
      filled += to - from;
    }
  }
  if (filled != out.size()) {
    throw std::runtime_error(path_ + ": its parts hold " + std::to_string(filled) + " of parameters " +
                             std::to_string(offset) + ".." + std::to_string(offset + out.size()) + ", not all");
  }
}

void CheckpointReader::readInto(std::span<const Placement> places, const std::vector<std::span<float>>& components) const {
  for (const Placement& p : places) {
    if (p.count == 0) continue;
    for (size_t c = 0; c < components.size(); ++c) read(c, p.dense, components[c].subspan(p.local, p.count));
  }
}

}  // namespace loom::train
