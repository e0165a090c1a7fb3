// The transport layer on its own: FIFO credits, shared-memory segment
// lifetime, and the listener's secret check.
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>
#include <set>

#include "base/error.hpp"
#include "tests/support/page_map.hpp"
#include "tests/support/ranks.hpp"
#include "transport/handshake.hpp"
#include "transport/ibverbs/fake_verbs.hpp"
#include "transport/ibverbs/ib_transport.hpp"
#include "transport/listener.hpp"
#include "transport/registry.hpp"
#include "transport/shm/shm_connection.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/socket/socket_connection.hpp"
#include "transport/socket/socket_transport.hpp"

using namespace loom;
using namespace loom::transport;
using namespace std::chrono_literals;

namespace {

std::pair<net::Socket, net::Socket> socketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  return {net::Socket(fds[0], "rank 0"), net::Socket(fds[1], "rank 1")};
}

// A socket connection's two ends over `lanes` socket pairs.
struct SocketEnds {
  std::unique_ptr<sock::SocketSendConnection> sender;
  std::unique_ptr<sock::SocketRecvConnection> receiver;

  SocketEnds(FifoShape shape, int lanes) {
    std::vector<net::Socket> sendSide, recvSide;
    for (int i = 0; i < lanes; ++i) {
      auto [a, b] = socketPair();
      sendSide.push_back(std::move(a));
      recvSide.push_back(std::move(b));
    }
    sender = std::make_unique<sock::SocketSendConnection>(std::move(sendSide), shape, "rank 1");
    receiver = std::make_unique<sock::SocketRecvConnection>(std::move(recvSide), shape, "rank 0");
  }
};

// Both ends of a shared-memory FIFO in this process.
struct ShmPair {
  std::unique_ptr<transport::shm::ShmRecvConnection> receiver;
  std::unique_ptr<transport::shm::ShmSendConnection> sender;

  explicit ShmPair(FifoShape shape) {
    auto segment = loom::shm::Segment::create(transport::shm::FifoView::segmentBytes(shape));
    new (segment.data()) transport::shm::FifoControl();
    auto peer = loom::shm::Segment::open(segment.name(), transport::shm::FifoView::segmentBytes(shape));
    auto [a, b] = socketPair();
    receiver = std::make_unique<transport::shm::ShmRecvConnection>(std::move(segment), shape, std::move(a));
    sender = std::make_unique<transport::shm::ShmSendConnection>(std::move(peer), shape, std::move(b));
  }
};

bool inDevShm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(ShmSegment, TheNameGoesOnceThePeerHasMappedIt) {
  auto created = loom::shm::Segment::create(4096);
  ASSERT_TRUE(inDevShm(created.name()));
  auto opened = loom::shm::Segment::open(created.name(), 4096);
  opened.unlink();
  EXPECT_FALSE(inDevShm(created.name()));
  created.data()[100] = std::byte{42};
  EXPECT_EQ(opened.data()[100], std::byte{42});  // same memory, name or not
  EXPECT_EQ(std::filesystem::status("/dev/shm").type(), std::filesystem::file_type::directory);
}

// tmpfs reserves nothing when a segment is sized, so one larger than what
// /dev/shm has free would be a SIGBUS at its first touch: refused by name
// instead, and nothing left in /dev/shm.
TEST(ShmSegment, ASegmentLargerThanDevShmHasFreeIsRefusedByName) {
  struct statvfs fs {};
  ASSERT_EQ(::statvfs("/dev/shm", &fs), 0);
  const size_t asked = static_cast<size_t>(fs.f_bavail) * fs.f_frsize + (size_t{1} << 30);
  try {
    auto segment = loom::shm::Segment::create(asked);
    ADD_FAILURE() << "a segment of " << asked << " bytes was made, 1 GiB more than /dev/shm had free";
  } catch (const loom::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), loomSystemError);
    EXPECT_NE(what.find("needs " + std::to_string(asked) + " bytes and /dev/shm has "), std::string::npos) << what;
    // Nothing of it left behind: its name, as the message gives it.
    const auto at = what.find("/loom-");
    ASSERT_NE(at, std::string::npos) << what;
    EXPECT_FALSE(inDevShm(what.substr(at, what.find(' ', at) - at))) << what;
  }
}

TEST(ShmSegment, TheCreatorRemovesTheNameIfThePeerNeverCame) {
  std::string name;
  {
    auto created = loom::shm::Segment::create(4096);
    name = created.name();
    ASSERT_TRUE(inDevShm(name));
  }
  EXPECT_FALSE(inDevShm(name));
}

TEST(ShmSegment, SegmentsOfDeadCreatorsAreSwept) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer runs
  std::string stale = "/dev/shm/loom-" + std::to_string(child) + "-00000000deadbeef";
  std::string live = "/dev/shm/loom-" + std::to_string(::getpid()) + "-00000000cafef00d";
  for (const auto& path : {stale, live}) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  loom::shm::removeStaleSegments();
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  std::filesystem::remove(live);
}

// A rank killed a moment ago is a zombie until its parent reaps it: its
// segments are orphans already, and a survivor sweeping then removes them.
TEST(ShmSegment, SegmentsOfZombieCreatorsAreSwept) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Exited, not reaped: waitid with WNOWAIT leaves it a zombie.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  std::string stale = "/dev/shm/loom-" + std::to_string(child) + "-00000000deadbeef";
  FILE* f = std::fopen(stale.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  loom::shm::removeStaleSegments();
  EXPECT_FALSE(std::filesystem::exists(stale));
  std::filesystem::remove(stale);
  ::waitpid(child, nullptr, 0);
}

// A page of a shared segment faults in each process on its first touch
// there (1-60 us on a VM, in the middle of a call): mapEveryPage puts every
// page in this process's page tables at once and keeps what they hold.
TEST(ShmSegment, MapEveryPagePutsEveryPageInThisProcesssTables) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  constexpr size_t kPages = 64;
  const size_t bytes = kPages * page;
  auto created = loom::shm::Segment::create(bytes, loom::shm::Segment::Populate::ByFirstWriter);
  created.data()[5 * page + 1] = std::byte{42};  // one page written by its first writer
  EXPECT_EQ(test::pagesNotMapped(created.data(), bytes), kPages - 1);
  auto opened = loom::shm::Segment::open(created.name(), bytes);
  EXPECT_EQ(test::pagesNotMapped(opened.data(), bytes), kPages);  // nothing touched through this mapping yet
  opened.mapEveryPage();
  EXPECT_EQ(test::pagesNotMapped(opened.data(), bytes), 0u);
  EXPECT_EQ(opened.data()[5 * page + 1], std::byte{42});
  for (size_t at = 0; at < bytes; at += page / 2) {
    if (at == 5 * page) continue;
    EXPECT_EQ(opened.data()[at], std::byte{0}) << "byte " << at;
  }
  // The creator's mapping sees the pages the opener's mapping made.
  opened.data()[9 * page] = std::byte{7};
  EXPECT_EQ(created.data()[9 * page], std::byte{7});
}

TEST(ShmSegment, OpeningANameThatIsNotLoomsIsRefused) {
  EXPECT_THROW(loom::shm::Segment::open("/etc-passwd", 4096), Error);
  EXPECT_THROW(loom::shm::Segment::open("../../etc/passwd", 4096), Error);
}

TEST(ShmFifo, TheSenderRunsAheadByTheFifoDepthAndNoFurther) {
  ShmPair pair(FifoShape{.slots = 4, .slotBytes = 4096});
  auto& receiver = *pair.receiver;
  auto& sender = *pair.sender;

  EXPECT_FALSE(receiver.peek().has_value());
  for (uint32_t i = 0; i < 4; ++i) {
    auto slot = sender.reserve();
    ASSERT_EQ(slot.size(), 4096u);
    slot[0] = std::byte(i);
    sender.commit({.messageBytes = 4, .bytes = 1, .sequence = 0});
  }
  EXPECT_TRUE(sender.reserve().empty());  // no credit left
  auto first = receiver.peek();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data[0], std::byte{0});
  EXPECT_EQ(first->tag.messageBytes, 4u);
  receiver.release();
  EXPECT_FALSE(sender.reserve().empty());  // one credit back
  for (uint32_t i = 1; i < 4; ++i) {
    auto slot = receiver.peek();
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->data[0], std::byte(i));
    receiver.release();
  }
  EXPECT_FALSE(receiver.peek().has_value());
}

// Shared memory copies at commitFrom: the caller's memory is free at once.
TEST(ShmFifo, CommitFromCopiesIntoTheSlot) {
  ShmPair pair(FifoShape{.slots = 2, .slotBytes = 64});
  std::vector<std::byte> caller(64, std::byte{1});
  ASSERT_FALSE(pair.sender->reserve().empty());
  pair.sender->commitFrom(caller, {.messageBytes = 64, .bytes = 64});
  std::fill(caller.begin(), caller.end(), std::byte{2});
  auto slot = pair.receiver->peek();
  ASSERT_TRUE(slot.has_value());
  ASSERT_EQ(slot->data.size(), 64u);
  for (auto byte : slot->data) EXPECT_EQ(byte, std::byte{1});
}

// A handle in flight (comm/engine/by_handle.cpp): one compare-and-swap
// decides between the sender's withdrawal and the receiver's taking it, and
// the receiver's refusal reaches the sender.
TEST(ShmFifo, AHandleIsEitherWithdrawnOrTakenNeverBoth) {
  ShmPair pair(FifoShape{.slots = 2, .slotBytes = 256});
  transport::shm::ShmSendConnection& sender = *pair.sender;
  transport::shm::ShmRecvConnection& receiver = *pair.receiver;
  const transport::SlotTag tag{.messageBytes = 1 << 20, .bytes = 16, .flags = transport::kSlotHoldsHandle};
  EXPECT_TRUE(sender.takesHandles());
  // Withdrawn first: the receiver may not take it.
  ASSERT_FALSE(sender.reserve().empty());
  uint64_t slot = sender.slotsCommitted();
  sender.offerHandle(slot);
  sender.commit(tag);
  EXPECT_TRUE(sender.withdrawHandle(slot));
  EXPECT_TRUE(sender.withdrawHandle(slot));  // and it stays withdrawn
  ASSERT_TRUE(receiver.peek().has_value());
  EXPECT_FALSE(receiver.takeHandle());
  receiver.release();
  EXPECT_EQ(sender.slotsReleased(), slot + 1);
  // Taken first: the sender may not withdraw it, and sees its release.
  ASSERT_FALSE(sender.reserve().empty());
  slot = sender.slotsCommitted();
  sender.offerHandle(slot);
  sender.commit(tag);
  const auto seen = receiver.peek();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->tag.flags, transport::kSlotHoldsHandle);
  EXPECT_TRUE(receiver.takeHandle());
  EXPECT_FALSE(sender.withdrawHandle(slot));
  EXPECT_EQ(sender.slotsReleased(), slot);
  receiver.release();
  EXPECT_EQ(sender.slotsReleased(), slot + 1);
  receiver.refuseHandles();
  EXPECT_FALSE(sender.takesHandles());
}

// Each connection says where its slots live, and a CPU thread refuses slots
// it cannot touch, naming the peer and the kind.
TEST(ConnectionSlots, EachTransportNamesWhereItsSlotsLive) {
  ShmPair shm(FifoShape{.slots = 2, .slotBytes = 64});
  EXPECT_EQ(shm.sender->slotKind(), memory::MemoryKind::HostShared);
  EXPECT_EQ(shm.receiver->slotKind(), memory::MemoryKind::HostShared);
  SocketEnds socket(FifoShape{.slots = 2, .slotBytes = 64}, 1);
  EXPECT_EQ(socket.sender->slotKind(), memory::MemoryKind::Host);
  EXPECT_EQ(socket.receiver->slotKind(), memory::MemoryKind::Host);
  for (auto kind : {memory::MemoryKind::Host, memory::MemoryKind::HostShared, memory::MemoryKind::CudaHostPinned}) {
    EXPECT_NO_THROW(requireHostSlots(kind, "rank 1"));
  }
  try {
    requireHostSlots(memory::MemoryKind::CudaDevice, "rank 3 (10.0.0.2:4455)");
    FAIL() << "device slots were accepted for a CPU thread";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInternalError);
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda-device"), std::string::npos) << e.what();
  }
}

TEST(ShmFifo, APeerThatClosesIsNoticedOnlyAfterItsDataIsRead) {
  ShmPair pair(FifoShape{.slots = 2, .slotBytes = 64});
  auto& receiver = *pair.receiver;
  pair.sender->reserve();
  pair.sender->commit({.messageBytes = 0, .bytes = 0, .sequence = 0});
  pair.sender.reset();  // the sender is gone
  EXPECT_NO_THROW(receiver.checkAlive());  // its last slot is still there
  ASSERT_TRUE(receiver.peek().has_value());
  receiver.release();
  EXPECT_THROW(receiver.checkAlive(), Error);
}

// The sender's side of the same rule: a peer that took every slot and left
// finished first, which is no error; one that left slots behind died.
TEST(ShmFifo, APeerThatLeavesFailsTheSenderOnlyIfSlotsAreLeft) {
  ShmPair pair(FifoShape{.slots = 2, .slotBytes = 64});
  auto& sender = *pair.sender;
  sender.reserve();
  sender.commit({.messageBytes = 0, .bytes = 0, .sequence = 0});
  ASSERT_TRUE(pair.receiver->peek().has_value());
  pair.receiver->release();
  pair.receiver.reset();
  EXPECT_NO_THROW(sender.checkAlive());
  sender.reserve();
  sender.commit({.messageBytes = 0, .bytes = 0, .sequence = 0});
  EXPECT_THROW(sender.checkAlive(), Error);
}

TEST(SocketFifo, SlotsCrossSeveralLanesInOrder) {
  FifoShape shape{.slots = 4, .slotBytes = 1000};
  SocketEnds ends(shape, 3);
  auto& sender = *ends.sender;
  auto& receiver = *ends.receiver;
  uint32_t sent = 0, received = 0;
  while (received < 50) {
    while (sent < 50) {
      auto slot = sender.reserve();
      if (slot.empty()) break;
      std::fill(slot.begin(), slot.begin() + sent % 1000, std::byte(sent));
      sender.commit({.messageBytes = 50, .bytes = sent % 1000, .sequence = 0});
      ++sent;
    }
    sender.progress();
    receiver.progress();
    while (auto slot = receiver.peek()) {
      ASSERT_EQ(slot->tag.bytes, received % 1000);
      for (auto byte : slot->data) ASSERT_EQ(byte, std::byte(received));
      receiver.release();
      ++received;
    }
  }
  EXPECT_TRUE(sender.flushed());
}

// commitFrom: a socket sends straight from the caller's memory (what is
// there when it goes), until keepPayloads() copies what has not gone yet.
TEST(SocketFifo, SlotsCommittedFromCallerMemoryAreSentFromItUntilKept) {
  FifoShape shape{.slots = 4, .slotBytes = 256 << 10};  // more than a socketpair's buffer takes at once
  SocketEnds ends(shape, 1);
  auto& sender = *ends.sender;
  auto& receiver = *ends.receiver;
  std::vector<std::byte> caller(4 * shape.slotBytes, std::byte{1});
  const auto commit = [&](size_t slot) {
    ASSERT_FALSE(sender.reserve().empty());
    const std::span<const std::byte> data(caller.data() + slot * shape.slotBytes, shape.slotBytes);
    sender.commitFrom(data, {.messageBytes = caller.size(), .bytes = shape.slotBytes});
  };
  commit(0);
  std::fill(caller.begin(), caller.begin() + shape.slotBytes, std::byte{2});  // before anything went: 2 goes
  for (size_t slot = 1; slot < 4; ++slot) commit(slot);
  sender.progress();
  ASSERT_FALSE(sender.flushed()) << "the socket took everything at once: the test shows nothing";
  sender.keepPayloads();
  std::fill(caller.begin() + shape.slotBytes, caller.end(), std::byte{3});  // kept: 1 goes
  std::vector<std::byte> expected(caller.size(), std::byte{1});
  std::fill(expected.begin(), expected.begin() + shape.slotBytes, std::byte{2});
  std::vector<std::byte> got;
  while (got.size() < caller.size()) {
    sender.progress();
    receiver.progress();
    while (auto slot = receiver.peek()) {
      got.insert(got.end(), slot->data.begin(), slot->data.end());
      receiver.release();
    }
  }
  EXPECT_TRUE(got == expected);
  EXPECT_TRUE(sender.flushed());
}

// receiveInto: the message's slots that had not begun to arrive land in
// place; one that came before stays in the FIFO; the next message, of the same
// id and size and on the other lane, does not touch the buffer; and ending it
// moves what lies in the buffer but is not released yet into the FIFO.
TEST(SocketFifo, AMessagesSlotsLandInTheBufferItNames) {
  FifoShape shape{.slots = 8, .slotBytes = 64};
  SocketEnds ends(shape, 2);
  auto& sender = *ends.sender;
  auto& receiver = *ends.receiver;
  constexpr size_t kMessage = 3 * 64;
  // Two messages of 3 slots each, id 7, filled with the slot's number.
  std::vector<std::byte> payload(2 * kMessage);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(i / 64);
  const auto send = [&](uint32_t slot) {
    ASSERT_FALSE(sender.reserve().empty());
    sender.commitFrom({payload.data() + slot * 64, 64}, {.messageBytes = kMessage,
                                                         .offset = (slot % 3) * 64u,
                                                         .bytes = 64,
                                                         .message = 7,
                                                         .index = slot % 3});
  };
  const auto flush = [&] {
    while (!sender.flushed()) sender.progress();
    for (int i = 0; i < 10; ++i) receiver.progress();
  };
  send(0);
  flush();  // slot 0 is in before the buffer is named
  std::vector<std::byte> buffer(kMessage, std::byte{0xff});
  receiver.receiveInto(buffer, 7);
  for (uint32_t slot = 1; slot < 6; ++slot) send(slot);
  flush();
  for (uint32_t slot = 0; slot < 3; ++slot) {
    auto got = receiver.peek();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->tag.offset, slot * 64u);
    EXPECT_EQ(got->data.data() == buffer.data() + slot * 64, slot != 0) << "slot " << slot;
    for (auto byte : got->data) ASSERT_EQ(byte, std::byte(slot));
    if (got->data.data() != buffer.data() + slot * 64) std::memcpy(buffer.data() + slot * 64, got->data.data(), 64);
    receiver.release();
  }
  // The next message's slots are in the FIFO, not over this one's.
  for (size_t i = 0; i < kMessage; ++i) ASSERT_EQ(buffer[i], std::byte(i / 64)) << "byte " << i;
  auto next = receiver.peek();
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->data.data() >= buffer.data() && next->data.data() < buffer.data() + buffer.size());
  receiver.receiveInto({}, 0);

  // A second message named, received, not released, then un-named: its slots move to the FIFO.
  for (uint32_t slot = 3; slot < 6; ++slot) receiver.release();
  std::vector<std::byte> second(kMessage, std::byte{0xff});
  receiver.receiveInto(second, 7);
  for (uint32_t slot = 0; slot < 3; ++slot) send(slot);
  flush();
  receiver.receiveInto({}, 0);
  std::fill(second.begin(), second.end(), std::byte{0xee});
  for (uint32_t slot = 0; slot < 3; ++slot) {
    auto got = receiver.peek();
    ASSERT_TRUE(got.has_value());
    EXPECT_FALSE(got->data.data() >= second.data() && got->data.data() < second.data() + second.size());
    for (auto byte : got->data) ASSERT_EQ(byte, std::byte(slot));
    receiver.release();
  }
}

TEST(SocketFifo, APeerThatLeavesFailsTheSenderOnlyIfSlotsAreLeft) {
  FifoShape shape{.slots = 2, .slotBytes = 64};
  SocketEnds ends(shape, 1);
  auto& sender = *ends.sender;
  auto& receiver = ends.receiver;
  sender.reserve();
  sender.commit({.messageBytes = 8, .bytes = 8, .sequence = 0});
  while (!sender.flushed()) sender.progress();
  while (!receiver->peek()) receiver->progress();
  receiver.reset();  // took the slot and left
  EXPECT_NO_THROW(sender.checkAlive());
  sender.reserve();
  sender.commit({.messageBytes = 8, .bytes = 8, .sequence = 0});  // not yet sent: it needs the peer
  EXPECT_THROW(sender.checkAlive(), Error);
}

// The registry: shared memory for a peer on this host, sockets for one on
// another; LOOM_TRANSPORT forces one, and a name it lacks is refused with
// the list of what it has.
TEST(TransportRegistry, PicksTheTransportThatPrefersThePathMost) {
  const auto transports = allTransports();
  // Across hosts verbs win where a device has an active port, then UCX where
  // it has an RDMA device, then sockets.
  transport::ibverbs::Verbs* verbs = transport::ibverbs::realVerbs();
  const bool ibPort = verbs != nullptr && transport::ibverbs::choosePort(verbs->devices(), "").has_value();
#if LOOM_TEST_UCX
  EXPECT_EQ(transportNames(), "shm, socket, ucx, ibverbs");
  std::error_code ignored;
  const bool rdma = std::filesystem::exists("/sys/class/infiniband", ignored) &&
                    !std::filesystem::is_empty("/sys/class/infiniband", ignored);
  const char* acrossHosts = ibPort ? "ibverbs" : rdma ? "ucx" : "socket";
#else
  EXPECT_EQ(transportNames(), "shm, socket, ibverbs");
  const char* acrossHosts = ibPort ? "ibverbs" : "socket";
#endif
  Endpoint self, neighbour, remote;
  self.hostId = neighbour.hostId = 7;
  remote.hostId = 8;
  neighbour.rank = 1;
  remote.rank = 2;
  EXPECT_STREQ(selectTransport(transports, self, neighbour).name(), "shm");
  EXPECT_STREQ(selectTransport(transports, self, remote).name(), acrossHosts);
#if LOOM_TEST_UCX
  {
    loom::test::ScopedEnv forced("LOOM_TRANSPORT", "ucx");
    EXPECT_STREQ(selectTransport(transports, self, neighbour).name(), "ucx");
    EXPECT_STREQ(selectTransport(transports, self, remote).name(), "ucx");
  }
#endif
  {
    loom::test::ScopedEnv forced("LOOM_TRANSPORT", "socket");
    EXPECT_STREQ(selectTransport(transports, self, neighbour).name(), "socket");
  }
  {
    loom::test::ScopedEnv forced("LOOM_TRANSPORT", "shm");
    EXPECT_THROW(selectTransport(transports, self, remote), Error);
  }
  loom::test::ScopedEnv forced("LOOM_TRANSPORT", "carrier-pigeon");
  try {
    selectTransport(transports, self, neighbour);
    ADD_FAILURE() << "an unknown transport was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not one of: shm, socket"), std::string::npos) << e.what();
  }
}

// Each transport's wire id is its own, and the socket transport's bytes of
// a Hello survive the trip through it.
TEST(TransportRegistry, WireIdsAreDistinctAndTransportBytesRoundTrip) {
  std::set<uint32_t> ids;
  for (const auto& t : allTransports()) EXPECT_TRUE(ids.insert(t->wireId()).second) << t->name();
  Hello hello;
  hello.transport = sock::SocketTransport::kWireId;
  hello.transportBytes = sock::SocketHello{.index = 3, .count = 5, .nonce = 0x0123456789abcdefull}.encode();
  const Hello back = Hello::decode(hello.encode());
  const auto own = sock::SocketHello::decode(back);
  EXPECT_EQ(back.transport, sock::SocketTransport::kWireId);
  EXPECT_EQ(own.index, 3);
  EXPECT_EQ(own.count, 5);
  EXPECT_EQ(own.nonce, 0x0123456789abcdefull);
}

// A listener of rank 0 with `secret`, counting the connections it delivers.
struct ListeningRank {
  Context context;
  std::vector<std::unique_ptr<Transport>> transports = allTransports();
  std::atomic<int> delivered{0};
  std::mutex mutex;
  std::vector<std::unique_ptr<RecvConnection>> connections;  // kept: the sender maps what they hold
  std::unique_ptr<Listener> listener;

  explicit ListeningRank(Secret secret) {
    auto socket = net::Socket::listen(net::SocketAddress::parse("127.0.0.1:0"));
    context.self = {.rank = 0, .hostId = 1, .pid = ::getpid(), .listener = socket.localAddress()};
    context.secret = secret;
    context.timeout = 5000ms;
    listener = std::make_unique<Listener>(std::move(socket), context, transports,
                                          [this](int, Channel, std::unique_ptr<RecvConnection> c) {
                                            std::lock_guard lock(mutex);
                                            connections.push_back(std::move(c));
                                            ++delivered;
                                          });
  }
};

Context senderContext(Secret secret) {
  Context c;
  c.self = {.rank = 1, .hostId = 1, .pid = ::getpid(), .listener = net::SocketAddress::parse("127.0.0.1:1")};
  c.secret = secret;
  c.timeout = 5000ms;
  return c;
}

TEST(Listener, AConnectionWithTheWrongSecretIsRefused) {
  transport::ibverbs::FakeVerbs fake;  // the verbs transport too, on its fake
  transport::ibverbs::ScopedVerbs installed(fake);
  ListeningRank rank0(Secret::random());
  for (auto& t : rank0.transports) {
    try {
      t->connect(rank0.context.self, Channel::PointToPoint, senderContext(Secret::random()));
      ADD_FAILURE() << "connected with a wrong secret over " << t->name();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), loomRemoteError);
      EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(rank0.delivered, 0);
}

TEST(Listener, AConnectionWithTheRightSecretIsDelivered) {
  transport::ibverbs::FakeVerbs fake;
  transport::ibverbs::ScopedVerbs installed(fake);
  Secret secret = Secret::random();
  ListeningRank rank0(secret);
  std::vector<std::unique_ptr<SendConnection>> kept;
  for (auto& t : rank0.transports) kept.push_back(t->connect(rank0.context.self, Channel::PointToPoint, senderContext(secret)));
  auto deadline = std::chrono::steady_clock::now() + 5s;
  const auto all = static_cast<int>(rank0.transports.size());  // one connection over each
  while (rank0.delivered < all && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(rank0.delivered, all);
}

TEST(Listener, AHelloForAnotherRankIsRefused) {
  Secret secret = Secret::random();
  ListeningRank rank0(secret);
  Hello hello;
  hello.secret = secret;
  hello.from = 1;
  hello.to = 5;
  hello.transport = transport::shm::ShmTransport::kWireId;
  auto ctx = senderContext(secret);
  auto socket = connectWithHello(rank0.context.self, hello, ctx, Deadline::after(5000ms));
  EXPECT_THROW(recvReply(socket, Deadline::after(5000ms), nullptr), Error);
  EXPECT_EQ(rank0.delivered, 0);
}

// Found by fuzzing (tests/fuzz/data_connection_fuzz.cpp): the receiver sized
// its FIFO by whatever the Hello asked, up to terabytes.
TEST(Listener, AHelloAskingForMoreThanTheLargestFifoIsRefused) {
  Secret secret = Secret::random();
  ListeningRank rank0(secret);
  for (uint32_t kind : {transport::shm::ShmTransport::kWireId, sock::SocketTransport::kWireId}) {
    Hello hello;
    hello.secret = secret;
    hello.from = 1;
    hello.to = 0;
    hello.transport = kind;
    if (kind == sock::SocketTransport::kWireId) hello.transportBytes = sock::SocketHello{}.encode();
    hello.fifo = {.slots = 64, .slotBytes = 64u << 20};  // 4 GiB
    auto socket = connectWithHello(rank0.context.self, hello, senderContext(secret), Deadline::after(5000ms));
    const Reply reply = recvReply(socket, Deadline::after(5000ms), nullptr);
    EXPECT_FALSE(reply.ok) << kind;
    EXPECT_NE(reply.detail.find("unsupported"), std::string::npos) << reply.detail;
  }
  EXPECT_EQ(rank0.delivered, 0);
}

TEST(Listener, ASilentClientDoesNotHoldUpOthers) {
  Secret secret = Secret::random();
  ListeningRank rank0(secret);
  auto silent = net::Socket::connect(rank0.context.self.listener, Deadline::after(5000ms), nullptr, "silent");
  auto t0 = std::chrono::steady_clock::now();
  auto& shmTransport = *rank0.transports.front();
  auto connection = shmTransport.connect(rank0.context.self, Channel::PointToPoint, senderContext(secret));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
