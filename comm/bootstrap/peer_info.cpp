#include "comm/bootstrap/peer_info.hpp"

namespace loom {

void PeerInfo::serialize(ByteWriter& w) const {
  w.put(static_cast<int32_t>(rank));
  w.put(static_cast<int32_t>(pid));
  w.put(hostId);
  w.putString(hostname);
  w.putString(bootstrapAddress);
  w.put(static_cast<int32_t>(cudaDeviceCount));
  w.put(cudaDeviceId);
}

PeerInfo PeerInfo::deserialize(ByteReader& r) {
  PeerInfo p;
  p.rank = r.get<int32_t>();
  p.pid = r.get<int32_t>();
  p.hostId = r.get<uint64_t>();
  p.hostname = r.getString(256);
  p.bootstrapAddress = r.getString(128);
  p.cudaDeviceCount = r.get<int32_t>();
  p.cudaDeviceId = r.get<uint64_t>();
  return p;
}

}  // namespace loom
