// Symmetric windows (NCCL 2.27's ncclCommWindowRegister): every rank of a
// communicator registers a buffer of the same size, collectively, and each
// rank maps every other rank's window once, at registration (CUDA IPC
// between processes, the pointer between threads). A collective whose
// buffers lie in windows registered with LOOM_WIN_COLL_SYMMETRIC, at the
// same offset on every rank (the user's promise, as NCCL asks it), then
// needs no per-call exchange of addresses: a rank finds its peers' buffers
// at their windows' bases plus its own offset, and the resident path reads
// them in place instead of copying its input into the scratch first
// (collectives/resident_collectives.hpp).
//
// Windows of host memory, or on a communicator whose ranks cannot map each
// other's devices, register as well and are simply not read in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/device_card.hpp"

namespace loom {

class Bootstrap;

class SymmetricWindows {
 public:
  // LOOM_WIN_COLL_SYMMETRIC: collectives may read the window in place.
  static constexpr int kSymmetric = 1;

  // One window, its handle (loomWindow_t points at it).
  struct Window {
    std::byte* base = nullptr;  // this rank's
    size_t bytes = 0;
    int flags = 0;
    // Every rank's window as this rank reaches it (its own included), where
    // every rank's device memory could be mapped by every rank; else empty.
    std::vector<PeerView> peers;
  };

  // Where a call's buffer lies: its window, the peers' bases, the offset.
  struct Place {
    const Window* window = nullptr;
    size_t offset = 0;
  };

  SymmetricWindows() = default;
  SymmetricWindows(const SymmetricWindows&) = delete;
  SymmetricWindows& operator=(const SymmetricWindows&) = delete;

  // Collective over the bootstrap's ranks (two all-gathers). Throws
  // loomInvalidArgument naming the ranks whose sizes differ.
  Window* add(Bootstrap& bootstrap, void* buffer, size_t bytes, int flags);
  // Collective (one all-gather, so that no rank closes its views while a
  // peer still registers). Throws loomInvalidArgument for a window this
  // communicator does not hold.
  void remove(Bootstrap& bootstrap, const Window* window);
  // Whether `window` is one of this communicator's.
  bool holds(const Window* window) const;

  // The symmetric, mapped window holding all of [p, p + bytes), if any.
  std::optional<Place> find(const void* p, size_t bytes) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Window>> windows_;
};

}  // namespace loom
