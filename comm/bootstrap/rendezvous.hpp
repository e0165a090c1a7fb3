// The rank side of the rendezvous, and the two messages it exchanges with
// the root (root.hpp): Hello (rank -> root) and RootReply (root -> rank).
#pragma once

#include <loom/loom.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "base/cancellation.hpp"
#include "comm/bootstrap/peer_info.hpp"
#include "comm/bootstrap/unique_id.hpp"

namespace loom {

inline constexpr uint32_t kMaxHelloBytes = 4096;
inline constexpr uint32_t kMaxRootReplyBytes = 64u << 20;
inline constexpr int kMaxRanks = 1 << 20;
// How long past its own timeout a rank listens for the root's verdict.
inline constexpr std::chrono::milliseconds kVerdictGrace{1000};

struct Hello {
  int rank = -1;
  int nranks = 0;
  PeerInfo info;

  std::vector<std::byte> encode() const;
  static Hello decode(std::span<const std::byte> payload);
};

struct RootReply {
  loomResult_t status = loomSuccess;
  std::string message;
  std::vector<PeerInfo> peers;  // indexed by rank; empty unless status is success

  std::vector<std::byte> encode() const;
  static RootReply decode(std::span<const std::byte> payload);
};

// Presents `self` to the root named by `id` and returns every rank's info,
// or throws the root's verdict (loomTimeout naming the missing ranks,
// loomInvalidArgument for a duplicate rank or mismatched nranks).
std::vector<PeerInfo> rendezvous(const UniqueIdData& id, int rank, int nranks, const PeerInfo& self,
                                 std::chrono::milliseconds timeout, const Cancellation* cancel);

}  // namespace loom
