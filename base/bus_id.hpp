// PCI bus ids, the one name a GPU or NIC has in every tool and process:
// hwloc's, NVML's and CUDA's spellings differ ("00000000:1A:00.0",
// "0000:1a:00.0"), so Loom compares them in hwloc's.
#pragma once

#include <string>
#include <string_view>

namespace loom {

// `busId` as hwloc spells it ("0000:1a:00.0": a 4-digit domain, lower
// case); empty if malformed.
std::string normalizeBusId(std::string_view busId);

}  // namespace loom
