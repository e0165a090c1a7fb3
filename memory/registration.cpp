#include "memory/registration.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/device/cuda.hpp"
#include "base/device/peer_access.hpp"
#include "base/device/runtime.hpp"
#include "base/device/staging.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "memory/shared_buffers.hpp"

namespace loom::memory {

void Handle::serialize(ByteWriter& w) const {
  w.put(static_cast<uint8_t>(kind));
  w.put(pid);
  w.put(fd);
  w.put(serial);
  w.put(mapBytes);
  w.put(offset);
  w.put(address);
  w.put(device);
  w.put(static_cast<uint8_t>(hasIpc));
  w.put(static_cast<uint8_t>(pooled));
  w.putBytes(ipc);
}

Handle Handle::deserialize(ByteReader& r) {
  Handle h;
  const auto kind = r.get<uint8_t>();
  if (kind > static_cast<uint8_t>(MemoryKind::CudaHostPinned)) {
    throw Error(loomRemoteError, "a memory handle of unknown kind " + std::to_string(kind));
  }
  h.kind = static_cast<MemoryKind>(kind);
  h.pid = r.get<int32_t>();
  h.fd = r.get<int32_t>();
  h.serial = r.get<uint64_t>();
  h.mapBytes = r.get<uint64_t>();
  h.offset = r.get<uint64_t>();
  h.address = r.get<uint64_t>();
  h.device = r.get<uint64_t>();
  h.hasIpc = r.get<uint8_t>() != 0;
  h.pooled = r.get<uint8_t>() != 0;
  for (std::byte& b : h.ipc) b = r.get<std::byte>();
  return h;
}

Handle handleOf(const void* p, size_t bytes) {
  if (bytes == 0) return {};
  const auto address = reinterpret_cast<uintptr_t>(p);
  if (auto a = findAllocation(p, bytes)) {
    return {.kind = MemoryKind::HostShared,
            .pid = static_cast<int32_t>(::getpid()),
            .fd = a->fd,
            .serial = a->serial,
            .mapBytes = a->bytes,
            .offset = a->offset,
            .address = address};
  }
  const MemoryKind kind = cudaKindOf(p);  // not loomMemAlloc's, as just found
  Handle h{.kind = kind, .pid = static_cast<int32_t>(::getpid()), .address = address};
  if (kind != MemoryKind::CudaDevice) return h;
  h.device = cuda::deviceIdOf(p);
  h.pooled = cuda::runtime().fromMemoryPool(p);
  if (auto exported = cuda::exportIpc(p)) {
    h.hasIpc = true;
    h.ipc = exported->handle;
    h.offset = exported->offset;
  }
  return h;
}

Mappings::~Mappings() {
  for (const auto& m : mappings_) ::munmap(m.data, m.bytes);
}

void Mappings::closeNow() noexcept {
  if (cuda::onUserStream()) return;
  retired_.clear();
  if (!cacheOpened_) opened_.clear();
}

const std::byte* Mappings::map(const Handle& handle) {
  if (handle.pid == ::getpid()) return reinterpret_cast<const std::byte*>(handle.address);
  if (!handle.reachableByPeers()) {
    throw Error(loomInvalidUsage, std::string(memoryKindName(handle.kind)) + " memory of pid " +
                                      std::to_string(handle.pid) + " cannot be mapped by another process");
  }
  if (handle.kind == MemoryKind::CudaDevice && handle.hasIpc) {
    if (!cacheRead_) {
      cacheOpened_ = env::getInt("LOOM_CUDA_IPC_CACHE", 0, 1) == 1;
      cacheRead_ = true;
    }
    // A handle names one allocation for its whole life (CUDA gives a new
    // allocation at the same address a new handle), so a cached view is
    // that allocation's. One call uses at most two per local rank, fewer
    // than kCapacity, so it never evicts a view it still reads.
    for (auto it = opened_.begin(); it != opened_.end(); ++it) {
      if (it->handle == handle.ipc) {
        opened_.splice(opened_.begin(), opened_, it);
        return it->view->base() + handle.offset;
      }
    }
    opened_.push_front({handle.ipc, std::make_unique<cuda::OpenedIpc>(handle.ipc)});
    if (opened_.size() > kCapacity) {
      if (cuda::onUserStream()) retired_.push_back(std::move(opened_.back().view));
      opened_.pop_back();
    }
    return opened_.front().view->base() + handle.offset;
  }
  const char* what = "loomMemAlloc buffer";
  for (auto it = mappings_.begin(); it != mappings_.end(); ++it) {
    if (it->pid == handle.pid && it->serial == handle.serial) {
      mappings_.splice(mappings_.begin(), mappings_, it);
      return it->data + handle.offset;
    }
  }
  // The owner holds the fd open for as long as the allocation lives, and it
  // is inside the collective that published `handle`: the fd is that allocation.
  const std::string path = "/proc/" + std::to_string(handle.pid) + "/fd/" + std::to_string(handle.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(loomSystemError, std::string("cannot open the ") + what + " of pid " + std::to_string(handle.pid) +
                                     " (" + path + "): " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, handle.mapBytes, PROT_READ, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    throwSystemError(std::string("mmap of the ") + what + " of pid " + std::to_string(handle.pid), e);
  }
  if (mappings_.size() == kCapacity) {
    ::munmap(mappings_.back().data, mappings_.back().bytes);
    mappings_.pop_back();
  }
  mappings_.push_front({handle.pid, handle.serial, static_cast<std::byte*>(p), handle.mapBytes});
  return mappings_.front().data + handle.offset;
}

}  // namespace loom::memory
