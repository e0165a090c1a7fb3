#include "comm/device_card.hpp"

#include <unistd.h>

#include "base/device/peer_access.hpp"

namespace loom {

DeviceCard cardOf(const void* p, size_t bytes) {
  DeviceCard card;
  card.pid = static_cast<int32_t>(::getpid());
  card.address = reinterpret_cast<uintptr_t>(p);
  card.bytes = bytes;
  card.device = cuda::deviceIdOf(p);
  if (auto exported = cuda::exportIpc(p)) {
    card.hasIpc = 1;
    card.ipc = exported->handle;
    card.offset = exported->offset;
  }
  return card;
}

PeerView mapCard(const DeviceCard& card) {
  PeerView view;
  if (card.address == 0 || !cuda::canReachDevice(card.device)) return view;
  if (card.pid == static_cast<int32_t>(::getpid())) {
    view.base = reinterpret_cast<std::byte*>(card.address);
  } else if (card.hasIpc != 0) {
    view.opened = std::make_unique<cuda::OpenedIpc>(card.ipc);
    view.base = const_cast<std::byte*>(view.opened->base()) + card.offset;
  }
  return view;
}

}  // namespace loom
