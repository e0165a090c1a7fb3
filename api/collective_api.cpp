// The collective half of <loom/loom.h>: argument checks, then the call joins
// the caller's group (or runs at once) through comm/engine/group.
#include <loom/loom.h>

#include <string>

#include "api/api_call.hpp"
#include "base/datatype.hpp"
#include "base/device/runtime.hpp"
#include "base/log.hpp"
#include "collectives/comm_state.hpp"
#include "collectives/call_path.hpp"
#include "collectives/run.hpp"
#include "comm/engine/group.hpp"

using loom::api::call;
using loom::api::ready;
using loom::api::requireNonNull;
using loom::coll::CollectiveKind;

namespace {

struct Request {
  CollectiveKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  loomDataType_t datatype;
  loomRedOp_t op = loomSum;
  int root = 0;
  bool rooted = false;
  bool reduces = false;
};

// Bytes of sendbuff and recvbuff this rank touches, and whether it reads
// and writes them (a root-only buffer is ignored elsewhere, as in NCCL).
struct Footprint {
  size_t sendBytes;
  size_t recvBytes;
  bool readsSend;
  bool writesRecv;
};

// The count argument's name in loom.h, for messages.
const char* countName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::Gather: return "sendcount";
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::Scatter: return "recvcount";
    default: return "count";
  }
}

// Applies the one size rule (bufferBytes) to each buffer the call spans.
Footprint footprint(const Request& q, int n, int rank) {
  const bool isRoot = rank == q.root;
  const char* name = countName(q.kind);
  const size_t block = loom::bufferBytes(q.count, q.datatype, name);
  const auto blocks = [&] { return loom::bufferBytes(q.count, q.datatype, name, static_cast<size_t>(n)); };
  switch (q.kind) {
    case CollectiveKind::Broadcast: return {block, block, isRoot, true};
    case CollectiveKind::Reduce: return {block, block, true, isRoot};
    case CollectiveKind::AllReduce: return {block, block, true, true};
    case CollectiveKind::ReduceScatter: return {blocks(), block, true, true};
    case CollectiveKind::AllGather: return {block, blocks(), true, true};
    case CollectiveKind::AlltoAll: return {blocks(), blocks(), true, true};
    case CollectiveKind::Gather: return {block, blocks(), true, isRoot};
    case CollectiveKind::Scatter: return {blocks(), block, isRoot, true};
  }
  return {};
}

// Buffers may be the same (in place) or, for the n-block collectives, the
// rank's own block of the other (NCCL's rule); any other overlap would be
// read after it was overwritten. The rule of each collective, as loom.h says it.
void checkOverlap(const Request& q, const Footprint& f, size_t block, int rank) {
  if (!f.readsSend || !f.writesRecv || f.sendBytes == 0 || f.recvBytes == 0) return;
  const auto* s = static_cast<const std::byte*>(q.sendbuff);
  const auto* r = static_cast<const std::byte*>(q.recvbuff);
  if (s + f.sendBytes <= r || r + f.recvBytes <= s) return;
  const size_t own = block * static_cast<size_t>(rank);  // on gather and scatter, rank is the root here
  const char* rule = "sendbuff == recvbuff";
  bool inPlace = false;
  switch (q.kind) {
    case CollectiveKind::AllGather: inPlace = s == r + own; rule = "sendbuff == recvbuff + rank * sendcount"; break;
    case CollectiveKind::Gather: inPlace = s == r + own; rule = "sendbuff == recvbuff + root * sendcount"; break;
    case CollectiveKind::ReduceScatter: inPlace = r == s + own; rule = "recvbuff == sendbuff + rank * recvcount"; break;
    case CollectiveKind::Scatter: inPlace = r == s + own; rule = "recvbuff == sendbuff + root * recvcount"; break;
    case CollectiveKind::AlltoAll:
      throw loom::Error(loomInvalidArgument, "sendbuff and recvbuff overlap: all-to-all does not run in place");
    default: inPlace = s == r; break;
  }
  if (!inPlace) {
    throw loom::Error(loomInvalidArgument, std::string("sendbuff and recvbuff overlap but are not in place (") +
                                               loom::coll::collectiveName(q.kind) + " in place is " + rule + ")");
  }
}

void submit(const Request& q, loomComm_t comm, loomStream_t stream) {
  if (loom::api::tracing()) {
    loom::api::traceArguments("sendbuff=%p recvbuff=%p %s=%zu datatype=%s op=%d root=%d stream=%p", q.sendbuff,
                              q.recvbuff, countName(q.kind), q.count, loom::datatypeName(q.datatype),
                              static_cast<int>(q.op), q.root, static_cast<void*>(stream));
  }
  loomComm& c = ready(comm);
  loom::LogRankScope scope(c.rank());
  const int n = c.size();
  if (q.rooted && (q.root < 0 || q.root >= n)) {
    throw loom::Error(loomInvalidArgument, "root=" + std::to_string(q.root) + " is not a rank of this communicator (0 to " +
                                               std::to_string(n - 1) + ")");
  }
  const Footprint f = footprint(q, n, c.rank());
  const size_t sendBytes = f.readsSend ? f.sendBytes : 0;
  const size_t recvBytes = f.writesRecv ? f.recvBytes : 0;
  const auto sendKind = loom::api::requireBuffer(q.sendbuff, sendBytes, "sendbuff");
  // In place, the same range is one question, not two (for device memory, a
  // cudaPointerGetAttributes each).
  const bool sameRange = q.recvbuff == q.sendbuff && recvBytes == sendBytes;
  const auto recvKind = sameRange ? sendKind : loom::api::requireBuffer(q.recvbuff, recvBytes, "recvbuff");
  checkOverlap(q, f, q.count * loom::datatypeSize(q.datatype), c.rank());
  auto& state = loom::coll::CommState::of(c);
  loom::coll::Collective collective{.kind = q.kind,
                                    .send = static_cast<const std::byte*>(q.sendbuff),
                                    .recv = static_cast<std::byte*>(q.recvbuff),
                                    .count = q.count,
                                    .type = q.datatype,
                                    .typeSize = loom::datatypeSize(q.datatype),
                                    .reduction = q.reduces ? state.ops.resolve(q.op, q.datatype) : loom::coll::Reduction{},
                                    .root = q.root,
                                    .sendKind = sendKind,
                                    .recvKind = recvKind,
                                    .sendBytes = sendBytes,
                                    .recvBytes = recvBytes};
  // The call's path, chosen once (collectives/call_path.hpp): on the stream
  // as device work, queued by this thread when its group ends, or the host's.
  const bool onCudaStream = loom::api::isCudaStream(stream);
  if (const auto path = loom::coll::choosePath(c, collective, stream, onCudaStream);
      path != loom::coll::CallPath::Host) {
    if (path == loom::coll::CallPath::Resident) loom::cuda::refuseCapture(loom::cuda::runtime(), stream);
    loom::group::submit({.comm = &c,
                         .stream = nullptr,
                         .what = loom::group::OnStream{.enqueue = [&c, collective, path, stream] {
                                                         loom::coll::runOnStream(c, collective, path, stream);
                                                       },
                                                       .resident = path == loom::coll::CallPath::Resident}});
    return;
  }
  // A blocking call outside a group runs here: no Call, no std::function to
  // allocate; but where the communicator has an entry gate every call is
  // numbered there (comm/engine/group.hpp).
  loom::HostStream* host = onCudaStream ? loom::api::callStream(stream) : stream;
  if (!loom::group::deferred(host) && !c.gated()) return loom::coll::runCollective(c, collective);
  loom::group::submit({.comm = &c,
                       .stream = host,
                       .what = loom::group::Collective{[&c, collective] { loom::coll::runCollective(c, collective); }},
                       .cudaStream = onCudaStream});
}

}  // namespace

extern "C" {

loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar, loomDataType_t datatype,
                                      loomScalarResidence_t residence, loomComm_t comm) {
  return call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    requireNonNull(op, "op");
    requireNonNull(scalar, "scalar");
    loom::datatypeSize(datatype);
    *op = loom::coll::CommState::of(c).ops.create(scalar, datatype, residence);
  });
}

loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm) {
  return call(__func__, comm, [&] { loom::coll::CommState::of(ready(comm)).ops.destroy(op); });
}

loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::Broadcast, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
            .datatype = datatype, .root = root, .rooted = true},
           comm, stream);
  });
}

loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        int root, loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::Reduce, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
            .datatype = datatype, .op = op, .root = root, .rooted = true, .reduces = true},
           comm, stream);
  });
}

loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::AllReduce, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
            .datatype = datatype, .op = op, .reduces = true},
           comm, stream);
  });
}

loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::ReduceScatter, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = recvcount,
            .datatype = datatype, .op = op, .reduces = true},
           comm, stream);
  });
}

loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::AllGather, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = sendcount,
            .datatype = datatype},
           comm, stream);
  });
}

loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                          loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::AlltoAll, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
            .datatype = datatype},
           comm, stream);
  });
}

loomResult_t loomGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype, int root,
                        loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::Gather, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = sendcount,
            .datatype = datatype, .root = root, .rooted = true},
           comm, stream);
  });
}

loomResult_t loomScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype, int root,
                         loomComm_t comm, loomStream_t stream) {
  return call(__func__, comm, [&] {
    submit({.kind = CollectiveKind::Scatter, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = recvcount,
            .datatype = datatype, .root = root, .rooted = true},
           comm, stream);
  });
}

}  // extern "C"
