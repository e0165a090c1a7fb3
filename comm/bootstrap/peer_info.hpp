// What every rank learns about every other rank at bootstrap.
#pragma once

#include <cstdint>
#include <string>

#include "base/bytes.hpp"

namespace loom {

struct PeerInfo {
  int rank = -1;
  int pid = 0;
  uint64_t hostId = 0;           // equal ids: same node (shared memory reachable)
  std::string hostname;
  std::string bootstrapAddress;  // this rank's bootstrap listener, host:port
  int cudaDeviceCount = 0;       // visible CUDA devices, 0 without CUDA
  uint64_t cudaDeviceId = 0;     // the rank's GPU (cuda::deviceIdOf's hash of its bus id), 0 without one

  void serialize(ByteWriter& w) const;
  static PeerInfo deserialize(ByteReader& r);
};

}  // namespace loom
