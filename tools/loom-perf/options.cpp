#include "tools/loom-perf/options.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tools/flags/flags.hpp"

namespace loom::perf {
namespace {

using check::Coll;
using check::Op;

[[noreturn]] void usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: loom-perf COLLECTIVE [-b min] [-e max] [-f factor | -i increment] [-n iters] [-w warmup]\n"
               "                 [-c 0|1] [-d type] [-o op] [-r root] [-a min|max|avg] [-I 0|1] [-F 0|1]\n"
               "                 [-N ranks] [-R 0|1] [-G 0|1] [-W 0|1] [--algo NAME] [--json FILE] [--csv FILE]\n"
               "  COLLECTIVE: all_reduce, all_gather, reduce_scatter, broadcast, reduce, gather, scatter,\n"
               "              alltoall, sendrecv (to rank+1, from rank-1, in a group), or barrier (the\n"
               "              out-of-band bootstrap barrier)\n"
               "  -b/-e  smallest and largest size in bytes (K, M, G suffixes; default 8)\n"
               "  -f     size factor between steps (default 2); -i: a fixed increment in bytes instead\n"
               "  -n/-w  timed and warm-up iterations per size (default 20, 5)\n"
               "  -c     check results (1, default) or not (0)\n"
               "  -d     int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all (default float)\n"
               "  -o     sum prod min max avg premulsum, or all (default sum)\n"
               "  -r     root of rooted collectives (default 0)\n"
               "  -a     how the ranks' times combine: min, max (default: the slowest rank) or avg\n"
               "  -I     1: time every iteration and report min, p50, p99 and the coefficient of variation\n"
               "  -F     1: rewrite every rank's input before each call, untimed (fresh data, as in training)\n"
               "  -N     ranks to start on this machine when not under a launcher (default 4)\n"
               "  -R     buffers from malloc (0, default) or loomMemAlloc (1: read in place by the node's ranks)\n"
               "  -G     1: buffers on a GPU (rank i on device local rank i mod the devices, so ranks may share\n"
               "         one), each rank's calls on a CUDA stream of its own, timed to the stream's end\n"
               "  -W     1: with -G 1, those buffers registered as symmetric windows (loomCommWindowRegister),\n"
               "         which the resident path reads in place (all_reduce, all_gather, reduce_scatter, alltoall)\n"
               "  --algo NAME   LOOM_ALGO for this run (e.g. ring, or allreduce:rd,allgather:direct)\n"
               "  --json FILE   also write the parameters, ranks and every row as JSON\n"
               "  --csv FILE    also write every row as CSV\n"
               "  --test-corrupt-one  flip one result element of rank 0 before each check (tests the check)\n");
  std::exit(status);
}

using flags::bad;
using flags::parseBytes;
using flags::parseInt;

bool parseCollective(const std::string& name, Options& o) {
  const std::pair<const char*, Coll> kNames[] = {
      {"all_reduce", Coll::AllReduce}, {"all_gather", Coll::AllGather}, {"reduce_scatter", Coll::ReduceScatter},
      {"broadcast", Coll::Broadcast},  {"reduce", Coll::Reduce},         {"gather", Coll::Gather},
      {"scatter", Coll::Scatter},      {"alltoall", Coll::AlltoAll},     {"sendrecv", Coll::SendRecv}};
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
    if (std::strcmp(text, check::opName(op)) == 0) return {op};
  }
  bad("-o", text);
}

Aggregate parseAggregate(const char* text) {
  for (Aggregate a : {Aggregate::Min, Aggregate::Max, Aggregate::Avg}) {
    if (std::strcmp(text, aggregateName(a)) == 0) return a;
  }
  bad("-a", text);
}

}  // namespace

const char* aggregateName(Aggregate a) {
  switch (a) {
    case Aggregate::Min: return "min";
    case Aggregate::Max: return "max";
    case Aggregate::Avg: return "avg";
  }
  return "?";
}

Options parseOptions(int argc, char** argv) {
  flags::setTool("loom-perf");
  Options o;
  if (argc < 2) usage(2);
  o.collective = argv[1];
  if (o.collective == "-h" || o.collective == "--help") usage(0);
  if (!parseCollective(o.collective, o)) {
    std::fprintf(stderr, "loom-perf: unknown collective '%s'\n", o.collective.c_str());
    usage(2);
  }
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--test-corrupt-one") {
      o.corruptOne = true;
      continue;
    }
    if (a == "-h" || a == "--help") usage(0);
    if (i + 1 >= argc) {
      std::fprintf(stderr, "loom-perf: %s needs a value\n", a.c_str());
      usage(2);
    }
    const char* v = argv[++i];
    if (a == "-N" || a == "--np") o.np = parseInt("-N", v, 1);
    else if (a == "-n") o.iters = parseInt("-n", v, 1);
    else if (a == "-w") o.warmup = parseInt("-w", v, 0);
    else if (a == "-c") o.check = parseInt("-c", v, 0, 1);
    else if (a == "-b") o.minBytes = parseBytes("-b", v);
    else if (a == "-e") o.maxBytes = parseBytes("-e", v);
    else if (a == "-f") {
      char* end = nullptr;
      o.factor = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(o.factor >= 1) || o.factor > 1e6) bad("-f", v);
    } else if (a == "-i") o.increment = parseBytes("-i", v);
    else if (a == "-d") o.types = parseTypes(v);
    else if (a == "-o") o.ops = parseOps(v);
    else if (a == "-r") o.root = parseInt("-r", v, 0);
    else if (a == "-a") o.aggregate = parseAggregate(v);
    else if (a == "-I") o.perIteration = parseInt("-I", v, 0, 1) != 0;
    else if (a == "-F") o.freshInputs = parseInt("-F", v, 0, 1) != 0;
    else if (a == "-R") o.loomMemAlloc = parseInt("-R", v, 0, 1) != 0;
    else if (a == "-G") o.gpu = parseInt("-G", v, 0, 1) != 0;
    else if (a == "-W") o.windows = parseInt("-W", v, 0, 1) != 0;
    else if (a == "--algo") o.algo = v;
    else if (a == "--json") o.jsonFile = v;
    else if (a == "--csv") o.csvFile = v;
    else {
      std::fprintf(stderr, "loom-perf: unknown flag '%s'\n", a.c_str());
      usage(2);
    }
  }
  if (o.maxBytes < o.minBytes) o.maxBytes = o.minBytes;
  if (o.gpu && o.loomMemAlloc) {
    std::fprintf(stderr, "loom-perf: -G 1 and -R 1 exclude each other (loomMemAlloc's buffers are host memory)\n");
    usage(2);
  }
  if (o.windows && !o.gpu) {
    std::fprintf(stderr, "loom-perf: -W 1 registers the GPU buffers of -G 1 as windows: give -G 1 too\n");
    usage(2);
  }
  if (o.windows && o.coll != Coll::AllReduce && o.coll != Coll::AllGather && o.coll != Coll::ReduceScatter &&
      o.coll != Coll::AlltoAll) {
    std::fprintf(stderr, "loom-perf: -W 1 applies to all_reduce, all_gather, reduce_scatter and alltoall (windows are "
                         "the same size on every rank)\n");
    usage(2);
  }
  if (o.gpu && o.freshInputs) {
    std::fprintf(stderr, "loom-perf: -F 1 rewrites inputs from the host's cores, which -G 1 buffers are not in\n");
    usage(2);
  }
  return o;
}

const char* bufferSource(const Options& o) {
  return o.windows ? "cuda-windows" : o.gpu ? "cuda" : o.loomMemAlloc ? "loomMemAlloc" : "malloc";
}

}  // namespace loom::perf
