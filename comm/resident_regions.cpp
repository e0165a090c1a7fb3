#include "comm/resident_regions.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/resident_area.hpp"

namespace loom {

// One owner's part of the segment. The owner writes an export, then raises
// `count` (release); a reader that sees the count (acquire) reads the entry.
// A reader writes only its own words of `looked` and `refused`, refused
// first, so that an owner that sees the count sees the refusals too.
struct alignas(64) ResidentRegions::Table {
  struct Export {
    cuda::IpcHandle handle{};
    uint64_t address = 0;  // the allocation's start in its owner
    int64_t pid = 0;       // the owner's
  };
  uint32_t count;
  Export exports[kExports];
  uint32_t looked[ResidentArea::kMaxRanks];   // per reader: the exports it has looked at
  uint64_t refused[ResidentArea::kMaxRanks];  // per reader: a bit per export it could not open
};

static_assert(ResidentRegions::kExports <= 64, "a reader's refusals are one 64-bit word");

size_t ResidentRegions::bytesFor(int size) { return sizeof(Table) * static_cast<size_t>(size); }

ResidentRegions::ResidentRegions(shm::Segment segment, int rank, int size, Note note)
    : segment_(std::move(segment)), rank_(rank), size_(size), note_(std::move(note)), seen_(static_cast<size_t>(size), 0) {
  if (segment_.size() < bytesFor(size)) {
    throw Error(loomInternalError, "the resident regions' segment is smaller than " + std::to_string(size) + " ranks need");
  }
}

ResidentRegions::~ResidentRegions() = default;

ResidentRegions::Table& ResidentRegions::table(int owner) const {
  return reinterpret_cast<Table*>(segment_.data())[owner];
}

std::optional<RegionPlace> ResidentRegions::placeOf(const void* p) {
  const std::optional<cuda::IpcExport> exported = cuda::exportIpc(p);
  if (!exported) return std::nullopt;
  std::lock_guard lock(mutex_);
  Table& mine = table(rank_);
  const auto found = std::find(published_.begin(), published_.end(), exported->handle);
  if (found == published_.end()) {
    if (published_.size() == kExports) {
      if (!saidFull_) {
        LOOM_INFO(Coll, "rank %d has exported %u allocations to its peers on the resident path: buffers of newer ones "
                  "go through its scratch", rank_, kExports);
        saidFull_ = true;
      }
      return std::nullopt;
    }
    // Published for the peers to open: read in place from a later call on.
    Table::Export& entry = mine.exports[published_.size()];
    entry.handle = exported->handle;
    entry.address = reinterpret_cast<uintptr_t>(p) - exported->offset;
    entry.pid = ::getpid();
    note_(rank_, kFirstExport + static_cast<uint32_t>(published_.size()), entry.address);
    published_.push_back(exported->handle);
    __atomic_store_n(&mine.count, static_cast<uint32_t>(published_.size()), __ATOMIC_RELEASE);
    return std::nullopt;
  }
  const auto index = static_cast<uint32_t>(found - published_.begin());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const auto i = static_cast<size_t>(r);
    if (__atomic_load_n(&mine.looked[i], __ATOMIC_ACQUIRE) <= index) return std::nullopt;
    if ((__atomic_load_n(&mine.refused[i], __ATOMIC_RELAXED) >> index & 1) != 0) return std::nullopt;
  }
  return RegionPlace{.region = kFirstExport + index, .offset = exported->offset};
}

void ResidentRegions::openNew() {
  std::lock_guard lock(mutex_);
  const auto me = static_cast<size_t>(rank_);
  for (int owner = 0; owner < size_; ++owner) {
    if (owner == rank_) continue;
    Table& theirs = table(owner);
    const uint32_t count = std::min(__atomic_load_n(&theirs.count, __ATOMIC_ACQUIRE), kExports);
    uint32_t& seen = seen_[static_cast<size_t>(owner)];
    for (; seen < count; ++seen) {
      const Table::Export& entry = theirs.exports[seen];
      uint64_t base = 0;
      if (entry.pid == ::getpid()) {
        base = entry.address;  // a thread of this process: its address is this rank's too
      } else {
        try {
          opened_.push_back(std::make_unique<cuda::OpenedIpc>(entry.handle));
          base = reinterpret_cast<uintptr_t>(opened_.back()->base());
        } catch (const Error& e) {
          LOOM_INFO(Coll, "rank %d cannot open rank %d's buffer to read it in place (it goes through the scratch): %s",
                    rank_, owner, e.what());
        }
      }
      if (base != 0) {
        note_(owner, kFirstExport + seen, base);
      } else {
        __atomic_fetch_or(&theirs.refused[me], uint64_t{1} << seen, __ATOMIC_RELAXED);
      }
      __atomic_store_n(&theirs.looked[me], seen + 1, __ATOMIC_RELEASE);
    }
  }
}

}  // namespace loom
