#include "comm/comm_create.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "base/device/cuda.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/bootstrap/rendezvous.hpp"
#include "comm/bootstrap/root.hpp"
#include "comm/bootstrap/watchdog.hpp"
#include "comm/engine/group.hpp"
#include "comm/launch_env.hpp"
#include "comm/store/store.hpp"

namespace loom {

namespace {

// The id LOOM_COMM_ID names (NCCL_COMM_ID's), the same in every process
// that has it: its root's address, and for secret LOOM_STORE_SECRET or,
// unset, one derived from the address (FNV-1a of it, twice), which every
// process computes alike. Nullopt where LOOM_COMM_ID is unset.
std::optional<UniqueIdData> fixedUniqueId() {
  const std::optional<std::string> at = env::getIfSet("LOOM_COMM_ID");
  if (!at || at->empty()) return std::nullopt;
  UniqueIdData data;
  try {
    data.root = net::SocketAddress::parse(*at);
  } catch (const Error& e) {
    throw Error(loomInvalidArgument, "LOOM_COMM_ID=" + *at + " is no host:port: " + e.what());
  }
  if (const std::optional<std::string> secret = env::getIfSet("LOOM_STORE_SECRET"); secret && !secret->empty()) {
    data.secret = Secret::fromHex(*secret, "LOOM_STORE_SECRET");
    return data;
  }
  const std::string text = "loom comm id " + data.root.toString();
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t half = 0; half < 2; ++half) {
    for (char ch : text) {
      h ^= static_cast<unsigned char>(ch);
      h *= 0x100000001b3ull;
    }
    std::memcpy(data.secret.bytes.data() + 8 * half, &h, 8);
  }
  return data;
}

// Where `data` is LOOM_COMM_ID's id and this is its rank 0: the root, on
// that address, before this rank joins it (the other ranks retry until it
// listens).
void startFixedRoot(const UniqueIdData& data, int rank, std::chrono::milliseconds timeout) {
  if (rank != 0) return;
  const std::optional<UniqueIdData> fixed = fixedUniqueId();
  if (!fixed || fixed->root.toString() != data.root.toString() || !(fixed->secret == data.secret)) return;
  net::Socket listener;
  try {
    listener = net::Socket::listen(data.root, "rendezvous root (LOOM_COMM_ID)");
  } catch (const Error& e) {
    throw Error(loomSystemError, "rank 0 cannot start the rendezvous root at LOOM_COMM_ID=" + data.root.toString() +
                                     " (an address of this host, with the port free?): " + e.what());
  }
  startRendezvousRoot(std::move(listener), data.secret, timeout);
}

}  // namespace

loomUniqueId createUniqueId(std::chrono::milliseconds timeout) {
  auto listener = listenOnBootstrapInterface("rendezvous root");
  UniqueIdData data{listener.localAddress(), Secret::random()};
  loomUniqueId id = encodeUniqueId(data);
  startRendezvousRoot(std::move(listener), data.secret, timeout);
  return id;
}

loomUniqueId userUniqueId(std::chrono::milliseconds timeout) {
  if (const std::optional<UniqueIdData> fixed = fixedUniqueId()) return encodeUniqueId(*fixed);
  return createUniqueId(timeout);
}

namespace {

enum class Start { Now, AtGroupEnd };

std::unique_ptr<loomComm> create(int nranks, const loomUniqueId& id, int rank, const Config& config, Start start) {
  if (nranks < 1 || nranks > kMaxRanks) {
    throw Error(loomInvalidArgument, "nranks=" + std::to_string(nranks) + " must be in [1, " + std::to_string(kMaxRanks) + "]");
  }
  if (rank < 0 || rank >= nranks) {
    throw Error(loomInvalidArgument, "rank=" + std::to_string(rank) + " is out of range for nranks=" + std::to_string(nranks));
  }
  UniqueIdData data = decodeUniqueId(id);
  auto comm = std::make_unique<loomComm>(config);
  auto init = [c = comm.get(), data, rank, nranks, blocking = config.blocking, timeout = config.timeout] {
    startFixedRoot(data, rank, timeout);
    if (blocking) c->init(data, rank, nranks);
    else c->initAsync(data, rank, nranks);
  };
  if (start == Start::Now || !group::defer({init, config.blocking})) init();
  return comm;
}

}  // namespace

std::unique_ptr<loomComm> createComm(int nranks, const loomUniqueId& id, int rank, const Config& config) {
  return create(nranks, id, rank, config, Start::Now);
}

std::unique_ptr<loomComm> createCommInGroup(int nranks, const loomUniqueId& id, int rank, const Config& config) {
  return create(nranks, id, rank, config, Start::AtGroupEnd);
}

std::unique_ptr<loomComm> createCommFromEnv(const Config& config) {
  LaunchEnv launch = readLaunchEnv();
  LOOM_INFO(Init, "rank %d of %d (launcher's local rank %d) from %s's environment, store %s", launch.rank, launch.size,
            launch.localRank, launch.launcher.c_str(), launch.store.c_str());
  Config blocking = config;
  blocking.blocking = true;  // the store must outlive the rendezvous
  if (launch.size == 1) return createComm(1, createUniqueId(config.timeout), 0, blocking);

  // Rank 0 creates the unique id and publishes it in the store; the key
  // counts this process's calls so that a second init gets a fresh id.
  static std::atomic<int> generation{0};
  std::string key = "loom/init/" + std::to_string(generation.fetch_add(1)) + "/unique-id";
  auto deadline = Deadline::after(config.timeout);
  auto store = openStore(launch.store, launch.rank == 0, deadline, nullptr, launch.storeSecret);
  loomUniqueId id;
  if (launch.rank == 0) {
    id = createUniqueId(config.timeout);
    store->set(key, std::as_bytes(std::span(id.internal)));
  } else {
    auto bytes = store->get(key, deadline, nullptr);
    if (bytes.size() != sizeof id.internal) throw Error(loomRemoteError, "store holds a malformed unique id under " + key);
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  auto comm = createComm(launch.size, id, launch.rank, blocking);
  if (launch.rank == 0) store->erase(key);  // every rank has read it: the rendezvous is done
  return comm;
}

std::vector<std::unique_ptr<loomComm>> createLocalComms(int ndev, std::span<const int> devlist, const Config& config) {
  if (ndev < 1 || ndev > kMaxRanks) throw Error(loomInvalidArgument, "ndev=" + std::to_string(ndev) + " must be at least 1");
  // Each rank's device, current on the thread that creates it, which places
  // the rank on that GPU (comm_topology) and is the rank's loomCommCuDevice.
  const int devices = cuda::deviceCount();
  std::vector<int> device(static_cast<size_t>(ndev), -1);
  for (size_t r = 0; devices > 0 && r < device.size(); ++r) {
    device[r] = devlist.empty() ? static_cast<int>(r) % devices : devlist[r];
    if (device[r] < 0 || device[r] >= devices) {
      throw Error(loomInvalidArgument, "devlist[" + std::to_string(r) + "]=" + std::to_string(device[r]) +
                                           " is not a visible CUDA device (0 to " + std::to_string(devices - 1) + ")");
    }
  }
  loomUniqueId id = createUniqueId(config.timeout);
  Config blocking = config;
  blocking.blocking = true;
  std::vector<std::unique_ptr<loomComm>> comms(static_cast<size_t>(ndev));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int r = 0; r < ndev; ++r) {
    threads.emplace_back([&, r] {
      try {
        if (device[static_cast<size_t>(r)] >= 0) cuda::setCurrentDevice(device[static_cast<size_t>(r)]);
        comms[static_cast<size_t>(r)] = createComm(ndev, id, r, blocking);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return comms;
}

std::unique_ptr<loomComm> splitComm(Communicator& parent, int color, int key, const Config& config) {
  if (color < 0 && color != LOOM_SPLIT_NOCOLOR) {
    throw Error(loomInvalidArgument, "color=" + std::to_string(color) + " must be non-negative or LOOM_SPLIT_NOCOLOR");
  }
  Bootstrap& boot = parent.bootstrap();
  const int n = boot.size();

  // 1. Everyone learns everyone's (color, key).
  struct Entry {
    int32_t color, key;
  };
  std::vector<Entry> entries(static_cast<size_t>(n));
  entries[static_cast<size_t>(parent.rank())] = {color, key};
  boot.allgather(std::as_writable_bytes(std::span(entries)), sizeof(Entry));

  // 2. My group, ordered by (key, parent rank).
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (entries[static_cast<size_t>(r)].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return entries[static_cast<size_t>(a)].key < entries[static_cast<size_t>(b)].key;
  });

  // 3. Each group's first member hosts the new rendezvous; its id reaches the group.
  bool leader = color != LOOM_SPLIT_NOCOLOR && members.front() == parent.rank();
  std::vector<loomUniqueId> ids(static_cast<size_t>(n));
  if (leader) ids[static_cast<size_t>(parent.rank())] = createUniqueId(config.timeout);
  boot.allgather(std::as_writable_bytes(std::span(ids)), sizeof(loomUniqueId));

  if (color == LOOM_SPLIT_NOCOLOR) return nullptr;
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
  return createComm(static_cast<int>(members.size()), ids[static_cast<size_t>(members.front())], newRank, config);
}

std::unique_ptr<loomComm> shrinkComm(Communicator& parent, std::span<const int> exclude, const Config& config) {
  const int n = parent.size();
  std::vector<char> excluded(static_cast<size_t>(n), 0);
  for (int r : exclude) {
    if (r < 0 || r >= n) {
      throw Error(loomInvalidArgument, "excludeRanksList holds rank " + std::to_string(r) + ", out of range for " +
                                           std::to_string(n) + " ranks");
    }
    if (excluded[static_cast<size_t>(r)]) {
      throw Error(loomInvalidArgument, "excludeRanksList holds rank " + std::to_string(r) + " twice");
    }
    excluded[static_cast<size_t>(r)] = 1;
  }
  if (excluded[static_cast<size_t>(parent.rank())]) {
    throw Error(loomInvalidArgument, "excludeRanksList holds this rank (" + std::to_string(parent.rank()) +
                                         "): excluded ranks do not call loomCommShrink");
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (!excluded[static_cast<size_t>(r)]) survivors.push_back(r);
  }
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), parent.rank()) - survivors.begin());
  const uint32_t epoch = parent.nextShrinkEpoch();
  if (survivors.size() == 1) return createComm(1, createUniqueId(config.timeout), 0, config);

  Watchdog* watchdog = parent.watchdog();
  const auto deadline = Deadline::after(config.timeout);
  loomUniqueId id;
  if (newRank == 0) {
    id = createUniqueId(config.timeout);
    for (size_t i = 1; i < survivors.size(); ++i) {
      watchdog->sendOffer(survivors[i], epoch, std::as_bytes(std::span(id.internal)), deadline);
    }
  } else {
    auto bytes = watchdog->awaitOffer(survivors.front(), epoch, deadline);
    if (bytes.size() != sizeof id.internal) {
      throw Error(loomRemoteError, "rank " + std::to_string(survivors.front()) + " offered a malformed unique id");
    }
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  LOOM_INFO(Init, "shrink #%u: rank %d of %d becomes rank %d of %zu", epoch, parent.rank(), n, newRank, survivors.size());
  return createComm(static_cast<int>(survivors.size()), id, newRank, config);
}

}  // namespace loom
