// Stores: memory, file and TCP behave alike; the TCP server survives bad clients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "base/error.hpp"
#include "comm/store/store.hpp"
#include "comm/store/tcp_store.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

std::vector<std::byte> bytes(const std::string& s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

}  // namespace

class Stores : public ::testing::TestWithParam<std::string> {
 protected:
  // A store of the parameter's kind (for "tcp", with a server in this test).
  std::unique_ptr<Store> open() {
    if (GetParam() == "file") return openStore("file://" + ::testing::TempDir() + "loom-store-" + std::to_string(::getpid()), false, Deadline::after(5s), nullptr);
    if (GetParam() == "memory") return openStore("memory://test", false, Deadline::after(5s), nullptr);
    if (!server_) server_ = std::make_unique<TcpStoreServer>(net::SocketAddress::parse("127.0.0.1:0"));
    return openStore(server_->address().toString(), false, Deadline::after(5s), nullptr);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_P(Stores, SetGetEraseAndWaitingGet) {
  auto a = open();
  auto b = open();
  a->set("k/1", bytes("hello"));
  EXPECT_EQ(b->get("k/1", Deadline::after(5s), nullptr), bytes("hello"));
  a->set("k/1", bytes(""));  // overwrite with an empty value
  EXPECT_EQ(b->get("k/1", Deadline::after(5s), nullptr), bytes(""));

  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    a->set("later", bytes("value"));
  });
  EXPECT_EQ(b->get("later", Deadline::after(5s), nullptr), bytes("value"));  // waits for the set
  setter.join();

  a->erase("later");
  auto t0 = std::chrono::steady_clock::now();
  try {
    b->get("later", Deadline::after(200ms), nullptr);
    FAIL() << "erased key was found";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomTimeout);
    EXPECT_NE(std::string(e.what()).find("later"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 6s);
}

TEST_P(Stores, CancellationUnblocksGet) {
  auto store = open();
  Cancellation cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    cancel.cancel();
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(store->get("never", Deadline::after(60s), &cancel), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // far below the 60 s deadline
  t.join();
}

INSTANTIATE_TEST_SUITE_P(Kinds, Stores, ::testing::Values("memory", "file", "tcp"));

TEST(TcpStore, ServerSurvivesMalformedRequests) {
  TcpStoreServer server(net::SocketAddress::parse("127.0.0.1:0"));
  auto address = server.address();
  for (std::vector<uint8_t> junk : {std::vector<uint8_t>{9, 1, 0, 0, 0, 0, 0, 0, 0},              // unknown op
                                    std::vector<uint8_t>{1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},  // huge key
                                    std::vector<uint8_t>{2, 1, 0, 0, 0, 5, 0, 0, 0}}) {           // GET with a value
    auto s = net::Socket::connect(address, Deadline::after(5s), nullptr, "store");
    s.sendAll(encodeStoreHello(std::nullopt), Deadline::after(5s), nullptr);
    std::byte admitted[1];
    s.recvAll(admitted, Deadline::after(5s), nullptr);
    EXPECT_EQ(admitted[0], std::byte{1});
    s.sendAll(std::as_bytes(std::span(junk)), Deadline::after(5s), nullptr);
    std::byte b[1];
    EXPECT_THROW(s.recvAll(b, Deadline::after(5s), nullptr), Error);  // dropped by the server
  }
  TcpStore good(address, false, Deadline::after(5s), nullptr);
  good.set("k", bytes("v"));
  EXPECT_EQ(good.get("k", Deadline::after(5s), nullptr), bytes("v"));
}

// With a secret, the server serves only the clients that present it: a
// client without it or with another one is refused with a message naming
// LOOM_STORE_SECRET, and a stranger who sends a GET for the unique id's key
// straight away gets nothing but the refusal.
TEST(TcpStore, ServesOnlyClientsThatPresentTheSecret) {
  const Secret secret = Secret::random();
  TcpStoreServer server(net::SocketAddress::parse("127.0.0.1:0"), secret);
  const auto address = server.address();
  TcpStore member(address, false, Deadline::after(5s), nullptr, secret);
  member.set("loom/init/0/unique-id", bytes("the id"));
  EXPECT_EQ(member.get("loom/init/0/unique-id", Deadline::after(5s), nullptr), bytes("the id"));

  for (const std::optional<Secret>& wrong : {std::optional<Secret>{}, std::optional<Secret>{Secret::random()}}) {
    try {
      TcpStore stranger(address, false, Deadline::after(5s), nullptr, wrong);
      ADD_FAILURE() << "a client without the secret was served";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), loomInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("refused this process: it needs the job's LOOM_STORE_SECRET"),
                std::string::npos)
          << e.what();
    }
  }

  // A stranger that speaks the request protocol without a hello.
  auto raw = net::Socket::connect(address, Deadline::after(5s), nullptr, "stranger");
  const std::string key = "loom/init/0/unique-id";
  std::vector<std::byte> request{std::byte{2}};  // GET
  const auto keyBytes = static_cast<uint32_t>(key.size());
  const uint32_t valueBytes = 0;
  for (auto word : {keyBytes, valueBytes}) {
    const auto b = std::as_bytes(std::span(&word, 1));
    request.insert(request.end(), b.begin(), b.end());
  }
  const auto k = std::as_bytes(std::span(key));
  request.insert(request.end(), k.begin(), k.end());
  raw.sendAll(request, Deadline::after(5s), nullptr);
  std::vector<std::byte> answer;
  const auto deadline = Deadline::after(5s);
  try {
    while (!deadline.expired()) {
      std::byte b[64];
      const size_t n = raw.recvSome(b);
      answer.insert(answer.end(), b, b + n);
      if (n == 0) std::this_thread::sleep_for(1ms);
    }
  } catch (const Error&) {
    // closed by the server
  }
  EXPECT_EQ(answer, std::vector<std::byte>{std::byte{0}});  // the refusal, and nothing of the id
  // The member is still served.
  EXPECT_EQ(member.get("loom/init/0/unique-id", Deadline::after(5s), nullptr), bytes("the id"));
}

TEST(TcpStore, HeaderParser) {
  std::array<std::byte, kStoreHeaderBytes> raw{};
  raw[0] = std::byte{1};
  raw[1] = std::byte{3};
  raw[5] = std::byte{2};
  auto h = parseStoreRequestHeader(raw);
  EXPECT_EQ(h.op, StoreOp::Set);
  EXPECT_EQ(h.keyBytes, 3u);
  EXPECT_EQ(h.valueBytes, 2u);
  raw[1] = std::byte{0};  // empty key
  EXPECT_THROW(parseStoreRequestHeader(raw), Error);
}
