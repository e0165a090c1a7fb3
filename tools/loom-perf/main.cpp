// loom-perf: Loom's collective benchmark, in the manner of nccl-tests: same
// flags, same columns, same bus-bandwidth factors (GB = 1e9 bytes).
//
//   loom-perf all_reduce -b 8 -e 64M -f 2 -N 4
//
// Each size runs -w warm-up iterations, an out-of-band barrier (so that no
// rank starts timing while a peer still finishes its warm-up: a broadcast's
// root may run calls ahead of its receivers, as MPI's and NCCL's do; the
// peer programs of bench/ do the same, bench/peers/sweep.hpp) and -n timed
// iterations back to back, out of place and then in place, on the same
// buffers (as nccl-tests does: a
// buffer larger than the last-level cache is not in it when the next
// iteration starts, and a smaller one would be in a real training loop
// too). The time is every rank's mean per call combined by -a (default:
// the slowest rank's). With -c 1, one extra call per size on inputs built
// from (rank, index) is checked element by element against the exact
// expected result (tools/check), and #wrong counts the mismatches over all
// ranks. The exit status is 1 if any was wrong. With -F 1 every rank rewrites
// its input before each call (fresh_inputs.hpp) and only the calls are timed.
#include <loom/loom.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/device_buffer.hpp"
#include "base/device/staging.hpp"
#include "base/ranges.hpp"
#include "tools/check/collective_call.hpp"
#include "tools/check/collective_check.hpp"
#include "tools/launch/local_job.hpp"
#include "tools/loom-perf/fresh_inputs.hpp"
#include "tools/loom-perf/options.hpp"
#include "tools/loom-perf/report.hpp"

namespace {

using loom::check::Case;
using loom::check::Coll;
using loom::check::Op;
using loom::perf::Aggregate;
using loom::perf::Options;
using loom::perf::Report;
using loom::perf::Row;
using loom::perf::Timing;
using Clock = std::chrono::steady_clock;

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
  size_t size() const { return bytes_; }

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

loomRedOp_t combiner(Aggregate a) {
  switch (a) {
    case Aggregate::Min: return loomMin;
    case Aggregate::Avg: return loomAvg;
    case Aggregate::Max: break;
  }
  return loomMax;
}

// min, p50, p99 and coefficient of variation of `us` (sorted in place).
void iterationStats(std::vector<double>& us, Timing& t) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * static_cast<double>(us.size())))]; };
  double mean = 0, var = 0;
  for (double x : us) mean += x;
  mean /= static_cast<double>(us.size());
  for (double x : us) var += (x - mean) * (x - mean);
  t.minUs = us.front();
  t.p50Us = at(0.5);
  t.p99Us = at(0.99);
  t.cv = mean > 0 ? std::sqrt(var / static_cast<double>(us.size())) / mean : 0;
}

// Where a measured call writes its result: its own buffer, or over its input.
enum class Placement { OutOfPlace, InPlace };

class Runner {
 public:
  Runner(const Options& o, loomComm_t comm, int rank, int size) : o_(o), comm_(comm), rank_(rank), size_(size) {
    if (o.gpu) stream_ = std::make_unique<loom::cuda::DeviceStream>();
  }
  ~Runner() {
    if (stream_) stream_->synchronize([] {});
    unregister();
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Timing measure(loomDataType_t type, Op reduction, size_t count, Placement placement) {
    const bool inPlace = placement == Placement::InPlace;
    Case c{o_.coll, type, reduction, size_, rank_, o_.root, count};
    prepare(c, inPlace);
    loomRedOp_t op = makeOp(c);
    for (int i = 0; i < o_.warmup; ++i) run(c, op);
    finish();
    CHECK(comm_, loomCommBarrier(comm_));
    Timing t;
    std::vector<double> each;
    const size_t inputBytes = loom::check::sendElements(c) * loom::check::typeSize(c.type);
    const auto t0 = Clock::now();
    if (o_.perIteration || o_.freshInputs) {
      each.resize(static_cast<size_t>(o_.iters));
      for (auto& us : each) {
        if (o_.freshInputs) loom::perf::rewriteLines(send_, inputBytes);
        const auto start = Clock::now();
        run(c, op);
        finish();
        us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      }
    } else {
      for (int i = 0; i < o_.iters; ++i) run(c, op);
      finish();
    }
    t.us = o_.freshInputs ? std::accumulate(each.begin(), each.end(), 0.0) / o_.iters
                          : std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;
    if (o_.check) {
      prepare(c, inPlace);
      run(c, op);
      finish();
      if (da_) {  // the result, into the host's images
        da_->download(a_.data());
        db_->download(b_.data());
      }
      if (o_.corruptOne && rank_ == 0 && loom::check::hasResult(c) && loom::check::recvElements(c) > 0) {
        recv_[0] = ~recv_[0];
      }
      t.wrong = static_cast<double>(loom::check::wrongElements(c, recv_));
    }
    if (c.op == Op::PreMulSum) CHECK(comm_, loomRedOpDestroy(op, comm_));
    const loomRedOp_t across = combiner(o_.aggregate);
    CHECK(comm_, loomAllReduce(&t.us, &t.us, 1, loomFloat64, across, comm_, nullptr));
    CHECK(comm_, loomAllReduce(&t.wrong, &t.wrong, 1, loomFloat64, loomSum, comm_, nullptr));
    if (o_.perIteration) {
      // Iteration i of every rank is one call: combine per iteration, then take statistics.
      CHECK(comm_, loomAllReduce(each.data(), each.data(), each.size(), loomFloat64, across, comm_, nullptr));
      iterationStats(each, t);
    }
    return t;
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
    callSend_ = send_;
    callRecv_ = recv_;
    if (!o_.gpu) return;
    // The device's buffers mirror the host's images, which hold the inputs.
    if (!da_ || da_->size() != a_.size() || !db_ || db_->size() != b_.size()) {
      // Every rank grows its buffers at the same sizes (-W 1's collectives
      // are the same size on every rank), so the windows' registrations,
      // collective, meet.
      unregister();
      if (!da_ || da_->size() != a_.size()) da_ = std::make_unique<loom::cuda::DeviceBuffer>(a_.size());
      if (!db_ || db_->size() != b_.size()) db_ = std::make_unique<loom::cuda::DeviceBuffer>(b_.size());
      if (o_.windows) {
        CHECK(comm_, loomCommWindowRegister(comm_, da_->data(), da_->size(), &wa_, LOOM_WIN_COLL_SYMMETRIC));
        CHECK(comm_, loomCommWindowRegister(comm_, db_->data(), db_->size(), &wb_, LOOM_WIN_COLL_SYMMETRIC));
      }
    }
    da_->upload(a_.data());
    db_->upload(b_.data());
    const auto onDevice = [&](std::byte* p) {
      return p >= a_.data() && p < a_.data() + a_.size() ? da_->data() + (p - a_.data()) : db_->data() + (p - b_.data());
    };
    callSend_ = onDevice(send_);
    callRecv_ = onDevice(recv_);
  }

  // -W 1's windows go before their buffers, collectively.
  void unregister() {
    for (loomWindow_t* w : {&wa_, &wb_}) {
      if (*w != nullptr) CHECK(comm_, loomCommWindowDeregister(comm_, *w));
      *w = nullptr;
    }
  }

  // Waits for the calls queued on the rank's CUDA stream (-G 1); the others returned done.
  void finish() {
    if (stream_) stream_->synchronize([] {});
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
    const bool pair = c.coll == Coll::SendRecv;  // a send and a receive, posted together
    if (pair) CHECK(comm_, loomGroupStart());
    CHECK(comm_, loom::check::callCollective(c, callSend_, callRecv_, op, comm_,
                                             stream_ ? static_cast<loomStream_t>(stream_->handle()) : nullptr));
    if (pair) CHECK(comm_, loomGroupEnd());
  }

  const Options& o_;
  loomComm_t comm_;
  int rank_;
  int size_;
  HostBuffer a_{o_.loomMemAlloc}, b_{o_.loomMemAlloc};
  std::byte* send_ = nullptr;  // in host memory: the inputs' and results' images with -G 1
  std::byte* recv_ = nullptr;
  std::byte* callSend_ = nullptr;  // what the calls get: send_ and recv_, or their places on the GPU
  std::byte* callRecv_ = nullptr;
  std::unique_ptr<loom::cuda::DeviceBuffer> da_, db_;
  loomWindow_t wa_ = nullptr, wb_ = nullptr;  // -W 1: da_ and db_ as symmetric windows
  std::unique_ptr<loom::cuda::DeviceStream> stream_;
  std::byte scalar_[8] = {};
};

// This rank in one line: where it runs (host, pid, NUMA node, NIC from the
// topology) and which transport reaches each peer.
std::string describeRank(loomComm_t comm, int rank, int size) {
  std::vector<loomPeerInfo_t> peers(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) CHECK(comm, loomCommGetPeerInfo(comm, peer, &peers[static_cast<size_t>(peer)]));
  const loomPeerInfo_t& me = peers[static_cast<size_t>(rank)];
  std::string line = std::string("host ") + me.host + "  pid " + std::to_string(me.pid) + "  local rank " +
                     std::to_string(me.localRank) + " of " + std::to_string(me.localCount) + "  NUMA " +
                     std::to_string(me.numaNode) + "  NIC " + (me.nic[0] == '\0' ? "-" : me.nic);
  std::vector<std::pair<std::string, std::vector<int>>> byKind;
  for (const auto& peer : peers) {
    if (peer.rank == rank) continue;
    auto it = std::find_if(byKind.begin(), byKind.end(), [&](const auto& k) { return k.first == peer.transport; });
    if (it == byKind.end()) it = byKind.insert(byKind.end(), {peer.transport, {}});
    it->second.push_back(peer.rank);
  }
  for (const auto& [name, ranks] : byKind) line += "  " + name + " to " + loom::formatRanges(ranks);
  return line;
}

// Every rank's description, at rank 0 (the others get an empty list).
std::vector<std::string> gatherRanks(loomComm_t comm, int rank, int size) {
  constexpr size_t kLine = 256;
  std::string mine = describeRank(comm, rank, size);
  mine.resize(kLine - 1);
  std::vector<char> all(kLine * static_cast<size_t>(size));
  CHECK(comm, loomAllGather(mine.c_str(), all.data(), kLine, loomInt8, comm, nullptr));
  std::vector<std::string> lines;
  if (rank != 0) return lines;
  for (int r = 0; r < size; ++r) lines.emplace_back(all.data() + kLine * static_cast<size_t>(r));
  return lines;
}

int runBarrier(const Options& o, loomComm_t comm, int rank, int size) {
  const Report report(o, size, gatherRanks(comm, rank, size));
  if (rank == 0) report.header();
  for (int i = 0; i < o.warmup; ++i) CHECK(comm, loomCommBarrier(comm));
  std::vector<double> us;
  for (int i = 0; i < o.iters; ++i) {
    auto t0 = Clock::now();
    CHECK(comm, loomCommBarrier(comm));
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  if (rank == 0) {
    std::printf("#%12s %12s %12s\n", "collective", "min(us)", "p50(us)");
    std::printf(" %12s %12.1f %12.1f\n", "barrier", us.front(), us[us.size() / 2]);
  }
  return 0;
}

// The sizes of the sweep: -b to -e by -f (or by -i bytes).
std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    sizes.push_back(bytes);
    if (o.increment > 0) bytes += o.increment;
    else if (o.factor > 1) bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * o.factor));
    else break;
  }
  return sizes;
}

// A progress line on a terminal, for sweeps that outlast a few seconds.
class Progress {
 public:
  Progress(bool enabled, size_t total) : enabled_(enabled && ::isatty(STDERR_FILENO)), total_(total) {}
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  void step(size_t bytes) {
    ++done_;
    if (!enabled_) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    if (seconds < 3) return;
    shown_ = true;
    std::fprintf(stderr, "\rloom-perf: %zu of %zu rows, last %zu B, %.0f s", done_, total_, bytes, seconds);
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  size_t total_;
  size_t done_ = 0;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
};

int runCollective(const Options& o, loomComm_t comm, int rank, int size) {
  const bool blocks = o.coll == Coll::AllGather || o.coll == Coll::ReduceScatter || o.coll == Coll::AlltoAll ||
                      o.coll == Coll::Gather || o.coll == Coll::Scatter;
  const bool rooted = o.coll == Coll::Broadcast || o.coll == Coll::Reduce || o.coll == Coll::Gather || o.coll == Coll::Scatter;
  const bool reduces = loom::check::reduces(o.coll);
  const std::vector<Op> ops = reduces ? o.ops : std::vector<Op>{Op::Sum};
  const std::vector<size_t> sizes = sweepSizes(o);
  Report report(o, size, gatherRanks(comm, rank, size));
  if (rank == 0) {
    report.header();
    report.begin();
  }
  Progress progress(rank == 0, o.types.size() * ops.size() * sizes.size());
  Runner runner(o, comm, rank, size);
  // -d all and -o all: one sweep per type and (for reductions) per op.
  for (loomDataType_t type : o.types) {
    const size_t typeSize = loom::check::typeSize(type);
    for (Op op : ops) {
      for (size_t bytes : sizes) {
        const size_t unit = typeSize * (blocks ? static_cast<size_t>(size) : 1);
        Row row;
        row.count = bytes / unit;  // per-rank block for the n-block collectives
        row.bytes = row.count * unit;
        row.type = loom::check::typeName(type);
        row.redop = reduces ? loom::check::opName(op) : "none";
        row.root = rooted ? o.root : -1;
        row.out = runner.measure(type, op, row.count, Placement::OutOfPlace);
        // NCCL defines no in-place all-to-all; a send and a receive on one buffer would race.
        if (o.coll != Coll::AlltoAll && o.coll != Coll::SendRecv) row.in = runner.measure(type, op, row.count, Placement::InPlace);
        row.count = row.bytes / typeSize;  // the column counts every rank's elements, as nccl-tests
        if (rank == 0) report.add(row);
        progress.step(bytes);
      }
    }
  }
  if (rank != 0) return 0;
  return report.finish() == 0 ? 0 : 1;  // rank 0 fails the job, after its report
}

// Ends the run on every rank with exit status 2, rank 0 having said why. No
// rank leaves before rank 0 has written it: the launcher ends the other
// ranks as soon as one exits, and a message not yet written is then lost.
int refuse(loomComm_t comm, int rank, const std::string& why) {
  if (rank == 0) std::fprintf(stderr, "loom-perf: %s\n", why.c_str());
  CHECK(comm, loomCommBarrier(comm));
  CHECK(comm, loomCommDestroy(comm));
  return 2;
}

int runRank(const Options& o) {
  loomComm_t comm = nullptr;
  CHECK(comm, loomCommInitFromEnv(&comm, nullptr));
  int rank = 0, size = 0;
  CHECK(comm, loomCommUserRank(comm, &rank));
  CHECK(comm, loomCommCount(comm, &size));
  if (o.root >= size) {
    return refuse(comm, rank, "-r " + std::to_string(o.root) + " is not a rank (0 to " + std::to_string(size - 1) + ")");
  }
  if (o.gpu) {
    // Every rank learns the lowest rank that sees no device (size: none), so
    // that all refuse together or none does.
    const int devices = loom::cuda::deviceCount();
    int blind = devices == 0 ? rank : size;
    CHECK(comm, loomAllReduce(&blind, &blind, 1, loomInt32, loomMin, comm, nullptr));
    if (blind < size) {
      return refuse(comm, rank,
                    "-G 1: no CUDA device is visible to rank " + std::to_string(blind) + " (this build " +
                        (loom::cuda::compiledWithCuda() ? "has" : "has no") + " CUDA)");
    }
    loomPeerInfo_t me;
    CHECK(comm, loomCommGetPeerInfo(comm, rank, &me));
    loom::cuda::setCurrentDevice(me.localRank % devices);
  }
  int status = o.barrier ? runBarrier(o, comm, rank, size) : runCollective(o, comm, rank, size);
  CHECK(comm, loomCommDestroy(comm));
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = loom::perf::parseOptions(argc, argv);
  // --algo is LOOM_ALGO for this run; it reaches relaunched ranks through the environment.
  if (!o.algo.empty()) ::setenv("LOOM_ALGO", o.algo.c_str(), 1);
  if (loom::launch::launchedAsRank()) return runRank(o);
  return loom::launch::relaunchAsLocalJob(o.np, argc, argv);  // started by hand: be our own loomrun
}
