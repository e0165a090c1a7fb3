// The TCP store's server, the real one over loopback. A client sends any
// bytes (after a valid hello, or not) and leaves; then a well-behaved client must still be served: its SET
// is answered, and its GET returns what it set. The server drops a
// malformed client (lengths are checked before anything is read) and
// carries on.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/net/address.hpp"
#include "comm/store/tcp_store.hpp"

namespace {

loom::TcpStoreServer& server() {
  static auto* s = new loom::TcpStoreServer(loom::net::SocketAddress::parse("127.0.0.1:0"));  // lives for the run
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto deadline = loom::Deadline::after(std::chrono::seconds(10));
  {
    auto stranger = loom::net::Socket::connect(server().address(), deadline, nullptr, "stranger");
    try {
      // An odd first byte puts a valid hello first, so the request parser
      // behind it is reached; an even one fuzzes the hello itself.
      if (size > 0 && (data[0] & 1) != 0) stranger.sendAll(loom::encodeStoreHello(std::nullopt), deadline, nullptr);
      stranger.sendAll(std::as_bytes(std::span(data, size)), deadline, nullptr);
    } catch (const loom::Error&) {
      // dropped part-way: the server refused what it had read
    }
  }

  static uint64_t round = 0;
  const std::string key = "check-" + std::to_string(++round);
  const std::vector<std::byte> value(round % 64, std::byte{0x5a});
  loom::TcpStore client(server().address(), false, deadline, nullptr);
  client.set(key, value);
  if (client.get(key, deadline, nullptr) != value) std::abort();
  client.erase(key);
  return 0;
}
