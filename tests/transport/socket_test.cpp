// transport/socket: interface selection, addresses, and waits that end.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.hpp"
#include "base/net/interfaces.hpp"
#include "base/net/socket.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

std::vector<net::Interface> fakeInterfaces() {
  auto addr = net::SocketAddress::parse("127.0.0.1:0");
  return {{"lo", addr, true}, {"eth0", addr, false}, {"eth1", addr, false}, {"docker0", addr, false}, {"ib0", addr, false}};
}

std::vector<std::string> names(const std::vector<net::Interface>& v) {
  std::vector<std::string> out;
  for (const auto& i : v) out.push_back(i.name);
  return out;
}

// A connected pair over loopback.
std::pair<net::Socket, net::Socket> connectedPair() {
  auto listener = net::Socket::listen(net::SocketAddress::parse("127.0.0.1:0"));
  auto client = net::Socket::connect(listener.localAddress(), Deadline::after(5s), nullptr, "server");
  auto server = listener.accept(Deadline::after(5s), nullptr);
  return {std::move(client), std::move(server)};
}

}  // namespace

TEST(Interfaces, DefaultSkipsLoopbackAndDocker) {
  EXPECT_EQ(names(net::selectInterfaces("", fakeInterfaces())), (std::vector<std::string>{"eth0", "eth1", "ib0"}));
}

TEST(Interfaces, PrefixExactAndExclude) {
  EXPECT_EQ(names(net::selectInterfaces("eth", fakeInterfaces())), (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(names(net::selectInterfaces("=eth1", fakeInterfaces())), (std::vector<std::string>{"eth1"}));
  EXPECT_EQ(names(net::selectInterfaces("^eth,docker", fakeInterfaces())), (std::vector<std::string>{"lo", "ib0"}));
  EXPECT_EQ(names(net::selectInterfaces("ib,lo", fakeInterfaces())), (std::vector<std::string>{"lo", "ib0"}));
}

TEST(Interfaces, NoMatchIsAClearError) {
  try {
    net::selectInterfaces("enp9", fakeInterfaces());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    std::string m = e.what();
    EXPECT_NE(m.find("LOOM_SOCKET_IFNAME='enp9'"), std::string::npos) << m;
    EXPECT_NE(m.find("eth0"), std::string::npos) << m;
  }
}

// The topology's NIC for a rank (its netdevs, e.g. {"mlx5_1", "ib0"}) wins
// among the selected interfaces; a NIC without one of them changes nothing.
TEST(Interfaces, TheRanksNicIsPreferredAmongTheSelected) {
  const auto chosen = net::selectInterfaces("", fakeInterfaces());
  const std::vector<std::string> ib{"mlx5_1", "ib0"};
  EXPECT_EQ(net::preferNamed(chosen, ib).name, "ib0");
  const std::vector<std::string> none{"mlx5_0", "ens9"};
  EXPECT_EQ(net::preferNamed(chosen, none).name, "eth0");
  EXPECT_EQ(net::preferNamed(chosen, {}).name, "eth0");
  // LOOM_SOCKET_IFNAME decides first: an excluded interface is not brought back.
  EXPECT_EQ(net::preferNamed(net::selectInterfaces("eth", fakeInterfaces()), ib).name, "eth0");
}

TEST(Interfaces, OnlyLoopbackFallsBackToIt) {
  auto lo = fakeInterfaces();
  lo.resize(1);
  EXPECT_EQ(names(net::selectInterfaces("", lo)), (std::vector<std::string>{"lo"}));
}

TEST(Address, ParsesV4V6AndRejectsNonsense) {
  EXPECT_EQ(net::SocketAddress::parse("127.0.0.1:80").toString(), "127.0.0.1:80");
  EXPECT_EQ(net::SocketAddress::parse("[::1]:8080").toString(), "[::1]:8080");
  EXPECT_THROW(net::SocketAddress::parse("127.0.0.1"), Error);
  EXPECT_THROW(net::SocketAddress::parse("127.0.0.1:99999"), Error);
  EXPECT_THROW(net::SocketAddress::parse(":80"), Error);
  EXPECT_THROW(net::SocketAddress::parse("[::1:80"), Error);
}

TEST(Socket, ExchangeOfLargeBlocksInBothDirectionsDoesNotDeadlock) {
  auto [a, b] = connectedPair();
  const size_t n = 32u << 20;  // far beyond the kernel buffers
  std::vector<std::byte> outA(n, std::byte{1}), outB(n, std::byte{2}), inA(n), inB(n);
  std::thread t([&, &b = b] { net::Socket::exchange(b, outB, b, inB, Deadline::after(30s), nullptr); });
  net::Socket::exchange(a, outA, a, inA, Deadline::after(30s), nullptr);
  t.join();
  EXPECT_EQ(inA, outB);
  EXPECT_EQ(inB, outA);
}

TEST(Socket, RecvTimesOutAtTheDeadline) {
  auto [a, b] = connectedPair();
  std::byte buf[8];
  auto t0 = std::chrono::steady_clock::now();
  try {
    a.recvAll(buf, Deadline::after(200ms), nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomTimeout);
  }
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 2s);
}

TEST(Socket, CancellationUnblocksAWait) {
  auto [a, b] = connectedPair();
  Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cancel.cancel();
  });
  std::byte buf[8];
  auto t0 = std::chrono::steady_clock::now();
  try {
    a.recvAll(buf, Deadline::after(60s), &cancel);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("abort"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // far below the 60 s deadline
  canceller.join();
}

TEST(Socket, PeerCloseIsRemoteErrorNamingThePeer) {
  auto [a, b] = connectedPair();
  a.setLabel("rank 5");
  b.close();
  std::byte buf[8];
  try {
    a.recvAll(buf, Deadline::after(5s), nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomRemoteError);
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos);
  }
}

TEST(Socket, ConnectToNobodyTimesOut) {
  auto listener = net::Socket::listen(net::SocketAddress::parse("127.0.0.1:0"));
  auto address = listener.localAddress();
  listener.close();  // now refused
  try {
    net::Socket::connect(address, Deadline::after(300ms), nullptr, "ghost");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomTimeout);
    EXPECT_NE(std::string(e.what()).find("ghost"), std::string::npos);
  }
}
