// Owners of UCX's handles, for the UCX transport alone: a UCP context per
// transport (one per communicator) and a worker with one endpoint per
// connection end. Only transport/ucx/ includes this header; nothing above
// the transport sees a UCX type.
//
// Why a worker per connection end and not one per communicator: Loom's
// connections are progressed by whichever thread uses them (the caller of a
// collective, a stream's worker, the progress engine), and one worker shared
// by those threads needs UCS_THREAD_MODE_MULTI, a lock on every call. A
// worker of its own makes each connection serial, as the interface promises;
// a sending end's worker is shared only with the transport's drainer
// (drainer.hpp), which takes it while its connection is idle (Worker::use).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace loom::transport::ucx {

// "what: <UCX's words>" as a loom::Error of `code`.
[[noreturn]] void fail(loomResult_t code, const std::string& what, ucs_status_t status);

// One UCP context: the UCX_* variables read once, the tag matching and
// wake-up features, workers of several threads sharing it.
class UcpContext {
 public:
  // `messageBytes`: the largest message the transport sends (a slot and its tag).
  explicit UcpContext(size_t messageBytes);
  ~UcpContext();
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;
  ucp_context_h get() const { return context_; }

  // UCX's own headers beside a message in one tcp segment, with room to spare.
  static constexpr size_t kSegmentHeadroom = 1024;
  // Larger slots go in several segments.
  static constexpr size_t kMaxSegmentBytes = size_t{4} << 20;

 private:
  ucp_context_h context_ = nullptr;
};

// How an endpoint learns its peer died. Across hosts UCX reports it
// (UCP_ERR_HANDLING_MODE_PEER); on one host that mode would drop UCX's
// shared-memory lanes (seen with UCX 1.13), so there the control socket,
// which Loom keeps for every connection, is what tells.
enum class PeerErrors { Reported, ByControlSocket };

// A worker and, on a connection's sending end, its one endpoint to the
// receiving end's worker.
class Worker {
 public:
  explicit Worker(std::shared_ptr<UcpContext> context);
  // Closes the endpoint (flushing what was sent first, for at most
  // kCloseWait, unless told not to) and destroys the worker. Cancel the
  // requests that point into your buffers first (cancel()).
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // This worker's address, for the peer's ucp_ep_create.
  std::vector<std::byte> address() const;
  // Creates the endpoint to the worker at `peerAddress` (the sending end).
  void connect(std::span<const std::byte> peerAddress, PeerErrors errors, const std::string& peerName);

  // The worker for the calling thread alone while the lock is held: a
  // connection's own thread takes it for every call into UCX, the
  // transport's Drainer only once the worker has been left alone a while.
  std::unique_lock<std::mutex> use() {
    std::unique_lock lock(mutex_);
    lastUse_.store(std::chrono::steady_clock::now(), std::memory_order_relaxed);
    return lock;
  }
  std::mutex& mutex() { return mutex_; }
  // When use() last took the worker.
  std::chrono::steady_clock::time_point lastUse() const { return lastUse_.load(std::memory_order_relaxed); }

  ucp_worker_h get() const { return worker_; }
  ucp_ep_h endpoint() const { return endpoint_; }
  // True if it moved anything.
  bool progress() { return ucp_worker_progress(worker_) != 0; }
  // The worker's event fd, armed: poll() on it wakes when something
  // arrives. -1 when events are pending (progress first) or there is none.
  int armedFd();
  // Why UCX says the peer is gone, once it has; empty before.
  const std::string& failure() const { return failure_; }
  // Nothing sent needs to reach the peer (it is gone, or what was sent is
  // worthless now): close without a flush, which would wait for it.
  void closeWithoutFlush() { flushOnClose_ = false; }

  // Cancels `requests` (the caller's, still posted) and waits, at most
  // kCloseWait, for UCX to let go of their buffers; frees them.
  void cancel(std::span<void*> requests);

  static constexpr auto kCloseWait = std::chrono::milliseconds(2000);

 private:
  static void onError(void* self, ucp_ep_h ep, ucs_status_t status);
  // Progresses until `request` completes or `deadline` passes; frees it.
  // False if the deadline passed first.
  bool waitFor(void* request, std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<UcpContext> context_;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h endpoint_ = nullptr;
  int efd_ = -1;
  std::string failure_;
  bool flushOnClose_ = true;
  std::mutex mutex_;
  std::atomic<std::chrono::steady_clock::time_point> lastUse_{};
};

// A request's state: UCS_OK once complete (and freed), UCS_INPROGRESS, or
// the error it ended with (freed too). nullptr (completed at once) is UCS_OK.
ucs_status_t poll(void*& request);

// Whether UCX_TLS (`ucxTls`: UCX's list of transports and aliases, "^..." to
// exclude them, nullptr when unset) leaves UCX its tcp transport. Loom's tcp
// settings go only where it does: UCX warns of each setting no transport took.
bool tcpMayRun(const char* ucxTls);

// Whether UCX has an RDMA device to use here (/sys/class/infiniband is not
// empty): the registry then prefers UCX to sockets across hosts.
bool rdmaDevicePresent();

}  // namespace loom::transport::ucx
