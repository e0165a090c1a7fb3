#include "tools/loom-train/plot.hpp"

#include <cstdio>

#include "tools/plot/python.hpp"

namespace loom::train::cli {
namespace {

// Reads each run's steps, one panel per run sharing the loss axis.
constexpr const char* kScript = R"(import json, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("loom-train: --plot needs matplotlib for /usr/bin/python3: apt-get install python3-matplotlib")
png, runs = sys.argv[1], sys.argv[2:]
records = []
for path in runs:
    try:
        with open(path) as f:
            records.append((path, json.load(f)))
    except (OSError, ValueError) as e:
        sys.exit(f"loom-train: --plot: cannot read {path}: {e}")
fig, axes = plt.subplots(1, len(records), figsize=(4.5 * len(records), 3.5), sharey=True, squeeze=False)
for ax, (path, r) in zip(axes[0], records):
    c = r["config"]
    ax.plot([s["step"] for s in r["steps"]], [s["loss"] for s in r["steps"]])
    ax.set_title(f"{c['model']} {c['mode']} on {c['ranks']} rank(s)\n{path}", fontsize=8)
    ax.set_xlabel("step")
    ax.grid(True, alpha=0.3)
axes[0][0].set_ylabel("loss")
fig.tight_layout()
fig.savefig(png, dpi=100)
)";

}  // namespace

int plotLoss(const std::string& png, const std::vector<std::string>& runs) {
  if (runs.empty()) {
    std::fprintf(stderr, "loom-train: --plot %s: name one or more --json records after it\n", png.c_str());
    return 2;
  }
  std::vector<std::string> args{png};
  args.insert(args.end(), runs.begin(), runs.end());
  return plot::runPython("loom-train", kScript, args);
}

}  // namespace loom::train::cli
