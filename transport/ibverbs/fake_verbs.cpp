#include "transport/ibverbs/fake_verbs.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace loom::transport::ibverbs {

struct FakeCq;
struct FakeQp;

struct FakeMr {
  uint64_t pd;
  uintptr_t start;
  size_t bytes;
  bool remoteWrite;
  uint32_t key;  // lkey and rkey alike

  bool holds(uint64_t address, size_t n) const { return address >= start && n <= bytes && address - start <= bytes - n; }
};

struct FakeVerbs::Fabric {
  mutable std::mutex mutex;
  int deviceCount = 0;
  uint64_t pds = 0;
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  uint64_t registrations = 0;
  std::map<uint32_t, FakeQp*> qps;    // by qpn
  std::map<uint32_t, FakeMr*> mrs;    // by key
  std::vector<uint32_t> qpOrder;
  std::optional<std::pair<WcStatus, uint32_t>> failNext;  // status, qpn (0: any)
};
using Fabric = FakeVerbs::Fabric;

namespace {

class FakeMemoryRegion final : public MemoryRegion {
 public:
  FakeMemoryRegion(Fabric& fabric, FakeMr mr) : fabric_(fabric), mr_(mr) {
    std::lock_guard lock(fabric_.mutex);
    fabric_.mrs[mr_.key] = &mr_;
    ++fabric_.registrations;
  }
  ~FakeMemoryRegion() override {
    std::lock_guard lock(fabric_.mutex);
    fabric_.mrs.erase(mr_.key);
  }
  uint32_t lkey() const override { return mr_.key; }
  uint32_t rkey() const override { return mr_.key; }

 private:
  Fabric& fabric_;
  FakeMr mr_;
};

}  // namespace

// Guarded by the fabric's mutex, like everything the fake shares.
struct FakeCq final : CompletionQueue {
  FakeCq(Fabric& owner, int capacity) : fabric(owner), depth(static_cast<size_t>(capacity)) {
    fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throwSystemError("eventfd", errno);
  }
  ~FakeCq() override { ::close(fd); }

  size_t poll(std::span<Completion> out) override {
    std::lock_guard lock(fabric.mutex);
    // A device loses an overrun queue and raises an asynchronous error.
    if (overrun) throw Error(loomSystemError, "completion queue overrun (more than " + std::to_string(depth) + " entries)");
    size_t n = 0;
    for (; n < out.size() && !entries.empty(); ++n) {
      out[n] = entries.front();
      entries.pop_front();
    }
    return n;
  }
  int eventFd() const override { return fd; }
  void arm() override {
    std::lock_guard lock(fabric.mutex);
    armed = true;
  }
  bool takeEvents() override {
    uint64_t count = 0;
    return ::read(fd, &count, sizeof count) == sizeof count;
  }

  // With the fabric's mutex held.
  void push(const Completion& c) {
    if (entries.size() >= depth) {
      overrun = true;  // poll() says so
      return;
    }
    entries.push_back(c);
    if (armed) {
      armed = false;
      const uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
    }
  }

  Fabric& fabric;
  size_t depth;
  int fd = -1;
  bool armed = false;
  bool overrun = false;
  std::deque<Completion> entries;
};

struct FakeQp final : QueuePair {
  enum class State { Reset, Ready, Error };

  FakeQp(Fabric& owner, uint64_t domain, FakeCq& queue, int recvs)
      : fabric(owner), pd(domain), cq(queue), recvDepth(recvs) {
    std::lock_guard lock(fabric.mutex);
    number = fabric.nextQpn++;
    fabric.qps[number] = this;
    fabric.qpOrder.push_back(number);
  }
  ~FakeQp() override {
    std::lock_guard lock(fabric.mutex);
    fabric.qps.erase(number);
    std::erase(fabric.qpOrder, number);
  }

  uint32_t qpn() const override { return number; }

  void connect(const QpAddress& remote, uint32_t) override {
    std::lock_guard lock(fabric.mutex);
    if (state != State::Reset) throw Error(loomSystemError, "moving a queue pair to RTR: it is not in RESET");
    remoteQpn = remote.qpn;
    state = State::Ready;
  }

  void postRecv(uint64_t wrId) override {
    std::lock_guard lock(fabric.mutex);
    if (static_cast<int>(receives.size()) >= recvDepth) throwSystemError("ibv_post_recv", ENOMEM);
    if (state == State::Error) {
      cq.push({.wrId = wrId, .status = WcStatus::Flushed});
      return;
    }
    receives.push_back(wrId);
  }

  void postWrite(const Write& w) override {
    std::lock_guard lock(fabric.mutex);
    if (w.sges.size() > 2) throwSystemError("ibv_post_send", EINVAL);
    if (state == State::Reset) throwSystemError("ibv_post_send", EINVAL);
    if (state == State::Error) return cq.push({.wrId = w.wrId, .status = WcStatus::Flushed});
    if (fabric.failNext && (fabric.failNext->second == 0 || fabric.failNext->second == number)) {
      const WcStatus status = fabric.failNext->first;
      fabric.failNext.reset();
      return fail(w.wrId, status);
    }
    auto peer = fabric.qps.find(remoteQpn);
    // A peer that is gone, or broken, acknowledges nothing: the retries run out.
    if (peer == fabric.qps.end() || peer->second->state != State::Ready || peer->second->remoteQpn != number) {
      return fail(w.wrId, WcStatus::RetryExceeded);
    }
    FakeQp& remote = *peer->second;
    size_t total = 0;
    for (const Sge& s : w.sges) {
      const FakeMr* mr = findMr(s.lkey);
      if (mr == nullptr || mr->pd != pd || !mr->holds(s.address, s.bytes)) return fail(w.wrId, WcStatus::LocalProtection);
      total += s.bytes;
    }
    if (total > 0) {
      const FakeMr* target = findMr(w.rkey);
      if (target == nullptr || target->pd != remote.pd || !target->remoteWrite || !target->holds(w.remoteAddress, total)) {
        return fail(w.wrId, WcStatus::RemoteAccess);
      }
    }
    if (w.imm && remote.receives.empty()) return fail(w.wrId, WcStatus::RnrRetryExceeded);
    auto* to = reinterpret_cast<std::byte*>(w.remoteAddress);
    for (const Sge& s : w.sges) {
      if (s.bytes > 0) std::memcpy(to, reinterpret_cast<const void*>(s.address), s.bytes);
      to += s.bytes;
    }
    if (w.imm) {
      const uint64_t recv = remote.receives.front();
      remote.receives.pop_front();
      remote.cq.push({.wrId = recv, .opcode = WcOpcode::RecvRdmaWithImm, .imm = *w.imm,
                      .bytes = static_cast<uint32_t>(total)});
    }
    cq.push({.wrId = w.wrId, .opcode = WcOpcode::RdmaWrite});
  }

  // With the fabric's mutex held.
  FakeMr* findMr(uint32_t key) const {
    auto it = fabric.mrs.find(key);
    return it == fabric.mrs.end() ? nullptr : it->second;
  }
  void fail(uint64_t wrId, WcStatus status) {
    cq.push({.wrId = wrId, .status = status});
    toError();
  }
  void toError() {
    state = State::Error;
    for (uint64_t recv : receives) cq.push({.wrId = recv, .status = WcStatus::Flushed});
    receives.clear();
  }

  Fabric& fabric;
  uint64_t pd;
  FakeCq& cq;
  int recvDepth;
  uint32_t number = 0;
  uint32_t remoteQpn = 0;
  State state = State::Reset;
  std::deque<uint64_t> receives;
};

namespace {

class FakeDevice final : public Device {
 public:
  FakeDevice(Fabric& fabric, std::string name, int index, int port)
      : fabric_(fabric), name_(std::move(name)), index_(index), port_(port) {
    std::lock_guard lock(fabric_.mutex);
    pd_ = ++fabric_.pds;
  }

  const std::string& name() const override { return name_; }
  int port() const override { return port_; }
  PortInfo portInfo() const override {
    return {.active = true, .ethernet = false, .lid = static_cast<uint16_t>(index_ + 1), .activeMtu = 5};
  }
  QpAddress address(uint32_t qpn, uint32_t psn) const override {
    return {.lid = static_cast<uint16_t>(index_ + 1), .gid = {}, .qpn = qpn, .psn = psn, .mtu = 5, .global = false};
  }
  std::unique_ptr<MemoryRegion> registerMemory(void* address, size_t bytes, bool remoteWrite) override {
    if (address == nullptr || bytes == 0) throwSystemError("ibv_reg_mr of " + std::to_string(bytes) + " bytes", EINVAL);
    uint32_t key;
    {
      std::lock_guard lock(fabric_.mutex);
      key = fabric_.nextKey++;
    }
    return std::make_unique<FakeMemoryRegion>(
        fabric_, FakeMr{.pd = pd_, .start = reinterpret_cast<uintptr_t>(address), .bytes = bytes,
                        .remoteWrite = remoteWrite, .key = key});
  }
  std::unique_ptr<CompletionQueue> createCq(int depth) override { return std::make_unique<FakeCq>(fabric_, depth); }
  // Writes complete as they are posted, so a send queue never fills: its depth is not kept.
  std::unique_ptr<QueuePair> createQp(CompletionQueue& cq, int, int recvDepth) override {
    return std::make_unique<FakeQp>(fabric_, pd_, static_cast<FakeCq&>(cq), recvDepth);
  }

 private:
  Fabric& fabric_;
  std::string name_;
  int index_;
  int port_;
  uint64_t pd_ = 0;
};

}  // namespace

FakeVerbs::FakeVerbs(int devices) : fabric_(std::make_unique<Fabric>()) { fabric_->deviceCount = devices; }

FakeVerbs::~FakeVerbs() = default;

std::vector<DeviceInfo> FakeVerbs::devices() {
  std::lock_guard lock(fabric_->mutex);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < fabric_->deviceCount; ++i) {
    out.push_back({.name = "fake" + std::to_string(i), .ports = {PortInfo{.active = true, .ethernet = false,
                                                                          .lid = static_cast<uint16_t>(i + 1),
                                                                          .activeMtu = 5}}});
  }
  return out;
}

std::unique_ptr<Device> FakeVerbs::open(const std::string& device, int port, int) {
  int count;
  {
    std::lock_guard lock(fabric_->mutex);
    count = fabric_->deviceCount;
  }
  for (int i = 0; i < count; ++i) {
    if (device != "fake" + std::to_string(i)) continue;
    if (port != 1) throw Error(loomSystemError, "ibv_query_port of " + device + ":" + std::to_string(port) + ": no such port");
    return std::make_unique<FakeDevice>(*fabric_, device, i, port);
  }
  throw Error(loomSystemError, "RDMA device " + device + " is gone");
}

void FakeVerbs::removeDevices() {
  std::lock_guard lock(fabric_->mutex);
  fabric_->deviceCount = 0;
}

void FakeVerbs::breakQueuePair(uint32_t qpn) {
  std::lock_guard lock(fabric_->mutex);
  if (auto it = fabric_->qps.find(qpn); it != fabric_->qps.end()) it->second->toError();
}

void FakeVerbs::failNextWrite(WcStatus status, uint32_t qpn) {
  std::lock_guard lock(fabric_->mutex);
  fabric_->failNext = {status, qpn};
}

std::vector<uint32_t> FakeVerbs::queuePairs() const {
  std::lock_guard lock(fabric_->mutex);
  return fabric_->qpOrder;
}

size_t FakeVerbs::liveRegistrations() const {
  std::lock_guard lock(fabric_->mutex);
  return fabric_->mrs.size();
}

uint64_t FakeVerbs::registrationsMade() const {
  std::lock_guard lock(fabric_->mutex);
  return fabric_->registrations;
}

std::optional<uint32_t> FakeVerbs::rkeyOf(const void* address, size_t bytes) const {
  std::lock_guard lock(fabric_->mutex);
  for (const auto& [key, mr] : fabric_->mrs) {
    if (mr->holds(reinterpret_cast<uintptr_t>(address), bytes)) return key;
  }
  return std::nullopt;
}

}  // namespace loom::transport::ibverbs
