#include "tools/loom-diag/tcp_stream.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "base/deadline.hpp"
#include "base/env.hpp"
#include "base/error.hpp"
#include "base/net/interfaces.hpp"
#include "base/net/socket.hpp"
#include "tools/loom-diag/measure.hpp"

namespace loom::diag {
namespace {

constexpr size_t kAddressBytes = 128;
constexpr auto kWithin = std::chrono::seconds(60);

void bigBuffers(const net::Socket& s) {
  const int bytes = 4 << 20;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(s.fd(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace

double rawTcpGBps(loomComm_t comm, int rank, int from, int to, size_t bytes, int iters) {
  try {
    std::vector<std::byte> buffer(bytes, std::byte{1});
    std::array<char, kAddressBytes> address{};
    if (rank == to) {
      const auto interfaces = net::selectInterfaces(env::get("LOOM_SOCKET_IFNAME"), net::listInterfaces());
      net::Socket listener = net::Socket::listen(interfaces.front().address, "raw TCP listener");
      bigBuffers(listener);
      const std::string text = listener.localAddress().toString();
      std::strncpy(address.data(), text.c_str(), kAddressBytes - 1);
      must(loomSend(address.data(), kAddressBytes, loomInt8, from, comm, nullptr), "loomSend", comm);
      net::Socket stream = listener.accept(Deadline::after(kWithin), nullptr);
      stream.recvAll(buffer, Deadline::after(kWithin), nullptr);  // untimed: slow start, buffers
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) stream.recvAll(buffer, Deadline::after(kWithin), nullptr);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return static_cast<double>(bytes) * iters / seconds / 1e9;
    }
    must(loomRecv(address.data(), kAddressBytes, loomInt8, to, comm, nullptr), "loomRecv", comm);
    address.back() = '\0';
    net::Socket stream = net::Socket::connect(net::SocketAddress::parse(address.data()), Deadline::after(kWithin),
                                              nullptr, "rank " + std::to_string(to));
    bigBuffers(stream);
    for (int i = 0; i <= iters; ++i) stream.sendAll(buffer, Deadline::after(kWithin), nullptr);
    return 0;
  } catch (const Error& e) {
    throw Failure{std::string("the raw TCP stream from rank ") + std::to_string(from) + " to rank " +
                  std::to_string(to) + ": " + e.what()};
  }
}

}  // namespace loom::diag
