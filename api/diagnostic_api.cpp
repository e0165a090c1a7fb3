// The diagnostic queries of <loom/loom.h>: what tools may know of a
// communicator's peers without including Loom's internals.
#include <loom/loom.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_call.hpp"
#include "base/counters.hpp"
#include "comm/communicator.hpp"

using loom::api::call;
using loom::api::initialized;
using loom::api::requireNonNull;

namespace {

// Copies `text` into `field`, cut to leave room for the NUL.
template <size_t N>
void copyField(char (&field)[N], std::string_view text) {
  const size_t n = std::min(text.size(), N - 1);
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

}  // namespace

loomResult_t loomCommGetPeerInfo(const loomComm_t comm, int peer, loomPeerInfo_t* info) {
  return call(__func__, comm, [&] {
    requireNonNull(info, "info");
    auto& c = initialized(comm);  // what a tool asks after a failure, too
    if (peer < 0 || peer >= c.size())
      throw loom::Error(loomInvalidArgument, "peer=" + std::to_string(peer) + " is not a rank of the communicator (0.." +
                                                 std::to_string(c.size() - 1) + ")");
    const auto& peers = c.peers();
    const auto& who = peers[static_cast<size_t>(peer)];
    const auto& place = c.placement().ranks[static_cast<size_t>(peer)];
    *info = loomPeerInfo_t{};
    info->rank = peer;
    info->pid = who.pid;
    copyField(info->host, who.hostname);
    info->sameHost = who.hostId == peers[static_cast<size_t>(c.rank())].hostId ? 1 : 0;
    info->localRank = -1;
    for (const auto& p : peers) {
      if (p.hostId != who.hostId) continue;
      if (p.rank == peer) info->localRank = info->localCount;
      ++info->localCount;
    }
    info->numaNode = place.numa;
    info->gpu = place.gpu;
    copyField(info->nic, place.nicName);
    copyField(info->transport, c.transportTo(peer));
  });
}

loomResult_t loomGetCounter(const char* name, uint64_t* value) {
  return call(__func__, nullptr, [&] {
    requireNonNull(name, "name");
    requireNonNull(value, "value");
    const std::optional<loom::counters::Counter> counter = loom::counters::named(name);
    if (!counter)
      throw loom::Error(loomInvalidArgument, "name=\"" + std::string(name) + "\" is no counter; the counters are " +
                                                 std::string(loom::counters::allNames()));
    *value = loom::counters::value(*counter);
  });
}

loomResult_t loomCommGetFailedRanks(const loomComm_t comm, int* ranks, int maxRanks, int* count) {
  return call(__func__, comm, [&] {
    requireNonNull(count, "count");
    if (maxRanks < 0) throw loom::Error(loomInvalidArgument, "maxRanks=" + std::to_string(maxRanks) + " is negative");
    if (maxRanks > 0) requireNonNull(ranks, "ranks");
    const std::vector<int> failed = initialized(comm).failedRanks();
    std::copy_n(failed.begin(), std::min(failed.size(), static_cast<size_t>(maxRanks)), ranks);
    *count = static_cast<int>(failed.size());
  });
}
