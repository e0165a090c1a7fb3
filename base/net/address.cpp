#include "base/net/address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstring>

#include "base/error.hpp"

namespace loom::net {

SocketAddress::SocketAddress(const sockaddr* addr, socklen_t len) {
  if (len > sizeof storage_) throw Error(loomInternalError, "socket address too long");
  std::memcpy(&storage_, addr, len);
  len_ = len;
}

SocketAddress SocketAddress::resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw Error(loomInvalidArgument, "cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  }
  SocketAddress out(result->ai_addr, result->ai_addrlen);
  ::freeaddrinfo(result);
  out.setPort(port);
  return out;
}

SocketAddress SocketAddress::parse(std::string_view text) {
  std::string host;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw Error(loomInvalidArgument, "address '" + std::string(text) + "' is not [ipv6]:port");
    }
    host = std::string(text.substr(1, close - 1));
    portText = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      throw Error(loomInvalidArgument, "address '" + std::string(text) + "' is not host:port");
    }
    host = std::string(text.substr(0, colon));
    portText = text.substr(colon + 1);
  }
  unsigned long port = 0;
  for (char c : portText) {
    if (c < '0' || c > '9' || port > 65535) { port = 70000; break; }
    port = port * 10 + static_cast<unsigned long>(c - '0');
  }
  if (portText.empty() || port > 65535 || host.empty()) {
    throw Error(loomInvalidArgument, "address '" + std::string(text) + "' has no valid host and port");
  }
  return resolve(host, static_cast<uint16_t>(port));
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "(no address)";
}

}  // namespace loom::net
