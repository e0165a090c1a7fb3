// Discovery: hwloc (with I/O: PCI devices and bridges, network and
// OpenFabrics OS devices) turned into a System. The only file that sees hwloc.
#pragma once

#include <string>

#include "topology/system.hpp"

namespace loom::topo {

// This machine when `xmlFile` is empty, else the hwloc v2.0 XML in that file
// (`what` names where the path came from in errors, e.g. "LOOM_TOPO_FILE").
// A missing or malformed file is loomInvalidArgument naming `what`.
System discover(const std::string& xmlFile, const std::string& what = "topology file");

}  // namespace loom::topo
