// How one rank's device allocation becomes reachable by the other ranks of
// its node: the rank describes it in a card (plain bytes: the ranks of one
// node run one build), the cards go round in a bootstrap all-gather, and
// each rank maps every other's: the pointer itself between threads of one
// process, CUDA IPC between processes. Used by the resident area
// (resident_area.hpp) and by symmetric windows (symmetric_windows.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/device/ipc.hpp"

namespace loom {

struct DeviceCard {
  int32_t pid = 0;
  uint8_t hasIpc = 0;
  uint8_t pad[3] = {};
  uint64_t address = 0;  // 0: nothing to map
  uint64_t bytes = 0;
  uint64_t device = 0;  // cuda::deviceIdOf
  uint64_t offset = 0;  // of the address in its IPC export
  cuda::IpcHandle ipc{};
};

// The card of device memory [p, p + bytes) of this process. Throws
// (loom::Error) where the runtime cannot say where it lives.
DeviceCard cardOf(const void* p, size_t bytes);

// A peer's allocation as this rank reaches it.
struct PeerView {
  std::byte* base = nullptr;  // its address here; null: not reachable
  std::unique_ptr<cuda::OpenedIpc> opened;  // another process's, opened here
};

// Maps `card` here: a view with a null base where this rank's device cannot
// reach the card's device or the card has no IPC handle for another process.
// Throws where CUDA refuses to open the handle.
PeerView mapCard(const DeviceCard& card);

}  // namespace loom
