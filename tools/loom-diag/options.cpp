#include "tools/loom-diag/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/flags/flags.hpp"

namespace loom::diag {
namespace {

[[noreturn]] void usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: loom-diag [-N ranks] [--size BYTES] [--iters N] [--warmup N] [--lat-iters N] [--max-pairs N]\n"
               "                 [--health-size BYTES] [--gpu-size BYTES]\n"
               "                 [--threshold K] [--min-drop F] [--expect-pair-bw GBPS] [--expect-busbw GBPS]\n"
               "                 [--expect-latency US] [--thresholds FILE] [--json FILE] [--csv FILE]\n"
               "                 [--heatmap FILE.png] [--html FILE]\n"
               "Measures every ordered pair of ranks (one-way bandwidth, 8-byte latency), in rounds of\n"
               "disjoint pairs, and names the slow links, ranks and nodes. Run it under loomrun, torchrun,\n"
               "Slurm or mpirun like loom-perf, or by hand for -N local ranks.\n"
               "  -N ranks            local ranks when started by hand (default 4)\n"
               "  --size BYTES        each bandwidth message (default 8M; K, M, G suffixes)\n"
               "  --iters N           timed messages per direction (default 5)\n"
               "  --warmup N          untimed messages first (default 1)\n"
               "  --lat-iters N       8-byte round trips per pair (default 200)\n"
               "  --max-pairs N       measure every pair up to N pairs (default 2016, 64 ranks); past it, a\n"
               "                      schedule linear in the ranks (ring shifts 1, 2, 4, ... and two more)\n"
               "  --health-size BYTES all-reduce and all-gather busbw of the job, each node and across\n"
               "                      nodes, at 1/16 of it and at it (default 16M; 0: skip)\n"
               "  --gpu-size BYTES    host<->device and device<->device copies of every GPU the first rank of\n"
               "                      each host sees (default 64M; 0: skip; none without a GPU)\n"
               "  --threshold K       slow: more than K scaled MADs below its path's median (default 4)\n"
               "  --min-drop F        ... and more than F of the median below it (default 0.3)\n"
               "  --expect-pair-bw X  health check: every pair moves at least X GB/s one way\n"
               "  --expect-busbw X    health check: every collective scope reaches X GB/s busbw at --health-size\n"
               "  --expect-latency X  health check: every pair's 8-byte p50 latency is at most X us\n"
               "  --thresholds FILE   the settings above for one machine type, one 'name value' per line\n"
               "                      (expect-pair-bw, expect-busbw, expect-latency, threshold, min-drop)\n"
               "  --json FILE         every measurement, the medians and the findings (schema: docs/loom-diag.schema.json)\n"
               "  --csv FILE          one line per ordered pair\n"
               "  --heatmap FILE.png  ranks x ranks, bandwidth over its path's median (matplotlib)\n"
               "  --html FILE         one self-contained page: the heatmap, the findings, the tables\n"
               "Exit status: 0 nothing found, 1 findings, 2 bad flags or an output not written, 3 a rank failed\n"
               "or vanished.\n");
  std::exit(status);
}

// The settings a thresholds file may hold too; false if `flag` is none of them.
bool setThreshold(Options& o, const std::string& flag, const char* v) {
  if (flag == "--threshold") o.thresholds.madK = flags::parseDouble("--threshold", v, 0, 1000);
  else if (flag == "--min-drop") o.thresholds.minDrop = flags::parseDouble("--min-drop", v, 0, 1);
  else if (flag == "--expect-pair-bw") o.expect.pairGBps = flags::parseDouble("--expect-pair-bw", v, 0, 1e6);
  else if (flag == "--expect-busbw") o.expect.busbwGBps = flags::parseDouble("--expect-busbw", v, 0, 1e6);
  else if (flag == "--expect-latency") o.expect.latencyUs = flags::parseDouble("--expect-latency", v, 0, 1e9);
  else return false;
  return true;
}

}  // namespace

void readThresholdsFile(const std::string& path, Options& o) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "loom-diag: cannot read the thresholds file %s\n", path.c_str());
    std::exit(2);
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    for (char& c : line) {
      if (c == '=') c = ' ';
    }
    std::istringstream words(line);
    std::string name, value, extra;
    if (!(words >> name)) continue;  // blank or a comment
    if (!(words >> value) || (words >> extra)) {
      std::fprintf(stderr, "loom-diag: %s:%d: expected 'name value', got '%s'\n", path.c_str(), number, line.c_str());
      std::exit(2);
    }
    if (!setThreshold(o, "--" + name, value.c_str())) {
      std::fprintf(stderr,
                   "loom-diag: %s:%d: unknown setting '%s' (expect-pair-bw, expect-busbw, expect-latency, threshold, "
                   "min-drop)\n",
                   path.c_str(), number, name.c_str());
      std::exit(2);
    }
  }
}

Options parseOptions(int argc, char** argv) {
  flags::setTool("loom-diag");
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage(0);
    if (i + 1 >= argc) {
      std::fprintf(stderr, "loom-diag: %s needs a value\n", a.c_str());
      usage(2);
    }
    const char* v = argv[++i];
    if (a == "-N" || a == "--np") o.np = flags::parseInt("-N", v, 1, 4096);
    else if (a == "--size") o.bytes = flags::parseBytes("--size", v);
    else if (a == "--iters") o.iters = flags::parseInt("--iters", v, 1, 100000);
    else if (a == "--warmup") o.warmup = flags::parseInt("--warmup", v, 0, 100000);
    else if (a == "--max-pairs") o.maxPairs = flags::parseInt("--max-pairs", v, 1);
    else if (a == "--health-size") o.healthBytes = flags::parseBytes("--health-size", v);
    else if (a == "--gpu-size") o.gpuBytes = flags::parseBytes("--gpu-size", v);
    else if (a == "--lat-iters") o.latencyIters = flags::parseInt("--lat-iters", v, 1, 10000000);
    else if (setThreshold(o, a, v)) continue;
    else if (a == "--thresholds") readThresholdsFile(o.thresholdsFile = v, o);
    else if (a == "--json") o.jsonFile = v;
    else if (a == "--csv") o.csvFile = v;
    else if (a == "--heatmap") o.heatmapFile = v;
    else if (a == "--html") o.htmlFile = v;
    else {
      std::fprintf(stderr, "loom-diag: unknown flag '%s'\n", a.c_str());
      usage(2);
    }
  }
  if (o.bytes == 0) flags::bad("--size", "0");
  return o;
}

}  // namespace loom::diag
