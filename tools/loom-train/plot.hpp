// loom-train --plot FILE.png RUN.json...: loss against step for one or more
// runs' --json records, side by side, drawn by matplotlib under Debian's
// /usr/bin/python3 (python3-matplotlib).
#pragma once

#include <string>
#include <vector>

namespace loom::train::cli {

// Returns the exit status: 0 when FILE.png was written; 2 naming what is
// missing (no runs, a run that cannot be read, no matplotlib).
int plotLoss(const std::string& png, const std::vector<std::string>& runs);

}  // namespace loom::train::cli
