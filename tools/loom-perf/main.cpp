// loom-perf: Loom's collective benchmark, in the manner of nccl-tests: same
// flags, same columns, same bus-bandwidth factors (GB = 1e9 bytes).
//
//   loom-perf all_reduce -b 8 -e 64M -f 2 -N 4
//
// Each size runs -w warm-up and -n timed iterations back to back, out of
// place and then in place; the time is the slowest rank's mean (an
// all-reduce with loomMax of every rank's figure). With -c 1, one extra call
// per size on inputs built from (rank, index) is checked element by element
// against the exact expected result (tools/check), and #wrong counts the
// mismatches over all ranks. The exit status is 1 if any was wrong.
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/check/collective_check.hpp"
#include "tools/launch/local_job.hpp"

namespace {

using loom::check::Case;
using loom::check::Coll;
using loom::check::Op;

struct Options {
  std::string collective;
  bool barrier = false;
  Coll coll = Coll::AllReduce;
  int np = 4;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  size_t minBytes = 8;
  size_t maxBytes = 8;
  double factor = 2;
  std::vector<loomDataType_t> types{loomFloat32};  // -d: one, or all
  std::vector<Op> ops{Op::Sum};                    // -o: one, or all
  int root = 0;
  bool loomMemAlloc = false;  // -R 1: buffers from loomMemAlloc, which peers on the node read in place
  bool corruptOne = false;  // test hook: flips one result element before the check
};

int usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: loom-perf COLLECTIVE [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c 0|1]\n"
               "                 [-d type] [-o op] [-r root] [-N ranks] [-R 0|1]\n"
               "  COLLECTIVE: all_reduce, all_gather, reduce_scatter, broadcast, reduce, gather, scatter,\n"
               "              alltoall, or barrier (the out-of-band bootstrap barrier)\n"
               "  -b/-e  smallest and largest size in bytes (K, M, G suffixes; default 8)\n"
               "  -f     size factor between steps (default 2)\n"
               "  -n/-w  timed and warm-up iterations per size (default 20, 5)\n"
               "  -c     check results (1, default) or not (0)\n"
               "  -d     int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all (default float)\n"
               "  -o     sum prod min max avg premulsum, or all (default sum)\n"
               "  -r     root of rooted collectives (default 0)\n"
               "  -N     ranks to start on this machine when not under a launcher (default 4)\n"
               "  -R     buffers from malloc (0, default) or loomMemAlloc (1: read in place by the node's ranks)\n"
               "  --test-corrupt-one  flip one result element of rank 0 before each check (tests the check)\n"
               "  The algorithm follows LOOM_ALGO like every Loom program.\n");
  return status;
}

[[noreturn]] void bad(const char* flag, const char* text) {
  std::fprintf(stderr, "loom-perf: bad value '%s' for %s\n", text, flag);
  std::exit(2);
}

size_t parseBytes(const char* flag, const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  double unit = 1;
  if (*end == 'K' || *end == 'k') unit = 1024, ++end;
  else if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0' || v < 0 || v * unit > 1e12) bad(flag, text);
  return static_cast<size_t>(v * unit);
}

int parseInt(const char* flag, const char* text, int min) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < min || v > 100000000) bad(flag, text);
  return static_cast<int>(v);
}

bool parseCollective(const std::string& name, Options& o) {
  const std::pair<const char*, Coll> kNames[] = {
      {"all_reduce", Coll::AllReduce}, {"all_gather", Coll::AllGather}, {"reduce_scatter", Coll::ReduceScatter},
      {"broadcast", Coll::Broadcast},  {"reduce", Coll::Reduce},         {"gather", Coll::Gather},
      {"scatter", Coll::Scatter},      {"alltoall", Coll::AlltoAll}};
  if (name == "barrier") return o.barrier = true;
  for (auto [n, c] : kNames) {
    if (name == n) {
      o.coll = c;
      return true;
    }
  }
  return false;
}

std::vector<loomDataType_t> parseTypes(const char* text) {
  const std::pair<const char*, loomDataType_t> kNames[] = {
      {"int8", loomInt8},     {"uint8", loomUint8},   {"int32", loomInt32}, {"uint32", loomUint32},
      {"int64", loomInt64},   {"uint64", loomUint64}, {"half", loomFloat16}, {"float16", loomFloat16},
      {"float", loomFloat32}, {"float32", loomFloat32}, {"double", loomFloat64}, {"float64", loomFloat64},
      {"bfloat16", loomBfloat16}};
  if (std::strcmp(text, "all") == 0) {
    return {loomInt8,    loomUint8,   loomInt32,   loomUint32,  loomInt64,
            loomUint64,  loomFloat16, loomFloat32, loomFloat64, loomBfloat16};
  }
  for (auto [n, t] : kNames) {
    if (std::strcmp(text, n) == 0) return {t};
  }
  bad("-d", text);
}

std::vector<Op> parseOps(const char* text) {
  std::vector<Op> all;
  for (int op = 0; op <= static_cast<int>(Op::PreMulSum); ++op) all.push_back(static_cast<Op>(op));
  if (std::strcmp(text, "all") == 0) return all;
  for (Op op : all) {
    if (std::strcmp(text, loom::check::opName(op)) == 0) return {op};
  }
  bad("-o", text);
}

// nccl-tests' bus bandwidth factors.
double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AlltoAll: case Coll::Gather: case Coll::Scatter:
      return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

// Exits the rank with the call's error: a benchmark that fails has nothing to report.
void must(loomResult_t r, const char* call, loomComm_t comm) {
  if (r == loomSuccess) return;
  std::fprintf(stderr, "loom-perf: %s failed: %s (%s)\n", call, loomGetErrorString(r), loomGetLastError(comm));
  std::exit(1);
}
#define CHECK(comm, call) must((call), #call, (comm))

// A buffer that only grows, from the heap or from loomMemAlloc.
class HostBuffer {
 public:
  explicit HostBuffer(bool loomMemAlloc) : shared_(loomMemAlloc) {}
  ~HostBuffer() { release(); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    release();
    void* p = nullptr;
    if (shared_) {
      CHECK(nullptr, loomMemAlloc(&p, bytes));
    } else {
      p = std::calloc(bytes, 1);
      if (p == nullptr) must(loomSystemError, "calloc", nullptr);
    }
    data_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
  }
  std::byte* data() const { return data_; }

 private:
  void release() {
    if (data_ == nullptr) return;
    if (shared_) {
      CHECK(nullptr, loomMemFree(data_));
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
  }

  bool shared_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

class Runner {
 public:
  Runner(const Options& o, loomComm_t comm, int rank, int size) : o_(o), comm_(comm), rank_(rank), size_(size) {}

  // Mean microseconds per call over the slowest rank, and wrong elements over all ranks.
  struct Result {
    double us;
    double wrong;
  };

  Result measure(loomDataType_t type, Op reduction, size_t count, bool inPlace) {
    Case c{o_.coll, type, reduction, size_, rank_, o_.root, count};
    prepare(c, inPlace);
    loomRedOp_t op = makeOp(c);
    for (int i = 0; i < o_.warmup; ++i) run(c, op);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) run(c, op);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o_.iters;
    double wrong = 0;
    if (o_.check) {
      prepare(c, inPlace);
      run(c, op);
      if (o_.corruptOne && rank_ == 0 && loom::check::hasResult(c) && loom::check::recvElements(c) > 0) {
        recv_[0] = ~recv_[0];
      }
      wrong = static_cast<double>(loom::check::wrongElements(c, recv_));
    }
    if (c.op == Op::PreMulSum) CHECK(comm_, loomRedOpDestroy(op, comm_));
    CHECK(comm_, loomAllReduce(&us, &us, 1, loomFloat64, loomMax, comm_, nullptr));
    CHECK(comm_, loomAllReduce(&wrong, &wrong, 1, loomFloat64, loomSum, comm_, nullptr));
    return {us, wrong};
  }

 private:
  void prepare(const Case& c, bool inPlace) {
    const size_t size = loom::check::typeSize(c.type);
    const size_t sendBytes = loom::check::sendElements(c) * size;
    const size_t recvBytes = loom::check::recvElements(c) * size;
    const size_t own = static_cast<size_t>(c.coll == Coll::Gather || c.coll == Coll::Scatter ? c.root : c.rank) *
                       c.count * size;
    a_.reserve(std::max(sendBytes, recvBytes) + 1);
    b_.reserve(recvBytes + 1);
    send_ = a_.data();
    recv_ = b_.data();
    if (inPlace) {
      switch (c.coll) {
        case Coll::AllGather: case Coll::Gather: recv_ = a_.data(); send_ = a_.data() + own; break;
        case Coll::ReduceScatter: case Coll::Scatter: send_ = a_.data(); recv_ = a_.data() + own; break;
        default: recv_ = send_; break;
      }
    }
    loom::check::fillSend(c, send_);
  }

  loomRedOp_t makeOp(const Case& c) {
    switch (c.op) {
      case Op::Sum: return loomSum;
      case Op::Prod: return loomProd;
      case Op::Min: return loomMin;
      case Op::Max: return loomMax;
      case Op::Avg: return loomAvg;
      case Op::PreMulSum: break;
    }
    loom::check::storeValue(c.type, scalar_, 0, loom::check::preMulScalar(rank_));
    loomRedOp_t op;
    CHECK(comm_, loomRedOpCreatePreMulSum(&op, scalar_, c.type, loomScalarHostImmediate, comm_));
    return op;
  }

  void run(const Case& c, loomRedOp_t op) {
    switch (c.coll) {
      case Coll::Broadcast: CHECK(comm_, loomBroadcast(send_, recv_, c.count, c.type, c.root, comm_, nullptr)); break;
      case Coll::Reduce: CHECK(comm_, loomReduce(send_, recv_, c.count, c.type, op, c.root, comm_, nullptr)); break;
      case Coll::AllReduce: CHECK(comm_, loomAllReduce(send_, recv_, c.count, c.type, op, comm_, nullptr)); break;
      case Coll::ReduceScatter: CHECK(comm_, loomReduceScatter(send_, recv_, c.count, c.type, op, comm_, nullptr)); break;
      case Coll::AllGather: CHECK(comm_, loomAllGather(send_, recv_, c.count, c.type, comm_, nullptr)); break;
      case Coll::AlltoAll: CHECK(comm_, loomAlltoAll(send_, recv_, c.count, c.type, comm_, nullptr)); break;
      case Coll::Gather: CHECK(comm_, loomGather(send_, recv_, c.count, c.type, c.root, comm_, nullptr)); break;
      case Coll::Scatter: CHECK(comm_, loomScatter(send_, recv_, c.count, c.type, c.root, comm_, nullptr)); break;
    }
  }

  const Options& o_;
  loomComm_t comm_;
  int rank_;
  int size_;
  HostBuffer a_{o_.loomMemAlloc}, b_{o_.loomMemAlloc};
  std::byte* send_ = nullptr;
  std::byte* recv_ = nullptr;
  std::byte scalar_[8] = {};
};

void printHeader(const Options& o, loomComm_t comm, int rank, int size) {
  int local = 0, localSize = 0;
  CHECK(comm, loomCommLocalRank(comm, &local));
  CHECK(comm, loomCommLocalCount(comm, &localSize));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  if (rank == 0) {
    std::printf("# loom-perf %d.%d.%d: %s, %d ranks, %d iterations, %d warm-up, check %d, buffers from %s\n", LOOM_MAJOR,
                LOOM_MINOR, LOOM_PATCH, o.collective.c_str(), size, o.iters, o.warmup, o.check,
                o.loomMemAlloc ? "loomMemAlloc" : "malloc");
  }
  for (int r = 0; r < size; ++r) {  // one line per rank, in rank order
    if (r == rank) {
      std::printf("#  rank %2d  host %s  pid %d  local rank %d of %d\n", rank, host, static_cast<int>(::getpid()),
                  local, localSize);
      std::fflush(stdout);
    }
    CHECK(comm, loomCommBarrier(comm));
  }
}

int runBarrier(const Options& o, loomComm_t comm, int rank) {
  for (int i = 0; i < o.warmup; ++i) CHECK(comm, loomCommBarrier(comm));
  std::vector<double> us;
  for (int i = 0; i < o.iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(comm, loomCommBarrier(comm));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  if (rank == 0) {
    std::printf("#%12s %12s %12s\n", "collective", "min(us)", "p50(us)");
    std::printf(" %12s %12.1f %12.1f\n", "barrier", us.front(), us[us.size() / 2]);
  }
  return 0;
}

int runCollective(const Options& o, loomComm_t comm, int rank, int size) {
  const bool blocks = o.coll == Coll::AllGather || o.coll == Coll::ReduceScatter || o.coll == Coll::AlltoAll ||
                      o.coll == Coll::Gather || o.coll == Coll::Scatter;
  const bool reduces = loom::check::reduces(o.coll);
  Runner runner(o, comm, rank, size);
  if (rank == 0) {
    std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "", "", "", "", "", "out-of-place", "",
                "", "", "in-place", "", "", "");
    std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("#%11s %12s %8s %9s %5s  %8s %7s %7s %6s  %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  double wrongTotal = 0, busSum = 0;
  int sizes = 0;
  // -d all and -o all: one sweep per type and (for reductions) per op.
  for (loomDataType_t type : o.types) {
    const size_t typeSize = loom::check::typeSize(type);
    for (Op op : reduces ? o.ops : std::vector<Op>{Op::Sum}) {
      for (size_t bytes = o.minBytes;; bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * o.factor))) {
        if (bytes > o.maxBytes) break;
        const size_t unit = typeSize * (blocks ? static_cast<size_t>(size) : 1);
        const size_t count = bytes / unit;  // per-rank block for the n-block collectives
        const size_t total = count * unit;
        auto out = runner.measure(type, op, count, false);
        const bool hasInPlace = o.coll != Coll::AlltoAll;  // NCCL defines no in-place all-to-all
        auto in = hasInPlace ? runner.measure(type, op, count, true) : out;
        auto algbw = [&](double us) { return us > 0 ? static_cast<double>(total) / us / 1e3 : 0.0; };
        const double factor = busFactor(o.coll, size);
        if (rank == 0) {
          std::printf(" %11zu %12zu %8s %9s %5d  %8.1f %7.2f %7.2f %6.0f", total, total / typeSize,
                      loom::check::typeName(type), reduces ? loom::check::opName(op) : "none",
                      o.coll == Coll::Broadcast || o.coll == Coll::Reduce || o.coll == Coll::Gather || o.coll == Coll::Scatter ? o.root : -1,
                      out.us, algbw(out.us), algbw(out.us) * factor, out.wrong);
          if (hasInPlace) std::printf("  %8.1f %7.2f %7.2f %6.0f\n", in.us, algbw(in.us), algbw(in.us) * factor, in.wrong);
          else std::printf("  %8s %7s %7s %6s\n", "n/a", "n/a", "n/a", "n/a");
          std::fflush(stdout);
        }
        wrongTotal += out.wrong + (hasInPlace ? in.wrong : 0);
        busSum += (algbw(out.us) + algbw(in.us)) / 2 * factor;
        ++sizes;
        if (o.factor <= 1) break;
      }
    }
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %.0f %s\n", wrongTotal, wrongTotal == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %.4f\n", sizes ? busSum / sizes : 0.0);
  }
  return wrongTotal == 0 || rank != 0 ? 0 : 1;  // rank 0 fails the job, after its report
}

int runRank(const Options& o) {
  loomComm_t comm = nullptr;
  CHECK(comm, loomCommInitFromEnv(&comm, nullptr));
  int rank = 0, size = 0;
  CHECK(comm, loomCommUserRank(comm, &rank));
  CHECK(comm, loomCommCount(comm, &size));
  if (o.root >= size) {
    if (rank == 0) std::fprintf(stderr, "loom-perf: -r %d is not a rank (0 to %d)\n", o.root, size - 1);
    return 2;
  }
  printHeader(o, comm, rank, size);
  int status = o.barrier ? runBarrier(o, comm, rank) : runCollective(o, comm, rank, size);
  CHECK(comm, loomCommDestroy(comm));
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 2) return usage(2);
  o.collective = argv[1];
  if (o.collective == "-h" || o.collective == "--help") return usage(0);
  if (!parseCollective(o.collective, o)) {
    std::fprintf(stderr, "loom-perf: unknown collective '%s'\n", o.collective.c_str());
    return usage(2);
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--test-corrupt-one") {
      o.corruptOne = true;
      continue;
    }
    if (i + 1 >= argc) return usage(2);
    const char* v = argv[++i];
    if (a == "-N" || a == "--np") o.np = parseInt("-N", v, 1);
    else if (a == "-n") o.iters = parseInt("-n", v, 1);
    else if (a == "-w") o.warmup = parseInt("-w", v, 0);
    else if (a == "-c") o.check = parseInt("-c", v, 0);
    else if (a == "-b") o.minBytes = parseBytes("-b", v);
    else if (a == "-e") o.maxBytes = parseBytes("-e", v);
    else if (a == "-f") o.factor = std::strtod(v, nullptr);
    else if (a == "-d") o.types = parseTypes(v);
    else if (a == "-o") o.ops = parseOps(v);
    else if (a == "-r") o.root = parseInt("-r", v, 0);
    else if (a == "-R") o.loomMemAlloc = parseInt("-R", v, 0) != 0;
    else return usage(2);
  }
  if (o.maxBytes < o.minBytes) o.maxBytes = o.minBytes;
  if (loom::launch::launchedAsRank()) return runRank(o);
  return loom::launch::relaunchAsLocalJob(o.np, argc, argv);  // started by hand: be our own loomrun
}
