#include "training/checkpoint.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "training/sha256.hpp"

namespace loom::train {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

std::string rankFile(const std::string& dir, int rank) { return dir + "/rank-" + std::to_string(rank) + ".bin"; }

void makeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error("--checkpoint " + dir + ": " + std::strerror(errno));
  }
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

template <class T>
void append(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

class Reader {
 public:
  Reader(std::string bytes, std::string path) : bytes_(std::move(bytes)), path_(std::move(path)) {}
  template <class T>
  T take() {
    T v;
    need(sizeof v);
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  void into(std::span<float> out) {
    need(out.size_bytes());
    if (out.empty()) return;  // a chunk or shard with no parameters: nothing to copy (and no pointer)
    std::memcpy(out.data(), bytes_.data() + at_, out.size_bytes());
    at_ += out.size_bytes();
  }
  size_t at() const { return at_; }

 private:
  void need(size_t n) const {
    if (bytes_.size() - at_ < n) throw std::runtime_error(path_ + ": truncated checkpoint");
  }
  std::string bytes_;
  std::string path_;
  size_t at_ = 0;
};

}  // namespace

void writeRankState(const std::string& dir, int rank, int ranks, uint64_t step, uint64_t optimizerSteps,
                    std::span<const std::span<float>> buffers) {
  makeDir(dir);
  std::string bytes(kMagic, sizeof kMagic);
  append(bytes, kVersion);
  append(bytes, static_cast<int32_t>(rank));
  append(bytes, static_cast<int32_t>(ranks));
  append(bytes, step);
  append(bytes, optimizerSteps);
  append(bytes, static_cast<uint64_t>(buffers.size()));
  for (const auto& b : buffers) {
    append(bytes, static_cast<uint64_t>(b.size()));
    if (!b.empty()) bytes.append(reinterpret_cast<const char*>(b.data()), b.size_bytes());
  }
  Sha256 sha;
  sha.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
  bytes += sha.hex();
  writeWhole(rankFile(dir, rank), bytes);
}

void writeManifest(const std::string& dir, const Manifest& manifest, uint64_t step) {
  std::string text = "step " + std::to_string(step) + "\n";
  for (const auto& [key, value] : manifest) text += key + " " + value + "\n";
  writeWhole(dir + "/manifest", text);
}

uint64_t readManifest(const std::string& dir, const Manifest& expected) {
  std::ifstream in(dir + "/manifest");
  if (!in) throw std::invalid_argument("--resume: no checkpoint in " + dir + " (no manifest)");
  Manifest found;
  std::string line;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) found[line.substr(0, space)] = line.substr(space + 1);
  }
  for (const auto& [key, value] : expected) {
    const auto it = found.find(key);
    if (it == found.end()) throw std::invalid_argument("--resume: the checkpoint in " + dir + " does not say its " + key);
    if (it->second != value) {
      throw std::invalid_argument("--resume: the checkpoint in " + dir + " was written with " + key + " " +
                                  it->second + ", not " + value);
    }
  }
  const auto step = found.find("step");
  if (step == found.end()) throw std::invalid_argument("--resume: the checkpoint in " + dir + " has no step");
  return std::stoull(step->second);
}

uint64_t readRankState(const std::string& dir, int rank, int ranks, uint64_t step,
                       std::span<const std::span<float>> buffers) {
  const std::string path = rankFile(dir, rank);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": missing");
  std::stringstream all;
  all << in.rdbuf();
  std::string bytes = all.str();
  if (bytes.size() < 64) throw std::runtime_error(path + ": truncated checkpoint");
  const std::string digest = bytes.substr(bytes.size() - 64);
  bytes.resize(bytes.size() - 64);
  Sha256 sha;
  sha.update(std::as_bytes(std::span(bytes.data(), bytes.size())));
  if (sha.hex() != digest) throw std::runtime_error(path + ": its SHA-256 does not match (torn or altered)");
  Reader r(std::move(bytes), path);
  char magic[sizeof kMagic];
  for (char& c : magic) c = r.take<char>();
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0 || r.take<uint32_t>() != kVersion) {
    throw std::runtime_error(path + ": not a Loom checkpoint of version " + std::to_string(kVersion));
  }
  if (r.take<int32_t>() != rank || r.take<int32_t>() != ranks || r.take<uint64_t>() != step) {
    throw std::runtime_error(path + ": written by another rank, job size or step");
  }
  const auto optimizerSteps = r.take<uint64_t>();
  if (r.take<uint64_t>() != buffers.size()) throw std::runtime_error(path + ": another number of buffers");
  for (const auto& b : buffers) {
    if (r.take<uint64_t>() != b.size()) throw std::runtime_error(path + ": a buffer of another size");
    r.into(b);
  }
  return optimizerSteps;
}

}  // namespace loom::train
