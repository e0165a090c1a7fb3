// Strangers at the rendezvous root: wrong secret, garbage, truncated header,
// huge length. Each is dropped and the job completes.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <algorithm>
#include <thread>

#include "base/error.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/rendezvous.hpp"
#include "comm/bootstrap/unique_id.hpp"
#include "tests/support/ranks.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

// True when the root closed the connection (EOF) instead of answering.
bool rootHangsUpOn(const net::SocketAddress& root, std::span<const std::byte> bytes) {
  auto s = net::Socket::connect(root, Deadline::after(5s), nullptr, "root");
  s.sendAll(bytes, Deadline::after(5s), nullptr);
  std::byte b[1];
  try {
    s.recvAll(b, Deadline::after(5s), nullptr);
  } catch (const Error& e) {
    return e.code() == loomRemoteError;  // closed or reset by the root
  }
  return false;
}

}  // namespace

TEST(Security, StrangersAreDroppedAndTheJobCompletes) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  UniqueIdData data = decodeUniqueId(id);
  Secret wrong = Secret::random();
  PeerInfo fake;
  fake.rank = 0;
  auto hello = Hello{0, 2, fake}.encode();

  // Before the ranks arrive: a wrong secret claiming rank 0, garbage, a header
  // promising 4 GiB, a truncated header.
  EXPECT_TRUE(rootHangsUpOn(data.root, encodeFrame(FrameType::Hello, wrong, hello)));
  std::vector<std::byte> garbage(200, std::byte{0x41});
  EXPECT_TRUE(rootHangsUpOn(data.root, garbage));
  auto huge = encodeFrame(FrameType::Hello, data.secret, {});
  huge[kFrameHeaderBytes - 4] = huge[kFrameHeaderBytes - 3] = huge[kFrameHeaderBytes - 2] = huge[kFrameHeaderBytes - 1] = std::byte{0xff};
  EXPECT_TRUE(rootHangsUpOn(data.root, huge));
  // A truncated header: the stranger sends half and hangs up; nothing to read back.
  {
    auto s = net::Socket::connect(data.root, Deadline::after(5s), nullptr, "root");
    s.sendAll(std::span(huge).first(10), Deadline::after(5s), nullptr);
  }
  // A right secret with a malformed payload (trailing bytes).
  auto bad = hello;
  bad.push_back(std::byte{0});
  EXPECT_TRUE(rootHangsUpOn(data.root, encodeFrame(FrameType::Hello, data.secret, bad)));

  std::vector<loomComm_t> comms(2, nullptr);
  test::onThreads(2, [&](int r) {
    EXPECT_EQ(loomCommInitRank(&comms[static_cast<size_t>(r)], 2, id, r), loomSuccess) << loomGetLastError(nullptr);
    EXPECT_EQ(loomCommBarrier(comms[static_cast<size_t>(r)]), loomSuccess);
  });
  test::destroyAll(comms);
}

TEST(Security, FrameHeaderParserRejectsEachDefect) {
  Secret s = Secret::random();
  auto good = encodeFrame(FrameType::RingHello, s, std::vector<std::byte>(8));
  auto header = [&](std::vector<std::byte> f) {
    return parseFrameHeader(std::span<const std::byte, kFrameHeaderBytes>(f.data(), kFrameHeaderBytes), s, 64);
  };
  EXPECT_EQ(header(good).length, 8u);
  for (size_t byte : {0u, 4u, 6u, 8u, 23u}) {  // magic, version, type, secret (first and last byte)
    auto f = good;
    f[byte] ^= std::byte{0x10};
    EXPECT_THROW(header(f), Error) << "byte " << byte;
  }
  auto big = encodeFrame(FrameType::RingHello, s, std::vector<std::byte>(65));
  EXPECT_THROW(header(big), Error);
}

// The watchdog's reader gets its bytes in whatever pieces TCP delivers: one
// at a time, or several frames at once. Each frame comes out whole and in
// order, and a defect throws as soon as the header is complete.
TEST(Security, FrameReaderAssemblesFramesFromAnyPieces) {
  Secret s = Secret::random();
  std::vector<std::byte> stream;
  for (size_t length : {size_t{0}, size_t{5}, size_t{300}}) {
    auto f = encodeFrame(FrameType::Heartbeat, s, std::vector<std::byte>(length, std::byte(length)));
    stream.insert(stream.end(), f.begin(), f.end());
  }
  for (size_t piece : {size_t{1}, size_t{7}, stream.size()}) {
    FrameReader reader(s, 1024);
    std::vector<size_t> lengths;
    for (size_t at = 0; at < stream.size(); at += piece) {
      std::span<const std::byte> bytes = std::span(stream).subspan(at, std::min(piece, stream.size() - at));
      while (!bytes.empty()) {
        if (auto frame = reader.feed(bytes)) {
          EXPECT_EQ(frame->type, FrameType::Heartbeat);
          for (auto b : frame->payload) ASSERT_EQ(b, std::byte(frame->payload.size()));
          lengths.push_back(frame->payload.size());
        }
      }
    }
    EXPECT_EQ(lengths, (std::vector<size_t>{0, 5, 300})) << "pieces of " << piece;
    EXPECT_FALSE(reader.midFrame());
  }
  FrameReader strict(s, 100);
  std::span<const std::byte> tooLong(stream.data() + 2 * kFrameHeaderBytes + 5, kFrameHeaderBytes);
  EXPECT_THROW(strict.feed(tooLong), Error);  // announces 300 bytes, over the limit of 100
  auto wrong = encodeFrame(FrameType::Heartbeat, Secret::random(), {});
  std::span<const std::byte> forged(wrong);
  EXPECT_THROW(FrameReader(s, 100).feed(forged), Error);
}
