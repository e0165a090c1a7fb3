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

  void serialize(ByteWriter& w) const;
  static PeerInfo deserialize(ByteReader& r);
};

}  // namespace loom
