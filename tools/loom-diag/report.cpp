#include "tools/loom-diag/report.hpp"

#include <loom/loom.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "base/json.hpp"
#include "tools/plot/python.hpp"

namespace loom::diag {
namespace {

__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  out += line;
}

// A ranks x ranks table of one figure, "-" on the diagonal and where unmeasured.
void matrix(std::string& out, const Diagnosis& d, const char* title, double PairResult::*figure, int decimals) {
  const size_t n = d.ranks.size();
  std::vector<double> cells(n * n, 0);
  for (const auto& p : d.pairs) cells[static_cast<size_t>(p.from) * n + static_cast<size_t>(p.to)] = p.*figure;
  appendf(out, "# %s (row: from, column: to)\n#      ", title);
  for (size_t c = 0; c < n; ++c) appendf(out, " %8zu", c);
  out += "\n";
  for (size_t r = 0; r < n; ++r) {
    appendf(out, "# %4zu ", r);
    for (size_t c = 0; c < n; ++c) {
      const double v = cells[r * n + c];
      if (r == c || v == 0) appendf(out, " %8s", "-");
      else appendf(out, " %8.*f", decimals, v);
    }
    out += "\n";
  }
}

// The distinct hosts of `ranks`, in rank order.
std::vector<std::string> hostsOf(const Diagnosis& d, const std::vector<int>& ranks) {
  std::vector<std::string> hosts;
  for (int r : ranks) {
    const std::string& host = d.ranks[static_cast<size_t>(r)].host;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

}  // namespace

std::string terminalReport(const Diagnosis& d, const Options& o) {
  std::string out;
  const size_t n = d.ranks.size();
  appendf(out, "# loom-diag: %zu ranks, %zu of %zu ordered pairs in %d rounds of disjoint pairs, %.2f s; %zu B x %d one "
               "way per pair, 8 B x %d round trips\n",
          n, d.pairs.size(), n * (n - 1), d.rounds, d.seconds, o.bytes, o.iters, o.latencyIters);
  if (d.remeasured > 0) {
    appendf(out, "# %d pair(s) measured again, alone, after a slow figure (%d time%s); %d ordered pair(s) still slow\n",
            d.remeasured, d.confirmPasses, d.confirmPasses == 1 ? "" : "s", d.stillSlow);
  }
  const auto& findings = d.attribution.findings;
  if (findings.empty()) {
    out += "# findings: none\n";
  } else {
    appendf(out, "# findings: %zu\n", findings.size());
    for (const auto& f : findings) {
      std::string hosts;
      for (const auto& host : hostsOf(d, f.ranks)) hosts += (hosts.empty() ? "" : ", ") + host;
      appendf(out, "#   %-5s %s (host %s)\n", f.kind.c_str(), f.detail.c_str(), hosts.c_str());
    }
  }
  for (const auto& p : d.attribution.paths) {
    appendf(out, "# path %s: %d pairs, median %.3f GB/s, spread (MAD of ln) %.3f", p.path.c_str(), p.pairs,
            p.medianGBps, p.madLog);
    if (p.path == "socket" && d.tcp.GBps > 0) appendf(out, "; %.2f of a raw TCP stream", p.medianGBps / d.tcp.GBps);
    if (p.path == "shm" && d.memcpyGBps > 0) appendf(out, "; %.2f of memcpy", p.medianGBps / d.memcpyGBps);
    out += "\n";
  }
  for (size_t r = 0; r < d.ranks.size(); ++r) {
    appendf(out, "# rank %zu: host %s, pid %d\n", r, d.ranks[r].host.c_str(), d.ranks[r].pid);
  }
  if (!d.health.empty()) {
    appendf(out, "# collective health, busbw GB/s (memcpy on rank 0's host, one thread: %.2f GB/s)\n", d.memcpyGBps);
    appendf(out, "#   %-14s %-11s %6s %12s %10s\n", "scope", "collective", "ranks", "bytes", "busbw");
    for (const auto& h : d.health) {
      appendf(out, "#   %-14s %-11s %6d %12zu %10.3f\n", h.scope.c_str(), h.collective.c_str(), h.ranks, h.bytes,
              h.busbwGBps);
    }
  }
  if (!d.gpus.gpus.empty()) {
    appendf(out, "# GPU copies, GB/s (the first rank of each host measures the GPUs it sees)\n");
    appendf(out, "#   %-6s %-7s %14s %14s\n", "rank", "device", "host->device", "device->host");
    for (const auto& g : d.gpus.gpus) {
      appendf(out, "#   %-6d %-7d %14.2f %14.2f\n", g.node, g.device, g.hostToDeviceGBps, g.deviceToHostGBps);
    }
    for (const auto& p : d.gpus.pairs) {
      appendf(out, "#   rank %d: GPU %d -> GPU %d %.2f GB/s\n", p.node, p.from, p.to, p.GBps);
    }
  } else if (!d.gpus.none.empty()) {
    appendf(out, "# GPU copies: none (%s)\n", d.gpus.none.c_str());
  }
  if (d.tcp.to >= 0) {
    appendf(out, "# raw TCP stream, rank %d -> %d (%s -> %s), %zu B messages: %.3f GB/s\n", d.tcp.from, d.tcp.to,
            d.ranks[static_cast<size_t>(d.tcp.from)].host.c_str(), d.ranks[static_cast<size_t>(d.tcp.to)].host.c_str(),
            d.tcp.bytes, d.tcp.GBps);
  }
  matrix(out, d, "one-way bandwidth, GB/s", &PairResult::bandwidthGBps, 3);
  matrix(out, d, "both ways at once, the two directions' sum, GB/s", &PairResult::bidirectionalGBps, 3);
  matrix(out, d, "8-byte latency p50, us", &PairResult::latencyP50Us, 1);
  matrix(out, d, "8-byte latency p99, us", &PairResult::latencyP99Us, 1);
  return out;
}

std::string csvReport(const Diagnosis& d) {
  std::string out = "from,to,path,from_host,to_host,bandwidth_GBps,bidirectional_GBps,latency_p50_us,latency_p99_us,slow\n";
  for (size_t i = 0; i < d.pairs.size(); ++i) {
    const auto& p = d.pairs[i];
    appendf(out, "%d,%d,%s,%s,%s,%.6f,%.6f,%.3f,%.3f,%d\n", p.from, p.to, p.path.c_str(),
            d.ranks[static_cast<size_t>(p.from)].host.c_str(), d.ranks[static_cast<size_t>(p.to)].host.c_str(),
            p.bandwidthGBps, p.bidirectionalGBps, p.latencyP50Us, p.latencyP99Us, d.attribution.slow[i] ? 1 : 0);
  }
  return out;
}

namespace {

// Reads loom-diag's JSON; colours each pair by its bandwidth over its path's
// median; draws the node boundaries and crosses the slow pairs.
constexpr const char* kHeatmap = R"(import json, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("loom-diag: --heatmap needs matplotlib for /usr/bin/python3: apt-get install python3-matplotlib")
src, png = sys.argv[1], sys.argv[2]
html = sys.argv[3] if len(sys.argv) > 3 else None
with open(src) as f:
    d = json.load(f)
n = len(d["ranks"])
median = {p["path"]: p["median_GBps"] for p in d["paths"]}
grid = [[float("nan")] * n for _ in range(n)]
cells = 0
for p in d["pairs"]:
    m = median.get(p["path"]) or 0
    grid[p["from"]][p["to"]] = p["bandwidth_GBps"] / m if m > 0 else float("nan")
    cells += 1
fig, ax = plt.subplots(figsize=(2.5 + 0.45 * n, 2 + 0.4 * n))
image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1.5)
fig.colorbar(image, ax=ax, label="bandwidth / median of its path")
nodes = [r["node"] for r in d["ranks"]]
for r in range(1, n):
    if nodes[r] != nodes[r - 1]:
        ax.axhline(r - 0.5, color="black", linewidth=1.5)
        ax.axvline(r - 0.5, color="black", linewidth=1.5)
for p in d["pairs"]:
    if p["slow"]:
        ax.text(p["to"], p["from"], "x", ha="center", va="center", color="black", fontsize=12, fontweight="bold")
ax.set_xlabel("to rank")
ax.set_ylabel("from rank")
ax.set_xticks(range(n))
ax.set_yticks(range(n))
kinds = ", ".join(f["kind"] + " " + "-".join(map(str, f["ranks"])) for f in d["findings"]) or "no findings"
ax.set_title(f"loom-diag, {n} ranks: {kinds}", fontsize=9)
fig.tight_layout()
fig.savefig(png, dpi=100)
print(f"# heatmap: {n} x {n} ranks, {cells} pairs, written to {png}")
if html:
    import base64, html as escape
    with open(png, "rb") as f:
        picture = base64.b64encode(f.read()).decode()
    def table(rows, head):
        out = "<table><tr>" + "".join(f"<th>{escape.escape(str(h))}</th>" for h in head) + "</tr>"
        for r in rows:
            out += "<tr>" + "".join(f"<td>{escape.escape(str(v))}</td>" for v in r) + "</tr>"
        return out + "</table>"
    findings = [(f["kind"], " ".join(map(str, f["ranks"])), ", ".join(f["hosts"]), f["detail"]) for f in d["findings"]]
    pairs = [(p["from"], p["to"], p["path"], f'{p["bandwidth_GBps"]:.3f}', f'{p["bidirectional_GBps"]:.3f}',
              f'{p["latency_p50_us"]:.1f}', f'{p["latency_p99_us"]:.1f}', "slow" if p["slow"] else "")
             for p in d["pairs"]]
    health = [(c["scope"], c["collective"], c["ranks"], c["bytes"], f'{c["busbw_GBps"]:.3f}') for c in d["collectives"]]
    with open(html, "w") as f:
        f.write("<!doctype html><html><head><meta charset='utf-8'><title>loom-diag</title><style>"
                "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}"
                "td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}</style></head><body>")
        f.write(f"<h1>loom-diag: {n} ranks</h1>")
        f.write("<h2>Findings</h2>" + (table(findings, ["kind", "ranks", "hosts", "detail"]) if findings else "<p>none</p>"))
        f.write(f"<img alt='heatmap' src='data:image/png;base64,{picture}'>")
        f.write("<h2>Pairs</h2>" + table(pairs, ["from", "to", "path", "GB/s one way", "GB/s both ways", "p50 us", "p99 us", ""]))
        f.write("<h2>Collective health</h2>" + table(health, ["scope", "collective", "ranks", "bytes", "busbw GB/s"]))
        f.write(f"<p>memcpy on rank 0's host: {d['memcpy_GBps']:.2f} GB/s; loom {d['loom']['major']}.{d['loom']['minor']}.{d['loom']['patch']}</p>")
        f.write("</body></html>\n")
    print(f"# page written to {html}")
)";

}  // namespace

int heatmap(const std::string& json, const std::string& png, const std::string& html) {
  std::vector<std::string> args{json, png};
  if (!html.empty()) args.push_back(html);
  return plot::runPython("loom-diag", kHeatmap, args);
}

std::string jsonReport(const Diagnosis& d, const Options& o) {
  JsonWriter j;
  j.beginObject();
  j.field("schema", "loom-diag").field("version", 2);
  j.key("loom").beginObject().field("major", LOOM_MAJOR).field("minor", LOOM_MINOR).field("patch", LOOM_PATCH).endObject();
  j.key("config").beginObject();
  j.field("ranks", static_cast<int>(d.ranks.size())).field("message_bytes", static_cast<long long>(o.bytes));
  j.field("iters", o.iters).field("warmup", o.warmup).field("latency_iters", o.latencyIters);
  j.field("rounds", d.rounds).field("remeasured_pairs", d.remeasured).field("confirm_passes", d.confirmPasses);
  j.field("seconds", d.seconds);
  j.endObject();
  j.key("thresholds").beginObject();
  j.field("mad_k", o.thresholds.madK).field("min_drop", o.thresholds.minDrop);
  j.field("expect_pair_GBps", o.expect.pairGBps).field("expect_busbw_GBps", o.expect.busbwGBps);
  j.field("expect_latency_us", o.expect.latencyUs).field("file", o.thresholdsFile).endObject();
  j.key("ranks").beginArray();
  for (size_t r = 0; r < d.ranks.size(); ++r) {
    j.beginObject().field("rank", static_cast<int>(r)).field("host", d.ranks[r].host).field("pid", d.ranks[r].pid);
    j.field("node", d.ranks[r].hostKey).endObject();
  }
  j.endArray();
  j.key("paths").beginArray();
  for (const auto& p : d.attribution.paths) {
    j.beginObject().field("path", p.path).field("pairs", p.pairs).field("median_GBps", p.medianGBps);
    j.field("mad_ln", p.madLog).endObject();
  }
  j.endArray();
  j.key("pairs").beginArray();
  for (size_t i = 0; i < d.pairs.size(); ++i) {
    const auto& p = d.pairs[i];
    j.beginObject().field("from", p.from).field("to", p.to).field("path", p.path);
    j.field("bandwidth_GBps", p.bandwidthGBps).field("bidirectional_GBps", p.bidirectionalGBps);
    j.field("latency_p50_us", p.latencyP50Us);
    j.field("latency_p99_us", p.latencyP99Us).field("slow", static_cast<bool>(d.attribution.slow[i])).endObject();
  }
  j.endArray();
  j.field("memcpy_GBps", d.memcpyGBps);
  j.key("tcp_stream");
  if (d.tcp.to >= 0) {
    j.beginObject().field("from", d.tcp.from).field("to", d.tcp.to).field("bytes", static_cast<long long>(d.tcp.bytes));
    j.field("GBps", d.tcp.GBps).endObject();
  } else {
    j.null();
  }
  j.key("gpus").beginArray();
  for (const auto& g : d.gpus.gpus) {
    j.beginObject().field("rank", g.node).field("host", d.ranks[static_cast<size_t>(g.node)].host);
    j.field("device", g.device).field("host_to_device_GBps", g.hostToDeviceGBps);
    j.field("device_to_host_GBps", g.deviceToHostGBps).endObject();
  }
  j.endArray();
  j.key("gpu_pairs").beginArray();
  for (const auto& p : d.gpus.pairs) {
    j.beginObject().field("rank", p.node).field("from", p.from).field("to", p.to).field("GBps", p.GBps).endObject();
  }
  j.endArray();
  j.key("collectives").beginArray();
  for (const auto& h : d.health) {
    j.beginObject().field("scope", h.scope).field("collective", h.collective).field("ranks", h.ranks);
    j.field("bytes", static_cast<long long>(h.bytes)).field("busbw_GBps", h.busbwGBps).endObject();
  }
  j.endArray();
  j.key("findings").beginArray();
  for (const auto& f : d.attribution.findings) {
    j.beginObject().field("kind", f.kind).field("metric", metricName(f.metric)).field("unit", metricUnit(f.metric));
    j.key("ranks").beginArray(JsonWriter::Layout::OneLine);
    for (int r : f.ranks) j.value(r);
    j.endArray();
    j.key("hosts").beginArray(JsonWriter::Layout::OneLine);
    for (const auto& host : hostsOf(d, f.ranks)) j.value(host);
    j.endArray();
    j.field("measured", f.measured).field("against", f.against).field("detail", f.detail);
    j.endObject();
  }
  j.endArray();
  j.endObject();
  return j.str();
}

}  // namespace loom::diag
