// The verbs transport against its in-process fake (this machine has no RDMA
// device): connection ends made by hand over a fake fabric, credits, a
// 64 MiB message striped across the FIFO, every injected failure turning into
// an error that names the peer, the registration cache, LOOM_IB_HCA's
// grammar, the communicator over it (ranks as threads); and a probe of the
// real libibverbs that runs on a machine with a device and says it skipped
// otherwise.
#include <gtest/gtest.h>
#include <loom/loom.h>
#include <sys/socket.h>

#include <cstring>
#include <numeric>

#include "base/error.hpp"
#include "memory/shared_buffers.hpp"
#include "tests/support/ranks.hpp"
#include "tests/support/transports.hpp"
#include "transport/ibverbs/fake_verbs.hpp"
#include "transport/ibverbs/ib_connection.hpp"
#include "transport/ibverbs/ib_transport.hpp"
#include "transport/ibverbs/registration_cache.hpp"
#include "transport/registry.hpp"

using namespace loom;
using namespace loom::transport;
using namespace loom::transport::ibverbs;
using loom::test::ScopedEnv;

namespace {

std::pair<net::Socket, net::Socket> socketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  return {net::Socket(fds[0], "rank 1"), net::Socket(fds[1], "rank 0")};
}

// Both ends of a verbs connection from rank 0 to rank 1 over the fake: two
// opened devices (two protection domains, as two processes would have), the
// queue pairs connected to each other, the receives posted, as the
// transport's handshake leaves them.
struct FakePair {
  FakeVerbs fake;
  std::shared_ptr<Device> senderDevice = fake.open("fake0", 1, 0);
  std::shared_ptr<Device> receiverDevice = fake.open("fake0", 1, 0);
  std::shared_ptr<RegistrationCache> cache;
  uint32_t senderQpn = 0, receiverQpn = 0;
  std::unique_ptr<IbSendConnection> sender;
  std::unique_ptr<IbRecvConnection> receiver;

  explicit FakePair(FifoShape shape, size_t cacheCapacity = RegistrationCache::kDefaultCapacity)
      : cache(std::make_shared<RegistrationCache>(*senderDevice, cacheCapacity)) {
    auto fifo = std::make_unique<RegisteredFifo>(*receiverDevice, shape, true);
    auto staging = std::make_unique<RegisteredFifo>(*senderDevice, shape, false);
    auto in = std::make_unique<QueuePairEnd>(receiverDevice, int(shape.slots) + 1, int(shape.slots));
    auto out = std::make_unique<QueuePairEnd>(senderDevice, int(shape.slots) + 1, int(shape.slots));
    senderQpn = out->qp->qpn();
    receiverQpn = in->qp->qpn();
    out->qp->connect(receiverDevice->address(receiverQpn, 7), 9);
    in->qp->connect(senderDevice->address(senderQpn, 9), 7);
    out->postReceives(IbSendConnection::creditReceives(shape));
    in->postReceives(shape.slots);
    const RemoteFifo remote{reinterpret_cast<uint64_t>(fifo->bytes.data()), fifo->region->rkey()};
    auto [a, b] = socketPair();
    sender = std::make_unique<IbSendConnection>(senderDevice, std::move(staging), std::move(out), remote, cache,
                                                Link{std::move(a), std::chrono::milliseconds(5000), nullptr}, shape);
    receiver = std::make_unique<IbRecvConnection>(receiverDevice, std::move(fifo), std::move(in),
                                                  Link{std::move(b), std::chrono::milliseconds(5000), nullptr}, shape);
  }
};

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomRemoteError) << e.what();
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(IbFifo, TheSenderRunsAheadByTheFifoDepthAndNoFurther) {
  FakePair pair(FifoShape{.slots = 4, .slotBytes = 4096});
  for (uint32_t i = 0; i < 4; ++i) {
    auto slot = pair.sender->reserve();
    ASSERT_EQ(slot.size(), 4096u);
    slot[0] = std::byte(i);
    pair.sender->commit({.messageBytes = 4, .bytes = 1});
  }
  EXPECT_TRUE(pair.sender->reserve().empty());  // no credit left
  pair.sender->progress();
  EXPECT_TRUE(pair.sender->reserve().empty());  // acknowledged, still no credit
  EXPECT_TRUE(pair.sender->flushed());          // every write is in the peer's memory
  pair.receiver->progress();
  auto first = pair.receiver->peek();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data[0], std::byte{0});
  EXPECT_EQ(first->tag.messageBytes, 4u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first->data.data()) % 64, 0u);  // payloads are 64-byte aligned
  pair.receiver->release();                     // one credit back, written at once
  pair.sender->progress();
  EXPECT_FALSE(pair.sender->reserve().empty());
  for (uint32_t i = 1; i < 4; ++i) {
    auto slot = pair.receiver->peek();
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->data[0], std::byte(i));
    pair.receiver->release();
  }
  EXPECT_FALSE(pair.receiver->peek().has_value());
}

// 64 MiB through 8 slots of 512 KiB: 128 slots, each FIFO slot reused 16
// times, every byte and every tag checked in order.
TEST(IbFifo, A64MiBMessageTravelsStripedAcrossTheSlots) {
  const FifoShape shape{.slots = 8, .slotBytes = 512 * 1024};
  FakePair pair(shape);
  const size_t total = size_t{64} << 20;
  std::vector<uint32_t> message(total / 4), received(total / 4);
  std::iota(message.begin(), message.end(), 0x1234u);
  const auto* src = reinterpret_cast<const std::byte*>(message.data());
  auto* dst = reinterpret_cast<std::byte*>(received.data());
  size_t sent = 0, got = 0;
  uint32_t sentSlots = 0, gotSlots = 0, maxAhead = 0;
  while (got < total) {
    pair.sender->progress();
    if (sent < total && !pair.sender->reserve().empty()) {
      const auto n = static_cast<uint32_t>(std::min<size_t>(shape.slotBytes, total - sent));
      pair.sender->commitFrom({src + sent, n}, {.messageBytes = total, .offset = sent, .bytes = n, .index = sentSlots++});
      sent += n;
    }
    maxAhead = std::max(maxAhead, sentSlots - gotSlots);
    pair.receiver->progress();
    if (auto slot = pair.receiver->peek()) {
      ASSERT_EQ(slot->tag.index, gotSlots);
      ASSERT_EQ(slot->tag.offset, got);
      std::memcpy(dst + got, slot->data.data(), slot->data.size());
      got += slot->data.size();
      ++gotSlots;
      pair.receiver->release();
    }
  }
  EXPECT_EQ(gotSlots, 128u);
  EXPECT_LE(maxAhead, shape.slots);
  EXPECT_EQ(std::memcmp(message.data(), received.data(), total), 0);
  EXPECT_EQ(pair.cache->stats().misses, 0u);  // ordinary memory: copied into the staging slots
}

// commitFrom sends a loomMemAlloc buffer in place, registering it once: the
// cache hits on the next send, and keepPayloads returns once the device has
// read it. Ordinary memory is copied at once, so the caller may change it.
TEST(IbFifo, LoomMemAllocBuffersGoInPlaceAndOrdinaryMemoryIsCopied) {
  FakePair pair(FifoShape{.slots = 4, .slotBytes = 4096});
  auto* shared = static_cast<std::byte*>(memory::allocateShared(8192));
  std::memset(shared, 0x5a, 8192);
  const uint64_t before = pair.fake.registrationsMade();
  pair.sender->commitFrom({shared + 100, 3000}, {.messageBytes = 3000, .bytes = 3000});
  pair.sender->commitFrom({shared + 4000, 4096}, {.messageBytes = 4096, .bytes = 4096});
  pair.sender->keepPayloads();
  EXPECT_TRUE(pair.sender->flushed());
  EXPECT_EQ(pair.fake.registrationsMade(), before + 1);
  EXPECT_EQ(pair.cache->stats().misses, 1u);
  EXPECT_EQ(pair.cache->stats().hits, 1u);

  std::vector<std::byte> ordinary(64, std::byte{1});
  pair.sender->commitFrom(ordinary, {.messageBytes = 64, .bytes = 64});
  std::fill(ordinary.begin(), ordinary.end(), std::byte{2});
  pair.receiver->progress();
  for (size_t expect : {size_t{3000}, size_t{4096}}) {
    auto slot = pair.receiver->peek();
    ASSERT_TRUE(slot.has_value());
    ASSERT_EQ(slot->data.size(), expect);
    for (auto b : slot->data) ASSERT_EQ(b, std::byte{0x5a});
    pair.receiver->release();
  }
  auto copied = pair.receiver->peek();
  ASSERT_TRUE(copied.has_value());
  for (auto b : copied->data) EXPECT_EQ(b, std::byte{1});
  pair.receiver->release();
  EXPECT_EQ(pair.cache->stats().misses, 1u);  // the ordinary buffer was never registered
  pair.sender.reset();
  memory::freeShared(shared);
}

TEST(IbRegistrationCache, HitMissEvictionAndAFreedBufferRegisteredAnew) {
  FakeVerbs fake;
  auto device = fake.open("fake0", 1, 0);
  RegistrationCache cache(*device, 2);
  std::vector<int> plain(100);
  EXPECT_EQ(cache.find(plain.data(), 400), nullptr);  // not loomMemAlloc's: never registered
  EXPECT_EQ(fake.liveRegistrations(), 0u);

  void* a = memory::allocateShared(1 << 16);
  void* b = memory::allocateShared(1 << 16);
  void* c = memory::allocateShared(1 << 16);
  auto ra = cache.find(a, 100);  // miss
  EXPECT_EQ(cache.find(static_cast<std::byte*>(a) + 500, 100), ra);  // hit: the whole allocation is registered
  auto rb = cache.find(b, 100);  // miss
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
  cache.find(a, 1);              // a is the most recent now
  cache.find(c, 1);              // a third: b, the least recently used, goes
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(fake.liveRegistrations(), 3u);  // b's lives on while a write (rb) still uses it ...
  rb.reset();
  EXPECT_EQ(fake.liveRegistrations(), 2u);  // ... and goes with it
  cache.find(a, 1);
  EXPECT_EQ(cache.stats().hits, 3u);
  ra.reset();

  // a freed, and a new buffer of the same size: a miss, never a's
  // registration, even where the new one lands on a's pages.
  memory::freeShared(a);
  void* again = memory::allocateShared(1 << 16);
  const auto made = fake.registrationsMade();
  const auto evicted = cache.stats().evictions;
  auto fresh = cache.find(again, 64);
  EXPECT_EQ(fake.registrationsMade(), made + 1);
  EXPECT_EQ(cache.stats().misses, 4u);
  if (again == a) {
    EXPECT_EQ(cache.stats().evictions, evicted + 1) << "the stale entry over a's range goes";
  }
  EXPECT_EQ(fake.rkeyOf(again, 64), fresh->rkey());
  fresh.reset();
  memory::freeShared(again);
  memory::freeShared(b);
  memory::freeShared(c);
}

// Every failure a device can report becomes loomRemoteError naming the peer,
// the device and what happened, on the side that sees it.
TEST(IbFailures, AQueuePairInTheErrorStateFailsBothEnds) {
  FakePair pair(FifoShape{.slots = 4, .slotBytes = 64});
  pair.fake.breakQueuePair(pair.senderQpn);
  pair.sender->commit({.messageBytes = 1, .bytes = 1});
  const auto what = errorOf([&] { pair.sender->progress(); });
  EXPECT_TRUE(contains(what, "rank 1")) << what;
  EXPECT_TRUE(contains(what, "flushed")) << what;
  EXPECT_TRUE(contains(what, "fake0:1")) << what;
  EXPECT_TRUE(contains(errorOf([&] { pair.sender->checkAlive(); }), "rank 1"));  // and it stays failed

  pair.fake.breakQueuePair(pair.receiverQpn);
  const auto there = errorOf([&] { pair.receiver->progress(); });
  EXPECT_TRUE(contains(there, "rank 0")) << there;
  EXPECT_TRUE(contains(there, "flushed")) << there;
}

TEST(IbFailures, EveryInjectedCompletionErrorNamesThePeer) {
  for (auto [status, words] : {std::pair{WcStatus::RetryExceeded, "stopped answering"},
                               std::pair{WcStatus::RemoteAccess, "remote access"},
                               std::pair{WcStatus::RnrRetryExceeded, "receiver-not-ready"},
                               std::pair{WcStatus::LocalProtection, "local protection"}}) {
    FakePair pair(FifoShape{.slots = 2, .slotBytes = 64});
    pair.fake.failNextWrite(status, pair.senderQpn);
    pair.sender->commit({.messageBytes = 1, .bytes = 1});
    const auto what = errorOf([&] { pair.sender->progress(); });
    EXPECT_TRUE(contains(what, "rank 1")) << what;
    EXPECT_TRUE(contains(what, words)) << what;
    pair.receiver->progress();
    EXPECT_FALSE(pair.receiver->peek().has_value());  // nothing was delivered
  }
}

// A receiver that is gone: its queue pair no longer answers (the retries
// run out), and its control socket closes.
TEST(IbFailures, AReceiverThatLeftFailsTheSender) {
  FakePair pair(FifoShape{.slots = 2, .slotBytes = 64});
  pair.receiver.reset();
  pair.sender->commit({.messageBytes = 1, .bytes = 1});
  const auto what = errorOf([&] { pair.sender->checkAlive(); });
  EXPECT_TRUE(contains(what, "rank 1")) << what;
  EXPECT_TRUE(contains(what, "stopped answering")) << what;
}

TEST(IbFailures, ASenderThatLeftFailsTheReceiverOnceItsSlotsAreRead) {
  FakePair pair(FifoShape{.slots = 2, .slotBytes = 64});
  pair.sender->commit({.messageBytes = 0, .bytes = 0});
  pair.sender.reset();
  EXPECT_NO_THROW(pair.receiver->checkAlive());  // its last slot is still there
  ASSERT_TRUE(pair.receiver->peek().has_value());
  pair.receiver->release();
  const auto deadline = std::chrono::steady_clock::now() + IbRecvConnection::kGrace + std::chrono::seconds(5);
  std::string what;
  while (what.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      pair.receiver->checkAlive();
    } catch (const Error& e) {
      what = e.what();
    }
  }
  EXPECT_TRUE(contains(what, "rank 0")) << what;
}

// A 4-byte write landing where slot 0 should have been slot 1's: caught.
TEST(IbFailures, ASlotOutOfSequenceIsCorrupt) {
  FakePair pair(FifoShape{.slots = 4, .slotBytes = 64});
  pair.sender->commit({.messageBytes = 1, .bytes = 1});
  pair.receiver->progress();
  auto slot = pair.receiver->peek();
  ASSERT_TRUE(slot.has_value());
  auto* header = const_cast<std::byte*>(slot->data.data()) - kHeaderBytes;
  SlotTag wrong = slot->tag;
  wrong.sequence = 5;
  std::memcpy(header, &wrong, sizeof wrong);
  const auto what = errorOf([&] { pair.receiver->peek(); });
  EXPECT_TRUE(contains(what, "corrupt")) << what;
  EXPECT_TRUE(contains(what, "rank 0")) << what;
}

TEST(IbPorts, LoomIbHcaChoosesAsNcclIbHcaDoes) {
  const std::vector<DeviceInfo> devices = {
      {.name = "mlx5_0", .ports = {PortInfo{.active = false}, PortInfo{.active = true}}},
      {.name = "mlx5_1", .ports = {PortInfo{.active = true}}},
      {.name = "mlx5_10", .ports = {PortInfo{.active = true}}},
  };
  auto pick = [&](std::string_view spec) {
    auto c = choosePort(devices, spec);
    return c ? c->device + ":" + std::to_string(c->port) : std::string("none");
  };
  EXPECT_EQ(pick(""), "mlx5_0:2");           // the first active port
  EXPECT_EQ(pick("mlx5_1"), "mlx5_1:1");     // a prefix ...
  EXPECT_EQ(pick("mlx5_1:1"), "mlx5_1:1");
  EXPECT_EQ(pick("=mlx5_10"), "mlx5_10:1");  // ... or an exact name
  EXPECT_EQ(pick("^mlx5_0"), "mlx5_1:1");    // excluded
  EXPECT_EQ(pick("mlx5_0:1"), "none");       // that port is down
  EXPECT_EQ(pick("mlx5_0:2"), "mlx5_0:2");
  EXPECT_EQ(pick("mlx4"), "none");
  try {
    choosePort(devices, "mlx5_0:x");
    FAIL() << "a bad port was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_TRUE(contains(e.what(), "LOOM_IB_HCA")) << e.what();
  }
}

// The registry: verbs first across hosts where a device is up, never
// without one, and a forced LOOM_TRANSPORT=ibverbs says why it cannot. Each
// check makes its transports anew, as a communicator does at init: the
// verbs transport looks at the devices and LOOM_IB_HCA once.
TEST(IbRegistry, VerbsLeadAcrossHostsOnlyWithADevice) {
  FakeVerbs fake;
  ScopedVerbs installed(fake);
  Endpoint self, remote, local;
  self.rank = 0;
  self.hostId = local.hostId = 1;
  remote.rank = local.rank = 1;
  remote.hostId = 2;
  const auto pick = [&](const Endpoint& peer) { return std::string(selectTransport(allTransports(), self, peer).name()); };
  EXPECT_EQ(pick(remote), "ibverbs");
  EXPECT_EQ(pick(local), "shm");
  {
    ScopedEnv hca("LOOM_IB_HCA", "mlx5");
    EXPECT_NE(pick(remote), "ibverbs");
  }
  const auto transports = allTransports();
  EXPECT_STREQ(selectTransport(transports, self, remote).name(), "ibverbs");
  fake.removeDevices();
  EXPECT_STREQ(selectTransport(transports, self, remote).name(), "ibverbs") << "looked at once";
  EXPECT_NE(pick(remote), "ibverbs");
  ScopedEnv forced("LOOM_TRANSPORT", "ibverbs");
  try {
    pick(remote);
    FAIL() << "ibverbs was chosen with no device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidUsage);
    EXPECT_TRUE(contains(e.what(), "no RDMA device")) << e.what();
  }
}

// The communicator over the fake, ranks as threads: every collective's
// ring and direct algorithms through verbs connections, exact.
TEST(IbComm, CollectivesOverVerbsAreExact) {
  loom::test::TransportScope transport("ibverbs");
  ScopedEnv algo("LOOM_ALGO", "ring");
  ScopedEnv fifo("LOOM_BUFFSIZE", "262144");
  constexpr int kRanks = 3;
  auto comms = loom::test::initThreadComms(kRanks);
  for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}}) {
    loom::test::onThreads(kRanks, [&](int r) {
      std::vector<int64_t> in(count), out(count), gathered(count * kRanks);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(i * 7 + r);
      ASSERT_EQ(loomAllReduce(in.data(), out.data(), count, loomInt64, loomSum, comms[r], nullptr), loomSuccess);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int64_t>(3 * i * 7 + 3)) << i;
      ASSERT_EQ(loomAllGather(in.data(), gathered.data(), count, loomInt64, comms[r], nullptr), loomSuccess);
      for (int p = 0; p < kRanks; ++p) ASSERT_EQ(gathered[p * count + count - 1], static_cast<int64_t>((count - 1) * 7 + p));
    });
  }
  loom::test::destroyAll(comms);
  EXPECT_TRUE(transport.fake()->queuePairs().empty());       // every queue pair went with its communicator
  EXPECT_EQ(transport.fake()->liveRegistrations(), 0u);      // and every registration
}

// The real libibverbs: the build links it; a device test needs a device.
TEST(IbDevice, ProbeTheRealDevices) {
  Verbs* real = realVerbs();
  if (real == nullptr) GTEST_SKIP() << "this build has no libibverbs (rdma-core): the verbs transport reaches no device";
  const auto devices = real->devices();
  if (devices.empty()) GTEST_SKIP() << "ibv_get_device_list found no RDMA device here: device tests skipped";
  const auto choice = choosePort(devices, "");
  if (!choice) GTEST_SKIP() << devices.size() << " RDMA device(s), no active port: device tests skipped";
  // A queue pair connected to itself on the device: one write with an
  // immediate lands in a registered buffer and completes on both sides.
  auto device = real->open(choice->device, choice->port, 0);
  std::vector<std::byte> from(4096, std::byte{7}), to(4096);
  auto src = device->registerMemory(from.data(), from.size(), false);
  auto dst = device->registerMemory(to.data(), to.size(), true);
  auto cq = device->createCq(8);
  auto qp = device->createQp(*cq, 4, 4);
  qp->connect(device->address(qp->qpn(), 11), 11);
  qp->postRecv(1);
  const Sge sge{reinterpret_cast<uint64_t>(from.data()), 4096, src->lkey()};
  qp->postWrite({.wrId = 2, .sges = std::span(&sge, 1), .remoteAddress = reinterpret_cast<uint64_t>(to.data()),
                 .rkey = dst->rkey(), .imm = 99u});
  Completion cs[4];
  size_t seen = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (seen < 2 && std::chrono::steady_clock::now() < deadline) {
    const size_t n = cq->poll(std::span(cs + seen, 4 - seen));
    for (size_t i = seen; i < seen + n; ++i) ASSERT_EQ(cs[i].status, WcStatus::Success) << wcStatusName(cs[i].status);
    seen += n;
  }
  ASSERT_EQ(seen, 2u);
  EXPECT_EQ(from, to);
}

}  // namespace
