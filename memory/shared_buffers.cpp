#include "memory/shared_buffers.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/error.hpp"

namespace loom::memory {
namespace {

struct Allocation {
  size_t bytes;
  int fd;
  uint64_t serial;
};

// Every live allocation of this process, by start address.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> byStart;
  uint64_t serials = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may come from static destructors
  return *r;
}

}  // namespace

void* allocateShared(size_t bytes) {
  if (bytes == 0) throw Error(loomInvalidArgument, "size is 0");
  const int fd = ::memfd_create("loom-buffer", MFD_CLOEXEC);
  if (fd < 0) throwSystemError("memfd_create", errno);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    throwSystemError("ftruncate of a " + std::to_string(bytes) + "-byte shared buffer", e);
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    throwSystemError("mmap of a " + std::to_string(bytes) + "-byte shared buffer", e);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.byStart[reinterpret_cast<uintptr_t>(p)] = {bytes, fd, ++r.serials};
  return p;
}

void freeShared(void* p) {
  Registry& r = registry();
  Allocation a;
  {
    std::lock_guard lock(r.mutex);
    auto it = r.byStart.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.byStart.end()) throw Error(loomInvalidArgument, "ptr was not returned by loomMemAlloc (or was freed)");
    a = it->second;
    r.byStart.erase(it);
  }
  ::munmap(p, a.bytes);
  ::close(a.fd);
}

std::optional<SharedRef> findShared(const void* p, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.byStart.upper_bound(start);
  if (it == r.byStart.begin()) return std::nullopt;
  --it;
  const uintptr_t offset = start - it->first;
  if (offset + bytes > it->second.bytes) return std::nullopt;
  return SharedRef{.pid = static_cast<int32_t>(::getpid()),
                   .fd = it->second.fd,
                   .serial = it->second.serial,
                   .mapBytes = it->second.bytes,
                   .offset = offset,
                   .address = start};
}

PeerMappings::~PeerMappings() {
  for (const auto& m : mappings_) ::munmap(m.data, m.bytes);
}

const std::byte* PeerMappings::map(const SharedRef& ref) {
  if (ref.pid == ::getpid()) return reinterpret_cast<const std::byte*>(ref.address);
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
    if (it->pid == ref.pid && it->serial == ref.serial) {
      mappings_.splice(mappings_.begin(), mappings_, it);
      return it->data + ref.offset;
    }
  }
  // The owner holds the fd open for as long as the allocation lives, and it
  // is inside the collective that published `ref`: the fd is that allocation.
  const std::string path = "/proc/" + std::to_string(ref.pid) + "/fd/" + std::to_string(ref.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(loomSystemError, "cannot open the loomMemAlloc buffer of pid " + std::to_string(ref.pid) + " (" + path +
                                     "): " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, ref.mapBytes, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throwSystemError("mmap of the loomMemAlloc buffer of pid " + std::to_string(ref.pid), e);
  if (mappings_.size() == kCapacity) {
    ::munmap(mappings_.back().data, mappings_.back().bytes);
    mappings_.pop_back();
  }
  mappings_.push_front({ref.pid, ref.serial, static_cast<std::byte*>(p), ref.mapBytes});
  return mappings_.front().data + ref.offset;
}

}  // namespace loom::memory
