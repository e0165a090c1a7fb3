#include "base/shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/process.hpp"
#include "base/random.hpp"

namespace loom::shm {
namespace {

constexpr const char* kPrefix = "loom-";

std::string newName() {
  uint64_t bits = 0;
  fillRandom(std::as_writable_bytes(std::span(&bits, 1)));
  char name[64];
  std::snprintf(name, sizeof name, "/%s%d-%016" PRIx64, kPrefix, static_cast<int>(::getpid()), bits);
  return name;
}

// The creator's pid in a Loom segment name, or -1.
long creatorPid(const std::string& name) {
  if (!isLoomSegmentName(name)) return -1;
  return std::strtol(name.c_str() + std::char_traits<char>::length(kPrefix), nullptr, 10);
}

std::byte* mapFd(int fd, size_t bytes, int extraFlags, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | extraFlags, fd, 0);
  if (p == MAP_FAILED) throwSystemError("mmap of shared memory segment " + name, errno);
  return static_cast<std::byte*>(p);
}

// Sizing a segment on tmpfs reserves nothing: a page is taken when first
// written, and one that /dev/shm has no room for is a SIGBUS then, in
// whichever rank touches it first. So a segment that does not fit in what
// /dev/shm has free is refused here, by name (containers give /dev/shm 64
// MiB unless told otherwise). Others creating at once may still take the
// room; this catches the usual case, a /dev/shm too small.
void requireRoom(size_t bytes, const std::string& name) {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return;  // no /dev/shm to ask: shm_open says what it says
  const unsigned long long room = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
  if (bytes <= room) return;
  throw Error(loomSystemError, "shared memory segment " + name + " needs " + std::to_string(bytes) +
                                   " bytes and /dev/shm has " + std::to_string(room) +
                                   " free (in a container, give it more: docker run --shm-size=1g)");
}

}  // namespace

bool isLoomSegmentName(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && name.find('-', std::char_traits<char>::length(kPrefix)) != std::string::npos;
}

Segment::Segment(std::string name, std::byte* data, size_t size, bool linked)
    : name_(std::move(name)), data_(data), size_(size), linked_(linked) {}

Segment Segment::create(size_t bytes, Populate populate) {
  std::string name = newName();
  requireRoom(bytes, name);
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throwSystemError("shm_open(" + name + ")", errno);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    throwSystemError("sizing shared memory segment " + name + " to " + std::to_string(bytes) +
                         " bytes (is /dev/shm full?)",
                     err);
  }
  std::byte* data = nullptr;
  try {
    data = mapFd(fd, bytes, populate == Populate::ByCreator ? MAP_POPULATE : 0, name);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);
  return Segment(std::move(name), data, bytes, true);
}

Segment Segment::open(const std::string& name, size_t bytes) {
  if (name.empty() || name[0] != '/' || !isLoomSegmentName(name.substr(1))) {
    throw Error(loomRemoteError, "peer sent an invalid shared memory segment name '" + name + "'");
  }
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throwSystemError("shm_open(" + name + ")", errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    throw Error(loomRemoteError, "shared memory segment " + name + " is smaller than " + std::to_string(bytes) + " bytes");
  }
  std::byte* data = nullptr;
  try {
    data = mapFd(fd, bytes, 0, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return Segment(name, data, bytes, false);
}

Segment::~Segment() { reset(); }

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_), linked_(other.linked_) {
  other.data_ = nullptr;
  other.linked_ = false;
}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    linked_ = other.linked_;
    other.data_ = nullptr;
    other.linked_ = false;
  }
  return *this;
}

void Segment::unlink() noexcept {
  if (!name_.empty()) ::shm_unlink(name_.c_str());  // ENOENT: the peer was first
  linked_ = false;
}

void Segment::mapEveryPage() {
  if (data_ == nullptr || size_ == 0) return;
  if (::madvise(data_, size_, MADV_POPULATE_WRITE) == 0) return;
  const int err = errno;
  if (err == EINVAL) {  // a kernel before 5.14: each page faults on its first touch instead
    LOOM_INFO(Net, "shared memory segment %s: pages mapped as first touched (no MADV_POPULATE_WRITE)", name_.c_str());
    return;
  }
  throwSystemError("mapping every page of shared memory segment " + name_ + " (" + std::to_string(size_) +
                       " bytes; is /dev/shm full?)",
                   err);
}

void Segment::reset() noexcept {
  if (linked_) unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
}

void removeStaleSegments() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    long pid = creatorPid(name);
    if (pid <= 0) continue;
    if (processHasExited(static_cast<int>(pid))) {
      if (::shm_unlink(("/" + name).c_str()) == 0) {
        LOOM_INFO(Net, "removed shared memory segment %s left by dead process %ld", name.c_str(), pid);
      }
    }
  }
  ::closedir(dir);
}

}  // namespace loom::shm
