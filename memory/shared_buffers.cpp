#include "memory/shared_buffers.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <string>

#include "base/error.hpp"

namespace loom::memory {
namespace {

struct Live {
  size_t bytes;
  int fd;
  uint64_t serial;
};

// Every live allocation of this process, by start address.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Live> byStart;
  uint64_t serials = 0;
  // byStart's size, stored under the mutex, read without it: a process
  // with no loomMemAlloc'd buffer (most) asks every call's buffers without
  // taking the lock. A buffer the caller holds was returned after its
  // insertion, so the caller sees it counted.
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
  sharedAllocationsLive.store(r.byStart.size(), std::memory_order_release);
  return p;
}

void freeShared(void* p) {
  Registry& r = registry();
  Live a;
  {
    std::lock_guard lock(r.mutex);
    auto it = r.byStart.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.byStart.end()) throw Error(loomInvalidArgument, "ptr was not returned by loomMemAlloc or loomMemAllocDevice (or was freed)");
    a = it->second;
    r.byStart.erase(it);
    sharedAllocationsLive.store(r.byStart.size(), std::memory_order_release);
  }
  ::munmap(p, a.bytes);
  ::close(a.fd);
}

std::optional<Allocation> findAllocation(const void* p, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  if (!anySharedAllocations()) return std::nullopt;
  std::lock_guard lock(r.mutex);
  auto it = r.byStart.upper_bound(start);
  if (it == r.byStart.begin()) return std::nullopt;
  --it;
  const uintptr_t offset = start - it->first;
  if (offset + bytes > it->second.bytes) return std::nullopt;
  return Allocation{.fd = it->second.fd, .serial = it->second.serial, .bytes = it->second.bytes, .offset = offset};
}

}  // namespace loom::memory
