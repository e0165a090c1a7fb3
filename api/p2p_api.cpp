// The point-to-point half of <loom/loom.h>: send, receive, groups, host streams and their events.
#include <loom/loom.h>

#include "api/api_call.hpp"
#include "base/datatype.hpp"
#include "base/device/runtime.hpp"
#include "base/log.hpp"
#include "comm/engine/group.hpp"
#include "comm/engine/event.hpp"
#include "comm/engine/stream.hpp"

using loom::api::call;
using loom::api::hostStream;
using loom::api::liveEvent;
using loom::api::ready;
using loom::api::requireNonNull;

namespace {

void submit(loom::OpKind kind, const void* buffer, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
            loomStream_t stream) {
  if (loom::api::tracing()) {
    loom::api::traceArguments("buff=%p count=%zu datatype=%s peer=%d stream=%p", buffer, count,
                              loom::datatypeName(datatype), peer, static_cast<void*>(stream));
  }
  loomComm& c = ready(comm);
  loom::LogRankScope scope(c.rank());
  const size_t bytes = loom::bufferBytes(count, datatype);
  const char* name = kind == loom::OpKind::Send ? "sendbuff" : "recvbuff";
  const auto memoryKind = loom::api::requireBuffer(buffer, bytes, name);
  if (peer < 0 || peer >= c.size()) {
    throw loom::Error(loomInvalidArgument, "peer=" + std::to_string(peer) + " is not a rank of this communicator (0 to " +
                                               std::to_string(c.size() - 1) + ")");
  }
  // Device memory on a CUDA stream between ranks whose devices reach each
  // other's: queued on the stream itself, with no host thread.
  if (loom::runsResident(c.resident(), memoryKind, bytes, loom::api::isCudaStream(stream))) {
    loom::cuda::refuseCapture(loom::cuda::runtime(), stream);
    loom::group::submit({.comm = &c,
                         .stream = nullptr,
                         .what = loom::group::ResidentPointToPoint{
                             .op = {.send = kind == loom::OpKind::Send,
                                    .peer = peer,
                                    .buffer = static_cast<std::byte*>(const_cast<void*>(buffer)),
                                    .bytes = bytes},
                             .stream = stream}});
    return;
  }
  loom::group::submit({.comm = &c,
                       .stream = loom::api::callStream(stream),
                       .what = loom::group::PointToPoint{.kind = kind,
                                                         .peer = peer,
                                                         .buffer = static_cast<std::byte*>(const_cast<void*>(buffer)),
                                                         .bytes = bytes,
                                                         .device = memoryKind == loom::memory::MemoryKind::CudaDevice},
                       .cudaStream = loom::api::isCudaStream(stream)});
}

}  // namespace

extern "C" {

loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return call(__func__, comm, [&] { submit(loom::OpKind::Send, sendbuff, count, datatype, peer, comm, stream); });
}

loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return call(__func__, comm, [&] { submit(loom::OpKind::Recv, recvbuff, count, datatype, peer, comm, stream); });
}

loomResult_t loomGroupStart(void) {
  return call(__func__, nullptr, [] { loom::group::start(); });
}

loomResult_t loomGroupEnd(void) {
  bool inProgress = false;
  const loomResult_t result = call(__func__, nullptr, [&] { inProgress = loom::group::end(); });
  return result == loomSuccess && inProgress ? loomInProgress : result;
}

loomResult_t loomStreamCreate(loomStream_t* stream) {
  return call(__func__, nullptr, [&] {
    requireNonNull(stream, "stream");
    *stream = new loomStreamImpl();
  });
}

loomResult_t loomStreamSynchronize(loomStream_t stream) {
  return call(__func__, nullptr, [&] {
    requireNonNull(stream, "stream");
    hostStream(stream)->synchronize();
  });
}

loomResult_t loomStreamDestroy(loomStream_t stream) {
  return call(__func__, nullptr, [&] {
    requireNonNull(stream, "stream");
    delete static_cast<loomStreamImpl*>(hostStream(stream));
  });
}

loomResult_t loomEventCreate(loomEvent_t* event) {
  return call(__func__, nullptr, [&] {
    requireNonNull(event, "event");
    *event = new loomEventImpl();
  });
}

loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream) {
  return call(__func__, nullptr, [&] { liveEvent(event).record(hostStream(stream)); });
}

loomResult_t loomEventQuery(loomEvent_t event) {
  bool done = false;
  const loomResult_t result = call(__func__, nullptr, [&] { done = liveEvent(event).done(); });
  return result == loomSuccess && !done ? loomInProgress : result;
}

loomResult_t loomEventSynchronize(loomEvent_t event) {
  return call(__func__, nullptr, [&] { liveEvent(event).synchronize(); });
}

loomResult_t loomStreamWaitEvent(loomStream_t stream, loomEvent_t event) {
  return call(__func__, nullptr, [&] {
    requireNonNull(stream, "stream");
    liveEvent(event).waitOn(*hostStream(stream));
  });
}

loomResult_t loomEventDestroy(loomEvent_t event) {
  return call(__func__, nullptr, [&] { delete static_cast<loomEventImpl*>(&liveEvent(event)); });
}

}  // extern "C"
