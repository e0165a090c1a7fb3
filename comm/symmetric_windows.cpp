#include "comm/symmetric_windows.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/device/cuda.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/bootstrap/bootstrap.hpp"

namespace loom {

SymmetricWindows::Window* SymmetricWindows::add(Bootstrap& bootstrap, void* buffer, size_t bytes, int flags) {
  const int n = bootstrap.size();
  DeviceCard mine;
  mine.bytes = bytes;
  bool ok = cuda::pointerKind(buffer) == cuda::PointerKind::Device;
  if (ok) {
    try {
      mine = cardOf(buffer, bytes);
    } catch (const Error& e) {
      LOOM_INFO(Init, "a window not read in place: this rank's buffer: %s", e.what());
      ok = false;
      mine = DeviceCard{.bytes = bytes};
    }
  }
  std::vector<std::byte> cards(static_cast<size_t>(n) * sizeof(DeviceCard));
  std::memcpy(cards.data() + static_cast<size_t>(bootstrap.rank()) * sizeof(DeviceCard), &mine, sizeof mine);
  bootstrap.allgather(cards, sizeof(DeviceCard));
  const auto cardAt = [&](int r) {
    DeviceCard card;
    std::memcpy(&card, cards.data() + static_cast<size_t>(r) * sizeof(DeviceCard), sizeof card);
    return card;
  };
  // Every rank sees every size, so every rank refuses alike.
  std::string sizes;
  for (int r = 0; r < n; ++r) {
    if (cardAt(r).bytes != cardAt(0).bytes) {
      sizes += (sizes.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + ": " +
               std::to_string(cardAt(r).bytes) + " bytes";
    }
  }
  if (!sizes.empty()) {
    throw Error(loomInvalidArgument, "size: a window's size must be the same on every rank (rank 0: " +
                                         std::to_string(cardAt(0).bytes) + " bytes; " + sizes + ")");
  }
  auto window = std::make_unique<Window>();
  window->base = static_cast<std::byte*>(buffer);
  window->bytes = bytes;
  window->flags = flags;
  std::vector<PeerView> peers(static_cast<size_t>(n));
  for (int r = 0; r < n && ok; ++r) {
    try {
      peers[static_cast<size_t>(r)] = mapCard(cardAt(r));
      ok = peers[static_cast<size_t>(r)].base != nullptr;
    } catch (const Error& e) {
      LOOM_INFO(Init, "a window not read in place: rank %d's buffer cannot be mapped here: %s", r, e.what());
      ok = false;
    }
  }
  std::vector<std::byte> verdicts(static_cast<size_t>(n));
  verdicts[static_cast<size_t>(bootstrap.rank())] = std::byte{ok ? uint8_t{1} : uint8_t{0}};
  bootstrap.allgather(verdicts, 1);
  if (std::all_of(verdicts.begin(), verdicts.end(), [](std::byte v) { return v == std::byte{1}; })) {
    window->peers = std::move(peers);
  }
  std::lock_guard lock(mutex_);
  windows_.push_back(std::move(window));
  return windows_.back().get();
}

void SymmetricWindows::remove(Bootstrap& bootstrap, const Window* window) {
  if (!holds(window)) throw Error(loomInvalidArgument, "win: not a window of this communicator (or deregistered)");
  std::vector<std::byte> marks(static_cast<size_t>(bootstrap.size()));
  bootstrap.allgather(marks, 1);
  std::lock_guard lock(mutex_);
  std::erase_if(windows_, [&](const std::unique_ptr<Window>& w) { return w.get() == window; });
}

bool SymmetricWindows::holds(const Window* window) const {
  std::lock_guard lock(mutex_);
  return std::any_of(windows_.begin(), windows_.end(), [&](const std::unique_ptr<Window>& w) { return w.get() == window; });
}

std::optional<SymmetricWindows::Place> SymmetricWindows::find(const void* p, size_t bytes) const {
  const auto* at = static_cast<const std::byte*>(p);
  std::lock_guard lock(mutex_);
  for (const auto& w : windows_) {
    if (w->peers.empty() || (w->flags & kSymmetric) == 0) continue;
    if (at >= w->base && at + bytes <= w->base + w->bytes) {
      return Place{.window = w.get(), .offset = static_cast<size_t>(at - w->base)};
    }
  }
  return std::nullopt;
}

}  // namespace loom
