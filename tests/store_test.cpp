// Stores: memory, file and TCP behave alike; the TCP server survives bad clients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "comm/base/error.hpp"
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
    s.sendAll(std::as_bytes(std::span(junk)), Deadline::after(5s), nullptr);
    std::byte b[1];
    EXPECT_THROW(s.recvAll(b, Deadline::after(5s), nullptr), Error);  // dropped by the server
  }
  TcpStore good(address, false, Deadline::after(5s), nullptr);
  good.set("k", bytes("v"));
  EXPECT_EQ(good.get("k", Deadline::after(5s), nullptr), bytes("v"));
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
