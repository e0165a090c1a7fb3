// An IPv4 or IPv6 socket address as a value type, with "host:port" /
// "[v6]:port" text forms for ids, logs and LOOM_STORE_ADDR.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::net {

class SocketAddress {
 public:
  SocketAddress() = default;
  SocketAddress(const sockaddr* addr, socklen_t len);

  // Numeric address or host name, resolved now; loomInvalidArgument if not.
  static SocketAddress parse(std::string_view hostPort);
  static SocketAddress resolve(const std::string& host, uint16_t port);

  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool valid() const { return len_ != 0; }

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return len_; }
  std::string toString() const;

 private:
  sockaddr_storage storage_{};
  socklen_t len_ = 0;
};

}  // namespace loom::net
