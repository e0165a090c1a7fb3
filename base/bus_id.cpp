#include "base/bus_id.hpp"

#include <cstdio>

namespace loom {

std::string normalizeBusId(std::string_view busId) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  int used = 0;
  const std::string text(busId);
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &device, &function, &used) != 4 ||
      static_cast<size_t>(used) != text.size() || domain > 0xffff || bus > 0xff || device > 0x1f || function > 7) {
    return {};
  }
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

}  // namespace loom
