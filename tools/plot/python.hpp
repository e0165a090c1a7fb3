// Pictures for the tools: a matplotlib script run by Debian's
// /usr/bin/python3 (python3-matplotlib, which scripts/setup installs). The
// script travels inside the tool and reaches Python on its standard input.
#pragma once

#include <string>
#include <vector>

namespace loom::plot {

// Runs `script` with `args` as sys.argv[1:]. 0 when it exits 0; else 2,
// after saying why on stderr under `tool`'s name.
int runPython(const char* tool, const char* script, const std::vector<std::string>& args);

}  // namespace loom::plot
