// Which network interface Loom listens on. LOOM_SOCKET_IFNAME follows NCCL's
// NCCL_SOCKET_IFNAME grammar: comma-separated name prefixes, "=" in front for
// exact names, "^" in front to exclude the listed ones.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/net/address.hpp"

namespace loom::net {

struct Interface {
  std::string name;
  SocketAddress address;  // port 0
  bool loopback = false;
};

// Every up interface with an IPv4 or IPv6 address (IPv6 link-local skipped).
std::vector<Interface> listInterfaces();

class InterfaceFilter {
 public:
  explicit InterfaceFilter(std::string_view spec);
  bool matches(std::string_view name) const;

 private:
  std::vector<std::string> names_;
  bool exclude_ = false;
  bool exact_ = false;
};

// The interfaces to use, best first. With an empty spec: everything but lo
// and docker*, else lo. With a spec that matches nothing: loomInvalidArgument
// naming the spec and the interfaces there are.
std::vector<Interface> selectInterfaces(std::string_view spec, const std::vector<Interface>& available);

// The first of `chosen` (selectInterfaces' order) whose name is in
// `preferred` (the netdevs of the NIC the topology gave this rank), else the
// first of `chosen`.
const Interface& preferNamed(const std::vector<Interface>& chosen, std::span<const std::string> preferred);

}  // namespace loom::net
