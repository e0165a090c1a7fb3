// A POSIX shared-memory segment mapped into this process (RAII).
//
// Names are /loom-<creator pid>-<64 random bits>, so two jobs never collide
// and a segment whose creator died can be recognised. By default the creator
// maps it with MAP_POPULATE, so under the default first-touch policy its
// pages sit on the creator's NUMA node (the shm transport's creator is the
// receiver's listener, bound near the receiver); a segment shared by many
// ranks is left to each page's first writer instead. The name
// is removed as soon as the peer has mapped it (unlink()), and at the latest
// when the creating object is destroyed.
#pragma once

#include <cstddef>
#include <string>

namespace loom::shm {

class Segment {
 public:
  enum class Populate { ByCreator, ByFirstWriter };
  // A new segment of `bytes`, mode 0600, zero-filled.
  static Segment create(size_t bytes, Populate populate = Populate::ByCreator);
  // Maps the segment `name`, which must hold at least `bytes`.
  static Segment open(const std::string& name, size_t bytes);

  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Removes the name; the mapping stays valid. Idempotent, and fine if the peer removed it first.
  void unlink() noexcept;

  // Puts every page of the segment into this process's page tables now, so
  // that no call pays a page fault for its first touch of a page later: a
  // fault a page, in every process that maps it, stalled the first calls
  // through each page by 3-60 us on a VM (a 2-rank 8-byte all-reduce's
  // first 100 calls took 1.8 us each where later ones took 0.45). Pages no
  // process has written yet are allocated here, on this process's NUMA node:
  // call it once their first writers have. A segment /dev/shm has no room
  // for is a loomSystemError naming it, here rather than a SIGBUS later.
  // Kernels before 5.14 cannot do it at once; then the pages stay lazy.
  void mapEveryPage();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, std::byte* data, size_t size, bool linked);
  void reset() noexcept;

  std::string name_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // this object still owes the unlink
};

// Removes /dev/shm/loom-<pid>-* segments whose creator no longer runs (gone,
// or a zombie not yet reaped): the ones a rank killed between creating and
// unlinking left behind.
void removeStaleSegments();

// True if `name` (without the leading '/') is one of Loom's segment names.
bool isLoomSegmentName(const std::string& name);

}  // namespace loom::shm
