// How ranks that are processes read each other's device buffers in place on
// the resident path (comm/resident_area.hpp), outside symmetric windows: a
// rank's buffer lies in an allocation it exports once through CUDA IPC, each
// peer opens that export once, from the host, before any of its kernels
// reads the buffer, and keeps it open for the communicator's life (as the
// host path's cache does, LOOM_CUDA_IPC_CACHE). No call waits for that: an
// owner offers a buffer to be read in place only once every peer has said
// it opened the buffer's allocation, and goes through its scratch until
// then, so that a peer that never looks (or cannot open it) costs a copy,
// never a wait or a wrong read.
//
// The exchange is a shared-memory segment of the node's ranks (rank 0 makes
// it, the others open it by name at init): per owner, the exports it
// published, in order, and per reader how many of them it has looked at and
// which it could not open. A reader notes the base it opened each at in its
// own device table (ResidentArea::regionBases), so that its kernels turn a
// published place (region, offset) into an address when they run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/device/ipc.hpp"
#include "base/device/published_piece.hpp"
#include "base/shm/segment.hpp"

namespace loom {

class ResidentRegions {
 public:
  // Region 0: addresses as they are; 1: the owner's resident area; from 2
  // on, the owner's exports, in the order it published them.
  static constexpr uint32_t kFirstExport = 2;
  static constexpr uint32_t kExports = static_cast<uint32_t>(kPlaceRegions) - kFirstExport;

  // Where rank `owner`'s region `region` lies here: noted in this rank's
  // table (ResidentArea::regionBases), for its own exports too, since a rank
  // reads its own published places as its peers do.
  using Note = std::function<void(int owner, uint32_t region, uint64_t base)>;

  // The segment for `size` ranks (made by one rank, opened by the others).
  static size_t bytesFor(int size);
  ResidentRegions(shm::Segment segment, int rank, int size, Note note);
  ~ResidentRegions();
  ResidentRegions(const ResidentRegions&) = delete;
  ResidentRegions& operator=(const ResidentRegions&) = delete;

  // Removes the segment's name, once every rank has opened it.
  void unlink() noexcept { segment_.unlink(); }

  // This rank as an owner: device buffer `p` as one of its regions and the
  // offset into it, where every peer has opened that region; nullopt where
  // not (yet): CUDA will not export it (a memory pool's, the virtual memory
  // API's), this rank has published kExports allocations already, or a peer
  // has not opened it, or could not. The first call on an allocation
  // publishes it for the peers to open.
  std::optional<RegionPlace> placeOf(const void* p);

  // This rank as a reader: opens every export its peers published since it
  // last looked (an allocation of its own process: its address as it is),
  // notes where each one lies here, and only then says so to the owner. An
  // export it cannot open is said so too, and never offered to it.
  void openNew();

 private:
  struct Table;
  Table& table(int owner) const;

  shm::Segment segment_;
  int rank_;
  int size_;
  Note note_;
  std::mutex mutex_;
  std::vector<cuda::IpcHandle> published_;  // this rank's exports, in order
  std::vector<uint32_t> seen_;              // per owner: its exports this rank has looked at
  std::vector<std::unique_ptr<cuda::OpenedIpc>> opened_;  // kept until the area goes
  bool saidFull_ = false;
};

}  // namespace loom
