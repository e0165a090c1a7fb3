#include "transport/ibverbs/ib_connection.hpp"

#include <poll.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/backoff.hpp"
#include "base/deadline.hpp"
#include "base/error.hpp"

namespace loom::transport::ibverbs {
namespace {

constexpr size_t kPage = 4096;

// What a work request was, in its id's top byte; the rest is its number.
enum class Work : uint64_t { Data = 1, Credit = 2, Receive = 3 };
constexpr int kKindShift = 56;
uint64_t wrId(Work kind, uint64_t number) { return (static_cast<uint64_t>(kind) << kKindShift) | (number & ((uint64_t{1} << kKindShift) - 1)); }
Work kindOf(uint64_t id) { return static_cast<Work>(id >> kKindShift); }
uint64_t numberOf(uint64_t id) { return id & ((uint64_t{1} << kKindShift) - 1); }

// A 64-bit count from its low 32 bits, given a count it is at least.
uint64_t widen(uint64_t atLeast, uint32_t low) { return atLeast + static_cast<uint32_t>(low - static_cast<uint32_t>(atLeast)); }

std::string describe(const Completion& c, const std::string& peer, const QueuePairEnd& end) {
  std::string what = wcStatusName(c.status);
  if (c.status == WcStatus::Other) what += " (ibv_wc_status " + std::to_string(c.vendor) + ")";
  return "the RDMA connection with " + peer + " failed: " + what + " [" + end.where() + "]";
}

}  // namespace

void PageAlignedBytes::Free::operator()(std::byte* p) const { std::free(p); }

PageAlignedBytes::PageAlignedBytes(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  data_.reset(static_cast<std::byte*>(std::aligned_alloc(kPage, rounded)));
  if (!data_) throw Error(loomSystemError, "out of memory for a " + std::to_string(bytes) + "-byte RDMA FIFO");
}

RegisteredFifo::RegisteredFifo(Device& device, const FifoShape& shape, bool remoteWrite)
    : slots(shape.slots),
      slotBytes(shape.slotBytes),
      bytes(size_t{shape.slots} * (kHeaderBytes + shape.slotBytes)),
      region(device.registerMemory(bytes.data(), bytes.size(), remoteWrite)) {
  // Headers zeroed, since a tag's padding goes on the wire with it; payloads
  // not: a payload byte is read only once written, and zeroing 4 MiB a FIFO
  // cost each connection more than the rest of its set-up.
  for (uint32_t s = 0; s < slots; ++s) std::memset(slot(s), 0, kHeaderBytes);
}

QueuePairEnd::QueuePairEnd(std::shared_ptr<Device> d, int sendDepth, int recvDepth)
    : device(std::move(d)), cq(device->createCq(sendDepth + recvDepth)), qp(device->createQp(*cq, sendDepth, recvDepth)) {}

void QueuePairEnd::postReceives(uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) qp->postRecv(wrId(Work::Receive, i));
}

std::span<const Completion> QueuePairEnd::poll(std::span<Completion> out, const std::string& peer, std::string& failure) {
  const size_t n = cq->poll(out);
  for (size_t i = 0; i < n; ++i) {
    if (out[i].status == WcStatus::Success) continue;
    failure = describe(out[i], peer, *this);
    throw Error(loomRemoteError, failure);
  }
  return out.first(n);
}

std::string QueuePairEnd::where() const {
  char qpn[16];
  std::snprintf(qpn, sizeof qpn, "0x%x", qp->qpn());
  return device->name() + ":" + std::to_string(device->port()) + " qp " + qpn;
}

IbSendConnection::IbSendConnection(std::shared_ptr<Device> device, std::unique_ptr<RegisteredFifo> staging,
                                   std::unique_ptr<QueuePairEnd> end, RemoteFifo remote,
                                   std::shared_ptr<RegistrationCache> cache, Link link, FifoShape shape)
    : device_(std::move(device)),
      shape_(shape),
      staging_(std::move(staging)),
      remote_(remote),
      cache_(std::move(cache)),
      link_(std::move(link)),
      lent_(shape.slots),
      end_(std::move(end)) {}

IbSendConnection::~IbSendConnection() = default;

std::span<std::byte> IbSendConnection::reserve() {
  if (!failure_.empty() || head_ - credited_ >= shape_.slots || head_ - completed_ >= shape_.slots) return {};
  return {staging_->slot(head_) + kHeaderBytes, shape_.slotBytes};
}

void IbSendConnection::post(SlotTag tag, std::span<const Sge> payload) {
  tag.sequence = static_cast<uint32_t>(head_);
  std::byte* header = staging_->slot(head_);
  std::memcpy(header, &tag, sizeof tag);
  Sge sges[2];
  size_t n = 0;
  if (payload.empty()) {
    // Header and payload are one piece in the staging slot.
    sges[n++] = {reinterpret_cast<uint64_t>(header), static_cast<uint32_t>(kHeaderBytes + tag.bytes), staging_->region->lkey()};
  } else {
    sges[n++] = {reinterpret_cast<uint64_t>(header), static_cast<uint32_t>(kHeaderBytes), staging_->region->lkey()};
    sges[n++] = payload.front();
  }
  const uint64_t slotAddress = remote_.address + (head_ % shape_.slots) * (kHeaderBytes + shape_.slotBytes);
  end_->qp->postWrite({.wrId = wrId(Work::Data, head_),
                       .sges = std::span<const Sge>(sges, n),
                       .remoteAddress = slotAddress,
                       .rkey = remote_.rkey,
                       .imm = static_cast<uint32_t>(head_)});
  ++head_;
}

void IbSendConnection::commit(SlotTag tag) { post(tag, {}); }

void IbSendConnection::commitFrom(std::span<const std::byte> data, SlotTag tag) {
  auto region = tag.bytes == 0 ? nullptr : cache_->find(data.data(), tag.bytes);
  if (region == nullptr) {
    std::memcpy(staging_->slot(head_) + kHeaderBytes, data.data(), tag.bytes);
    return commit(tag);
  }
  const Sge payload{reinterpret_cast<uint64_t>(data.data()), tag.bytes, region->lkey()};
  lent_[head_ % shape_.slots] = std::move(region);
  lentUntil_ = head_ + 1;
  post(tag, std::span(&payload, 1));
}

void IbSendConnection::keepPayloads() {
  const auto deadline = Deadline::after(link_.timeout);
  Backoff backoff;
  while (completed_ < lentUntil_) {
    if (progress()) {
      backoff.reset();
      continue;
    }
    backoff.idle(
        [&](Backoff::Phase) {
          if (link_.cancel != nullptr) link_.cancel->throwIfCancelled("an RDMA write to " + peerName());
          if (deadline.expired()) {
            throw Error(loomTimeout, "the device did not finish RDMA writes to " + peerName() + " within " +
                                         std::to_string(link_.timeout.count()) + " ms");
          }
        },
        [&](std::chrono::microseconds timeout) {
          end_->cq->arm();  // the device's completions need no peer: only they are waited for
          pollfd p{end_->cq->eventFd(), POLLIN, 0};
          const timespec sleep = toTimespec(timeout);
          ::ppoll(&p, 1, &sleep, nullptr);
        });
  }
}

bool IbSendConnection::progress() {
  if (!failure_.empty()) throw Error(loomRemoteError, failure_);
  end_->cq->takeEvents();  // an event only wakes a sleeper; the completions are polled here
  bool moved = false;
  Completion cs[16];
  for (auto done = end_->poll(cs, peerName(), failure_); !done.empty(); done = end_->poll(cs, peerName(), failure_)) {
    moved = true;
    for (const Completion& c : done) {
      if (kindOf(c.wrId) == Work::Data) {
        // Writes of one queue pair complete in the order they were posted.
        if (numberOf(c.wrId) != (completed_ & ((uint64_t{1} << kKindShift) - 1))) {
          failure_ = "RDMA writes to " + peerName() + " completed out of order [" + end_->where() + "]";
          throw Error(loomInternalError, failure_);
        }
        lent_[completed_ % shape_.slots].reset();
        ++completed_;
      } else {
        credited_ = std::max(credited_, widen(credited_, c.imm));
        end_->qp->postRecv(c.wrId);
      }
    }
  }
  return moved;
}

void IbSendConnection::checkAlive() {
  if (!failure_.empty()) throw Error(loomRemoteError, failure_);
  progress();  // acknowledgements that came before the peer left count
  if (flushed()) return;
  if (link_.control.peerClosed()) throw Error(loomRemoteError, peerName() + " closed the connection or died");
}

void IbSendConnection::addWaitFds(std::vector<WaitFd>& out) const {
  // Armed now, polled again by the waiter's next progress(): a completion
  // between the last poll and the arm wakes no one, but the sleep it then
  // costs is bounded (Backoff::kSleep).
  end_->cq->arm();
  out.push_back({end_->cq->eventFd(), POLLIN});
  out.push_back({link_.control.fd(), POLLIN});
}

IbRecvConnection::IbRecvConnection(std::shared_ptr<Device> device, std::unique_ptr<RegisteredFifo> fifo,
                                   std::unique_ptr<QueuePairEnd> end, Link link, FifoShape shape)
    : device_(std::move(device)),
      shape_(shape),
      fifo_(std::move(fifo)),
      link_(std::move(link)),
      arrived_(shape.slots, 0),
      end_(std::move(end)) {}

IbRecvConnection::~IbRecvConnection() = default;

bool IbRecvConnection::progress() {
  if (!failure_.empty()) throw Error(loomRemoteError, failure_);
  end_->cq->takeEvents();
  bool moved = false;
  Completion cs[16];
  for (auto done = end_->poll(cs, peerName(), failure_); !done.empty(); done = end_->poll(cs, peerName(), failure_)) {
    moved = true;
    for (const Completion& c : done) {
      if (kindOf(c.wrId) == Work::Receive) {
        if (c.imm != static_cast<uint32_t>(received_) || received_ - tail_ >= shape_.slots) {
          failure_ = "corrupt slot " + std::to_string(c.imm) + " from " + peerName() + " (expected " +
                     std::to_string(static_cast<uint32_t>(received_)) + ")";
          throw Error(loomRemoteError, failure_);
        }
        arrived_[received_ % shape_.slots] = 1;
        ++received_;
        end_->qp->postRecv(c.wrId);
      } else {
        --creditsInFlight_;
      }
    }
  }
  sendCredit();
  return moved;
}

void IbRecvConnection::sendCredit() {
  // One credit write in flight per slot at most (the sender has as many
  // receives posted); a later one carries every release before it.
  if (creditSent_ == tail_ || creditsInFlight_ >= shape_.slots) return;
  end_->qp->postWrite({.wrId = wrId(Work::Credit, tail_), .sges = {}, .remoteAddress = 0, .rkey = 0,
                       .imm = static_cast<uint32_t>(tail_)});
  creditSent_ = tail_;
  ++creditsInFlight_;
}

std::optional<RecvSlot> IbRecvConnection::peek() {
  if (!arrived_[tail_ % shape_.slots]) return std::nullopt;
  const std::byte* slot = fifo_->slot(tail_);
  SlotTag tag;
  std::memcpy(&tag, slot, sizeof tag);
  if (tag.bytes > shape_.slotBytes || tag.sequence != static_cast<uint32_t>(tail_)) {
    failure_ = "corrupt slot " + std::to_string(tail_) + " from " + peerName();
    throw Error(loomRemoteError, failure_);
  }
  return RecvSlot{{slot + kHeaderBytes, tag.bytes}, tag};
}

void IbRecvConnection::release() {
  arrived_[tail_ % shape_.slots] = 0;
  ++tail_;
  sendCredit();
}

void IbRecvConnection::checkAlive() {
  if (!failure_.empty()) throw Error(loomRemoteError, failure_);
  progress();
  if (arrived_[tail_ % shape_.slots] || !link_.control.peerClosed()) return;
  // The peer's writes were acknowledged before it closed, but their
  // completions here and the close travel different ways.
  const auto now = std::chrono::steady_clock::now();
  if (!closedAt_) closedAt_ = now;
  if (now - *closedAt_ >= kGrace) throw Error(loomRemoteError, peerName() + " closed the connection or died");
}

void IbRecvConnection::addWaitFds(std::vector<WaitFd>& out) const {
  end_->cq->arm();  // as IbSendConnection::addWaitFds
  out.push_back({end_->cq->eventFd(), POLLIN});
  if (!closedAt_) out.push_back({link_.control.fd(), POLLIN});
}

}  // namespace loom::transport::ibverbs
