// loom-perf's output: nccl-tests' table on stdout (rank 0), and the same rows
// as JSON (--json) and CSV (--csv). algbw = bytes / time; busbw = algbw x
// nccl-tests' factor for n ranks; GB = 1e9 bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tools/loom-perf/options.hpp"

namespace loom::perf {

// nccl-tests' bus bandwidth factors.
double busFactor(check::Coll c, int n);

// One half of a row (out of place or in place).
struct Timing {
  double us = 0;     // mean per call, combined over ranks by -a
  double wrong = 0;  // wrong elements over every rank
  // -I 1: statistics of single iterations, each combined over ranks by -a first.
  double minUs = 0;
  double p50Us = 0;
  double p99Us = 0;
  double cv = 0;  // standard deviation / mean
};

struct Row {
  size_t bytes = 0;  // total data size S, as nccl-tests counts it
  size_t count = 0;  // elements
  std::string type;
  std::string redop;  // "none" for data movement
  int root = -1;      // -1 for unrooted collectives
  Timing out;
  std::optional<Timing> in;  // none for all-to-all (NCCL has no in-place one)
};

class Report {
 public:
  // `ranks`: one description per rank (host, pid, place, transports), by rank.
  Report(const Options& o, int nranks, std::vector<std::string> ranks);

  // Prints the run's parameters and one line per rank.
  void header() const;
  // Prints the column titles.
  void begin() const;
  // Prints the row now (and its -I statistics) and keeps it for the files.
  void add(const Row& row);
  // Prints the footer and writes --json and --csv. Returns the wrong elements of every row.
  double finish() const;

  double algbw(const Row& row, const Timing& t) const;
  double busbw(const Row& row, const Timing& t) const;

 private:
  void writeJson(const std::string& path) const;
  void writeCsv(const std::string& path) const;

  const Options& o_;
  int nranks_;
  std::vector<std::string> ranks_;
  std::vector<Row> rows_;
};

}  // namespace loom::perf
