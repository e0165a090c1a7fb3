#include "tools/loom-perf/report.hpp"

#include <cstdio>
#include <fstream>
#include <string>

#include "base/json.hpp"

namespace loom::perf {
namespace {

using check::Coll;

void writeFile(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) std::fprintf(stderr, "loom-perf: %s: cannot write '%s'\n", flag, path.c_str());
}

// A time in microseconds as nccl-tests prints it: two decimals where they
// fit the column, fewer where they do not (sub-microsecond calls differ in
// the second).
std::string timeField(double us) {
  char field[32];
  if (std::snprintf(field, sizeof field, "%8.2f", us) <= 8) return field;
  if (std::snprintf(field, sizeof field, "%8.1f", us) <= 8) return field;
  if (std::snprintf(field, sizeof field, "%8.0f", us) <= 8) return field;
  std::snprintf(field, sizeof field, "%8.1e", us);
  return field;
}

}  // namespace

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AlltoAll: case Coll::Gather: case Coll::Scatter:
      return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

Report::Report(const Options& o, int nranks, std::vector<std::string> ranks)
    : o_(o), nranks_(nranks), ranks_(std::move(ranks)) {}

double Report::algbw(const Row& row, const Timing& t) const {
  return t.us > 0 ? static_cast<double>(row.bytes) / t.us / 1e3 : 0.0;
}

double Report::busbw(const Row& row, const Timing& t) const { return algbw(row, t) * busFactor(o_.coll, nranks_); }

void Report::header() const {
  std::printf("# loom-perf %d.%d.%d: %s, %d ranks, %d iterations, %d warm-up, check %d, time: %s over ranks, "
              "buffers from %s%s%s\n",
              LOOM_MAJOR, LOOM_MINOR, LOOM_PATCH, o_.collective.c_str(), nranks_, o_.iters, o_.warmup, o_.check,
              aggregateName(o_.aggregate), bufferSource(o_),
              o_.algo.empty() ? "" : ", LOOM_ALGO=", o_.algo.c_str());
  for (size_t r = 0; r < ranks_.size(); ++r) std::printf("#  rank %2zu  %s\n", r, ranks_[r].c_str());
  std::fflush(stdout);
}

void Report::begin() const {
  std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "", "", "", "", "", "out-of-place", "", "",
              "", "in-place", "", "", "");
  std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void Report::add(const Row& row) {
  rows_.push_back(row);
  std::printf(" %11zu %12zu %8s %9s %5d  %8s %7.2f %7.2f %6.0f", row.bytes, row.count, row.type.c_str(),
              row.redop.c_str(), row.root, timeField(row.out.us).c_str(), algbw(row, row.out), busbw(row, row.out),
              row.out.wrong);
  if (row.in) {
    std::printf("  %8s %7.2f %7.2f %6.0f\n", timeField(row.in->us).c_str(), algbw(row, *row.in), busbw(row, *row.in),
                row.in->wrong);
  } else {
    std::printf("  %8s %7s %7s %6s\n", "n/a", "n/a", "n/a", "n/a");
  }
  if (o_.perIteration) {
    auto stats = [](const char* label, const Timing& t) {
      std::printf("#%11s %s: min %.2f  p50 %.2f  p99 %.2f us  cv %.1f%%\n", "", label, t.minUs, t.p50Us, t.p99Us,
                  100 * t.cv);
    };
    stats("out-of-place iterations", row.out);
    if (row.in) stats("in-place iterations", *row.in);
  }
  std::fflush(stdout);
}

double Report::finish() const {
  double wrong = 0, bus = 0;
  for (const Row& row : rows_) {
    wrong += row.out.wrong + (row.in ? row.in->wrong : 0);
    bus += row.in ? (busbw(row, row.out) + busbw(row, *row.in)) / 2 : busbw(row, row.out);
  }
  std::printf("# Out of bounds values : %.0f %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
  std::printf("# Avg bus bandwidth    : %.4f\n", rows_.empty() ? 0.0 : bus / static_cast<double>(rows_.size()));
  std::fflush(stdout);
  if (!o_.jsonFile.empty()) writeJson(o_.jsonFile);
  if (!o_.csvFile.empty()) writeCsv(o_.csvFile);
  return wrong;
}

void Report::writeJson(const std::string& path) const {
  JsonWriter json;
  json.beginObject().field("tool", "loom-perf");
  json.field("version", std::to_string(LOOM_MAJOR) + "." + std::to_string(LOOM_MINOR) + "." + std::to_string(LOOM_PATCH));
  json.field("collective", o_.collective).field("ranks", nranks_).field("iterations", o_.iters);
  json.field("warmup", o_.warmup).field("check", o_.check == 1).field("aggregate", aggregateName(o_.aggregate));
  json.field("buffers", bufferSource(o_)).field("algo", o_.algo);
  json.field("fresh_inputs", o_.freshInputs);
  json.field("bus_factor", busFactor(o_.coll, nranks_));
  json.key("rank_info").beginArray();
  for (const auto& r : ranks_) json.value(r);
  json.endArray().key("rows").beginArray();
  auto half = [&](const Row& row, const Timing& t) {
    json.beginObject().field("time_us", t.us).field("algbw_GBps", algbw(row, t)).field("busbw_GBps", busbw(row, t));
    json.field("wrong", t.wrong);
    if (o_.perIteration) {
      json.field("min_us", t.minUs).field("p50_us", t.p50Us).field("p99_us", t.p99Us).field("cv", t.cv);
    }
    json.endObject();
  };
  for (const Row& row : rows_) {
    json.beginObject().field("size_bytes", static_cast<long long>(row.bytes)).field("count", static_cast<long long>(row.count));
    json.field("type", row.type).field("redop", row.redop).field("root", row.root);
    json.key("out_of_place");
    half(row, row.out);
    json.key("in_place");
    if (row.in) half(row, *row.in);
    else json.null();
    json.endObject();
  }
  json.endArray().endObject();
  writeFile(path, json.str(), "--json");
}

void Report::writeCsv(const std::string& path) const {
  std::string csv = "collective,ranks,size_bytes,count,type,redop,root,placement,time_us,algbw_GBps,busbw_GBps,wrong";
  csv += o_.perIteration ? ",min_us,p50_us,p99_us,cv\n" : "\n";
  auto line = [&](const Row& row, const char* placement, const Timing& t) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.4f,%.4f,%.0f", o_.collective.c_str(), nranks_,
                  row.bytes, row.count, row.type.c_str(), row.redop.c_str(), row.root, placement, t.us, algbw(row, t),
                  busbw(row, t), t.wrong);
    csv += buf;
    if (o_.perIteration) {
      std::snprintf(buf, sizeof buf, ",%.3f,%.3f,%.3f,%.4f", t.minUs, t.p50Us, t.p99Us, t.cv);
      csv += buf;
    }
    csv += '\n';
  };
  for (const Row& row : rows_) {
    line(row, "out_of_place", row.out);
    if (row.in) line(row, "in_place", *row.in);
  }
  writeFile(path, csv, "--csv");
}

}  // namespace loom::perf
