#include "comm/store/file_store.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "base/error.hpp"

namespace loom {

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {
  if (::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
    throwSystemError("file store directory " + directory_, errno);
  }
}

std::string FileStore::pathOf(const std::string& key) const {
  // Keys become file names: keep [A-Za-z0-9._-], escape the rest as %XX.
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      name += hex;
    }
  }
  return directory_ + "/" + name;
}

void FileStore::set(const std::string& key, std::span<const std::byte> value) {
  std::string path = pathOf(key);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
    if (!out) throwSystemError("file store write " + tmp, errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throwSystemError("file store rename " + path, errno);
}

std::vector<std::byte> FileStore::get(const std::string& key, Deadline deadline, const Cancellation* cancel) {
  std::string path = pathOf(key);
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      in.seekg(0, std::ios::end);
      std::vector<std::byte> value(static_cast<size_t>(in.tellg()));
      in.seekg(0);
      in.read(reinterpret_cast<char*>(value.data()), static_cast<std::streamsize>(value.size()));
      if (!in) throwSystemError("file store read " + path, errno);
      return value;
    }
    if (cancel) cancel->throwIfCancelled();
    if (deadline.expired()) {
      throw Error(loomTimeout, "timed out waiting for store key '" + key + "' in " + directory_);
    }
    pollfd p{cancel ? cancel->fd() : -1, POLLIN, 0};
    ::poll(&p, 1, deadline.capped(backoff).pollTimeoutMs());
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

void FileStore::erase(const std::string& key) { ::unlink(pathOf(key).c_str()); }

}  // namespace loom
