#include "base/net/interfaces.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>

#include "base/error.hpp"

namespace loom::net {

std::vector<Interface> listInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throwSystemError("getifaddrs", errno);
  std::vector<Interface> out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      const auto* a6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id to reach
    }
    socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    out.push_back({it->ifa_name, SocketAddress(it->ifa_addr, len), (it->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  // IPv4 first, as NCCL does: the common case in clusters.
  std::stable_sort(out.begin(), out.end(), [](const Interface& a, const Interface& b) {
    return a.address.family() == AF_INET && b.address.family() != AF_INET;
  });
  return out;
}

InterfaceFilter::InterfaceFilter(std::string_view spec) {
  if (!spec.empty() && spec.front() == '^') { exclude_ = true; spec.remove_prefix(1); }
  if (!spec.empty() && spec.front() == '=') { exact_ = true; spec.remove_prefix(1); }
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view name = spec.substr(0, comma);
    if (!name.empty()) names_.emplace_back(name);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
}

bool InterfaceFilter::matches(std::string_view name) const {
  bool listed = false;
  for (const auto& n : names_) {
    if (exact_ ? name == n : name.starts_with(n)) { listed = true; break; }
  }
  return exclude_ ? !listed : listed;
}

std::vector<Interface> selectInterfaces(std::string_view spec, const std::vector<Interface>& available) {
  std::vector<Interface> chosen;
  if (!spec.empty()) {
    InterfaceFilter filter(spec);
    for (const auto& i : available) {
      if (filter.matches(i.name)) chosen.push_back(i);
    }
    if (chosen.empty()) {
      std::string names;
      for (const auto& i : available) names += (names.empty() ? "" : ", ") + i.name;
      throw Error(loomInvalidArgument, "LOOM_SOCKET_IFNAME='" + std::string(spec) +
                                           "' matches no usable interface (available: " + names + ")");
    }
    return chosen;
  }
  InterfaceFilter defaults("^docker,lo");
  for (const auto& i : available) {
    if (!i.loopback && defaults.matches(i.name)) chosen.push_back(i);
  }
  if (chosen.empty()) {
    for (const auto& i : available) {
      if (i.loopback) chosen.push_back(i);
    }
  }
  if (chosen.empty()) throw Error(loomSystemError, "no network interface is up, not even loopback");
  return chosen;
}

const Interface& preferNamed(const std::vector<Interface>& chosen, std::span<const std::string> preferred) {
  for (const auto& i : chosen) {
    if (std::find(preferred.begin(), preferred.end(), i.name) != preferred.end()) return i;
  }
  return chosen.front();
}

}  // namespace loom::net
