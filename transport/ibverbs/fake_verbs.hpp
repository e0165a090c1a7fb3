// An in-process fake of the verbs (verbs.hpp) for tests: devices that are
// names, registrations that are address ranges with keys, and queue pairs
// that carry an RDMA write by copying its gather list into the peer's
// registration at once, on the poster's thread, then posting the
// completions a device would (the write's on the sender's queue, the
// immediate's on the receiver's, consuming a posted receive). So ranks that
// are threads of one process can run the verbs transport end to end with
// no RDMA device, and a test can break things a device would break: a queue
// pair moved to the error state, a write that completes with an error
// status, a device that is not there.
//
// It checks what a device checks (lkeys and rkeys against their ranges and
// protection domains, a receive posted for every immediate, receive-queue
// and completion-queue depths),
// and turns each breach into the completion status a device gives, so the
// transport's error paths run as they would on hardware.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/ibverbs/verbs.hpp"

namespace loom::transport::ibverbs {

class FakeVerbs final : public Verbs {
 public:
  // `devices` devices named fake0, fake1, ..., one active InfiniBand port each.
  explicit FakeVerbs(int devices = 1);
  ~FakeVerbs() override;

  const char* name() const override { return "fake"; }
  std::vector<DeviceInfo> devices() override;
  std::unique_ptr<Device> open(const std::string& device, int port, int gidIndex) override;

  // Failures to inject.
  // No device at all from now on (as ibv_get_device_list finding none).
  void removeDevices();
  // The queue pair goes to the error state: its posted receives and every
  // later write complete as Flushed.
  void breakQueuePair(uint32_t qpn);
  // The next write posted on `qpn` (any, if 0) completes with `status`,
  // delivering nothing, and its queue pair goes to the error state.
  void failNextWrite(WcStatus status, uint32_t qpn = 0);

  // What a test can see.
  std::vector<uint32_t> queuePairs() const;  // live, in creation order
  size_t liveRegistrations() const;
  uint64_t registrationsMade() const;
  // The remote write key of the registration holding [address, +bytes), if any.
  std::optional<uint32_t> rkeyOf(const void* address, size_t bytes) const;

  // The fabric's state, shared with the objects it made (fake_verbs.cpp).
  struct Fabric;

 private:
  std::unique_ptr<Fabric> fabric_;
};

}  // namespace loom::transport::ibverbs
