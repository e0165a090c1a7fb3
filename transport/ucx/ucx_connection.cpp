#include "transport/ucx/ucx_connection.hpp"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"

namespace loom::transport::ucx {
namespace {

constexpr ucp_tag_t kEveryBit = ~ucp_tag_t{0};

// Half the FIFO: the sender reads credits only once that many wait for them
// (and when it is full), as a recv() per progress call would cost more than
// the sends it paces; the receiver writes them that often after short slots
// (UcxRecvConnection::sendCredit).
uint64_t halfFifo(const FifoShape& shape) { return std::max<uint64_t>(1, shape.slots / 2); }

void addFds(const net::Socket& control, Worker& worker, std::vector<WaitFd>& out) {
  out.push_back({control.fd(), POLLIN});
  if (const int fd = worker.armedFd(); fd >= 0) out.push_back({fd, POLLIN});
}

}  // namespace

UcxSendConnection::UcxSendConnection(std::unique_ptr<Worker> worker, net::Socket control, FifoShape shape,
                                     const Cancellation* cancel, std::shared_ptr<Drainer> drainer)
    : shape_(shape),
      control_(std::move(control)),
      storage_(shape),
      sends_(shape.slots, nullptr),
      cancel_(cancel),
      drainer_(std::move(drainer)),
      worker_(std::move(worker)) {
  drainer_->add(worker_.get());
}

UcxSendConnection::~UcxSendConnection() {
  drainer_->remove(worker_.get());
  // A peer gone, or a communicator revoked or aborted (its link may be the
  // dark one): a flush would wait in vain.
  if (!closed_.empty() || control_.peerClosed() || (cancel_ != nullptr && cancel_->cancelled())) {
    worker_->closeWithoutFlush();
  }
  // Sends still in flight finish in the endpoint's flush (or go with it,
  // the peer gone); storage_ outlives the worker.
  for (void*& send : sends_) {
    if (send != nullptr) ucp_request_free(send);
    send = nullptr;
  }
}

bool UcxSendConnection::readCredits() {
  bool any = false;
  while (closed_.empty()) {
    size_t n = 0;
    try {
      n = control_.recvSome(std::as_writable_bytes(std::span(&credit_, 1)).subspan(creditBytes_));
    } catch (const Error& e) {
      closed_ = e.what();  // checkAlive decides whether that matters
      break;
    }
    if (n == 0) break;
    creditBytes_ += n;
    if (creditBytes_ == sizeof credit_) {
      if (credit_ > head_) throw Error(loomRemoteError, peerName() + " released slots never sent over UCX");
      credited_ = std::max(credited_, credit_);
      creditBytes_ = 0;
      any = true;
    }
  }
  return any;
}

bool UcxSendConnection::reapSends() {
  bool finished = false;
  for (void*& send : sends_) {
    if (send == nullptr) continue;
    const ucs_status_t status = poll(send);
    if (status == UCS_INPROGRESS) continue;
    --inFlight_;
    finished = true;
    if (status != UCS_OK) fail(loomRemoteError, "sending to " + peerName(), status);
  }
  return finished;
}

std::span<std::byte> UcxSendConnection::reserve() {
  const auto use = worker_->use();
  if (head_ - credited_ >= shape_.slots && (readCredits(), head_ - credited_ >= shape_.slots)) return {};
  void*& previous = sends_[head_ % shape_.slots];
  if (previous != nullptr && (reapSends(), previous != nullptr)) return {};
  return {storage_[head_], shape_.slotBytes};
}

void UcxSendConnection::commit(SlotTag tag) {
  const auto use = worker_->use();
  tag.sequence = static_cast<uint32_t>(head_);
  std::byte* data = storage_[head_];
  std::memcpy(data + tag.bytes, &tag, sizeof tag);
  ucp_request_param_t param{};  // bytes, no callback: reapSends polls
  void* request = ucp_tag_send_nbx(worker_->endpoint(), data, tag.bytes + sizeof tag, head_, &param);
  if (UCS_PTR_IS_ERR(request)) fail(loomRemoteError, "sending to " + peerName(), UCS_PTR_STATUS(request));
  if (request != nullptr) {
    sends_[head_ % shape_.slots] = request;
    ++inFlight_;
  }
  ++head_;
}

bool UcxSendConnection::progress() {
  const auto use = worker_->use();
  bool moved = worker_->progress();
  if (inFlight_ > 0) moved |= reapSends();
  if (head_ - credited_ >= halfFifo(shape_)) moved |= readCredits();
  return moved;
}

void UcxSendConnection::checkAlive() {
  const auto use = worker_->use();
  // A peer that took every slot and left finished its part before this
  // rank: only sends in flight, or a full FIFO waiting for credits, need it.
  if (inFlight_ == 0 && head_ - credited_ < shape_.slots) return;
  if (!worker_->failure().empty()) throw Error(loomRemoteError, peerName() + ": " + worker_->failure());
  readCredits();
  if (!closed_.empty()) throw Error(loomRemoteError, peerName() + " closed the connection or died (" + closed_ + ")");
}

void UcxSendConnection::addWaitFds(std::vector<WaitFd>& out) const {
  const auto use = worker_->use();
  addFds(control_, *worker_, out);
}

UcxRecvConnection::UcxRecvConnection(std::unique_ptr<Worker> worker, net::Socket control, FifoShape shape)
    : shape_(shape),
      control_(std::move(control)),
      storage_(shape),
      slots_(shape.slots),
      worker_(std::move(worker)) {
  for (uint64_t slot = 0; slot < shape_.slots; ++slot) post(slot);
}

UcxRecvConnection::~UcxRecvConnection() {
  std::vector<void*> posted;
  for (Slot& s : slots_) {
    if (s.request != nullptr) posted.push_back(s.request);
    s.request = nullptr;
  }
  worker_->cancel(posted);
}

void UcxRecvConnection::post(uint64_t slot) {
  Slot& s = slots_[slot % shape_.slots];
  s = Slot{};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO;
  param.recv_info.tag_info = &s.info;
  void* request =
      ucp_tag_recv_nbx(worker_->get(), storage_[slot], shape_.slotBytes + sizeof(SlotTag), slot, kEveryBit, &param);
  if (UCS_PTR_IS_ERR(request)) fail(loomRemoteError, "receiving from " + peerName(), UCS_PTR_STATUS(request));
  if (request == nullptr) {
    s.arrived = true;  // it was already here
  } else {
    s.request = request;
  }
}

bool UcxRecvConnection::oldestArrived() {
  Slot& s = slots_[tail_ % shape_.slots];
  if (s.arrived) return true;
  const ucs_status_t status = ucp_tag_recv_request_test(s.request, &s.info);
  if (status == UCS_INPROGRESS) return false;
  ucp_request_free(s.request);
  s.request = nullptr;
  if (status != UCS_OK) fail(loomRemoteError, "receiving from " + peerName(), status);  // a truncation too
  s.arrived = true;
  return true;
}

std::optional<RecvSlot> UcxRecvConnection::peek() {
  if (!oldestArrived()) return std::nullopt;
  const size_t length = slots_[tail_ % shape_.slots].info.length;
  SlotTag tag;
  if (length < sizeof tag) {
    throw Error(loomRemoteError, peerName() + " sent a UCX message of " + std::to_string(length) +
                                     " bytes, too short for a slot");
  }
  std::memcpy(&tag, storage_[tail_] + length - sizeof tag, sizeof tag);
  if (tag.bytes != length - sizeof tag || tag.sequence != static_cast<uint32_t>(tail_)) {
    throw Error(loomRemoteError, peerName() + " sent a malformed slot over UCX (" + std::to_string(tag.bytes) +
                                     " bytes, slot " + std::to_string(tag.sequence) + ", expected slot " +
                                     std::to_string(static_cast<uint32_t>(tail_)) + ")");
  }
  return RecvSlot{.data = {storage_[tail_], tag.bytes}, .tag = tag};
}

void UcxRecvConnection::release() {
  streaming_ = slots_[tail_ % shape_.slots].info.length == shape_.slotBytes + sizeof(SlotTag);
  post(tail_ + shape_.slots);  // the slot just read waits for its next use
  ++tail_;
  sendCredit();
}

void UcxRecvConnection::sendCredit() {
  if (creditBytes_ == sizeof credit_) {  // none half-written
    // A full slot is part of a message larger than a slot, whose sender
    // waits for each credit to send more: it gets each at once. After a
    // short one (a message's end, or a small message) they wait until half
    // the FIFO is free: a write per small message cost 10 us of latency.
    if (tail_ - creditSent_ < (streaming_ ? 1 : halfFifo(shape_))) return;
    credit_ = tail_;
    creditBytes_ = 0;
  }
  const auto bytes = std::as_bytes(std::span(&credit_, 1)).subspan(creditBytes_);
  creditBytes_ += control_.sendSome(bytes, {});  // a lost peer throws, naming it
  if (creditBytes_ == sizeof credit_) creditSent_ = credit_;
}

bool UcxRecvConnection::progress() {
  const bool moved = worker_->progress();
  sendCredit();
  return moved;
}

void UcxRecvConnection::checkAlive() {
  if (oldestArrived()) return;  // slots that came before the peer left are still ours to read
  if (!control_.peerClosed()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!closedAt_) closedAt_ = now;
  if (now - *closedAt_ < kGrace) return;
  throw Error(loomRemoteError, peerName() + " closed the connection or died");
}

void UcxRecvConnection::addWaitFds(std::vector<WaitFd>& out) const { addFds(control_, *worker_, out); }

}  // namespace loom::transport::ucx
