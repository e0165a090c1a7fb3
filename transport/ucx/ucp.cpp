#include "transport/ucx/ucp.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "base/log.hpp"

namespace loom::transport::ucx {

void fail(loomResult_t code, const std::string& what, ucs_status_t status) {
  throw Error(code, what + ": " + ucs_status_string(status));
}

bool tcpMayRun(const char* ucxTls) {
  if (ucxTls == nullptr || *ucxTls == '\0') return true;
  const bool excluding = ucxTls[0] == '^';
  std::string_view list(ucxTls + (excluding ? 1 : 0));
  bool named = false;
  while (!named && !list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = list.substr(0, comma);
    const std::string_view name = entry.substr(0, entry.find(':'));  // "tcp:aux" names tcp too
    named = name == "tcp" || (!excluding && name == "all");
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return excluding ? !named : named;
}

UcpContext::UcpContext(size_t messageBytes) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);  // UCX_* pass through untouched
  if (status != UCS_OK) fail(loomSystemError, "reading UCX's configuration", status);
  // tcp's segments hold a whole slot, unless the user says otherwise: with
  // UCX's 8 KiB each 512 KiB slot is 64 sends, each its own packets, and
  // across namespaces whole slots were 2-3x faster at every size, for about
  // 4 MB more a rank with three peers (bench/RESULTS.md, 2026-11-25 evening).
  if (std::getenv("UCX_TCP_TX_SEG_SIZE") == nullptr && std::getenv("UCX_TCP_RX_SEG_SIZE") == nullptr &&
      tcpMayRun(std::getenv("UCX_TLS"))) {
    const std::string segment = std::to_string(std::min(messageBytes + kSegmentHeadroom, kMaxSegmentBytes));
    // The tcp transport's own names: ucp_config_modify finds them without the TCP_ prefix.
    if (ucp_config_modify(config, "TX_SEG_SIZE", segment.c_str()) != UCS_OK ||
        ucp_config_modify(config, "RX_SEG_SIZE", segment.c_str()) != UCS_OK) {
      LOOM_INFO(Net, "UCX has no tcp segment size to set; its default stays");
    }
  }
  // Eager for every size, unless the user says otherwise: a slot is at most
  // slotBytes and has a receive posted for it before it is sent (credits),
  // so the rendezvous' handshake buys nothing here, and it costs: over tcp
  // a 16 MiB sendrecv moved 0.97 GB/s with it and 1.30-1.37 without; and a
  // rendezvous left half-done toward a peer across a dark link made UCX
  // 1.13 abort the process when the receiving worker was destroyed.
  if (std::getenv("UCX_RNDV_THRESH") == nullptr) ucp_config_modify(config, "RNDV_THRESH", "inf");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;  // connections' workers live on several threads
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) fail(loomSystemError, "initializing UCX (ucp_init)", status);
}

UcpContext::~UcpContext() { ucp_cleanup(context_); }

Worker::Worker(std::shared_ptr<UcpContext> context) : context_(std::move(context)) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t status = ucp_worker_create(context_->get(), &params, &worker_);
  if (status != UCS_OK) fail(loomSystemError, "creating a UCX worker", status);
  if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;  // waits then sleep in short steps
}

Worker::~Worker() {
  if (endpoint_ != nullptr) {
    // A flush first, while the peer may be there: what was sent leaves
    // this process before its control socket closes and tells the peer
    // this end is gone. Then a forced close: a close that flushes waits for
    // the peer's worker to answer, and the peer may be closing its own
    // connections in another order (each side then waits out the other).
    ucp_request_param_t param{};
    if (failure_.empty() && flushOnClose_) {
      void* flush = ucp_ep_flush_nbx(endpoint_, &param);
      if (!UCS_PTR_IS_ERR(flush) && !waitFor(flush, std::chrono::steady_clock::now() + kCloseWait)) {
        LOOM_WARN(Net, "a UCX endpoint did not flush within %lld ms", static_cast<long long>(kCloseWait.count()));
      }
    }
    // A forced close ends what is still in flight (with an error) without
    // the peer; the worker may go only once it has, or UCX aborts.
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* close = ucp_ep_close_nbx(endpoint_, &param);
    if (!UCS_PTR_IS_ERR(close) && !waitFor(close, std::chrono::steady_clock::now() + kCloseWait)) {
      LOOM_WARN(Net, "a UCX endpoint did not close within %lld ms", static_cast<long long>(kCloseWait.count()));
    }
  }
  ucp_worker_destroy(worker_);  // releases whatever is left
}

std::vector<std::byte> Worker::address() const {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  ucs_status_t status = ucp_worker_get_address(worker_, &address, &length);
  if (status != UCS_OK) fail(loomSystemError, "getting a UCX worker's address", status);
  std::vector<std::byte> out(length);
  std::memcpy(out.data(), address, length);
  ucp_worker_release_address(worker_, address);
  return out;
}

void Worker::connect(std::span<const std::byte> peerAddress, PeerErrors errors, const std::string& peerName) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  params.err_mode = errors == PeerErrors::Reported ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  if (errors == PeerErrors::Reported) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_handler = {.cb = &Worker::onError, .arg = this};
  }
  ucs_status_t status = ucp_ep_create(worker_, &params, &endpoint_);
  if (status != UCS_OK) fail(loomRemoteError, "creating a UCX endpoint to " + peerName, status);
}

void Worker::onError(void* self, ucp_ep_h, ucs_status_t status) {
  auto* worker = static_cast<Worker*>(self);
  worker->failure_ = std::string("UCX reports the connection failed (") + ucs_status_string(status) + ")";
}

int Worker::armedFd() {
  if (efd_ < 0) return -1;
  return ucp_worker_arm(worker_) == UCS_OK ? efd_ : -1;  // UCS_ERR_BUSY: events to progress first
}

void Worker::cancel(std::span<void*> requests) {
  const auto deadline = std::chrono::steady_clock::now() + kCloseWait;
  for (void* request : requests) {
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) ucp_request_cancel(worker_, request);
  }
  for (void*& request : requests) {
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) waitFor(request, deadline);
    request = nullptr;
  }
}

bool Worker::waitFor(void* request, std::chrono::steady_clock::time_point deadline) {
  if (request == nullptr) return true;
  while (ucp_request_check_status(request) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
  }
  const bool done = ucp_request_check_status(request) != UCS_INPROGRESS;
  ucp_request_free(request);  // UCX releases it once complete, if it is not yet
  return done;
}

ucs_status_t poll(void*& request) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  const ucs_status_t status = ucp_request_check_status(request);
  if (status == UCS_INPROGRESS) return status;
  ucp_request_free(request);
  request = nullptr;
  return status;
}

bool rdmaDevicePresent() {
  DIR* dir = ::opendir("/sys/class/infiniband");
  if (dir == nullptr) return false;
  bool found = false;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') found = true;
  }
  ::closedir(dir);
  return found;
}

}  // namespace loom::transport::ucx
