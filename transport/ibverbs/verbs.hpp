// The one thin interface every verbs call of Loom goes through: what the
// verbs transport needs of an RDMA device and nothing more (a protection
// domain, memory registrations, completion queues with an event fd, RC queue
// pairs, RDMA writes with and without immediate data, receives for the
// immediates). Two implementations: the real libibverbs (verbs_real.cpp, in
// builds that found rdma-core) and an in-process fake (fake_verbs.hpp) that
// copies memory between threads of one process, posts completions and can
// inject failures. Neither's types reach this header, so nothing above the
// transport ever sees <infiniband/verbs.h>.
//
// Errors that a call itself reports (no device, a registration refused, a
// queue pair that will not move to RTS) throw loom::Error; what goes wrong
// later on the wire comes back as a Completion with a status other than
// Success, as it does from the hardware.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::transport::ibverbs {

// How a work request ended (the subset of ibv_wc_status Loom tells apart;
// the rest is Other, with the device's own words in Completion::vendor).
enum class WcStatus : uint8_t {
  Success,
  LocalProtection,  // a local buffer outside its registration
  RemoteAccess,     // the peer's rkey or range refused
  RetryExceeded,    // the peer stopped answering (link down, peer gone)
  RnrRetryExceeded, // the peer had no receive posted
  Flushed,          // the queue pair went to the error state before this ran
  Other,
};
const char* wcStatusName(WcStatus status);

enum class WcOpcode : uint8_t { RdmaWrite, RecvRdmaWithImm, Other };

struct Completion {
  uint64_t wrId = 0;
  WcStatus status = WcStatus::Success;
  WcOpcode opcode = WcOpcode::Other;
  uint32_t imm = 0;    // RecvRdmaWithImm: the sender's immediate
  uint32_t bytes = 0;  // RecvRdmaWithImm: bytes the write carried
  int vendor = 0;      // the device's own status code (ibv_wc_status)
};

using Gid = std::array<uint8_t, 16>;

// What the two ends of a queue pair exchange out of band (NCCL's
// ncclIbQpInfo): enough to address the peer on InfiniBand (lid) or RoCE (gid).
struct QpAddress {
  uint16_t lid = 0;
  Gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the first packet sequence number the owner sends with
  uint8_t mtu = 0;   // the owner's port's active MTU (ibv_mtu: 1 = 256 B ... 5 = 4096 B)
  bool global = false;  // route by gid (RoCE, or InfiniBand across subnets)
};

struct PortInfo {
  bool active = false;
  bool ethernet = false;  // RoCE
  uint16_t lid = 0;
  uint8_t activeMtu = 0;  // ibv_mtu
};

// A registered range: what a local gather list names with lkey and a peer's
// RDMA write with rkey. Deregistered when it goes.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Takes up to out.size() completions; returns how many.
  virtual size_t poll(std::span<Completion> out) = 0;
  // Readable once a completion arrives after arm(): the completion channel's fd.
  virtual int eventFd() const = 0;
  // Asks for an event on the next completion (ibv_req_notify_cq).
  virtual void arm() = 0;
  // Takes in the events that have come (non-blocking; ibv_get_cq_event and
  // ibv_ack_cq_events); true if there were any (the queue is unarmed then).
  virtual bool takeEvents() = 0;
};

struct Sge {
  uint64_t address = 0;
  uint32_t bytes = 0;
  uint32_t lkey = 0;
};

// An RDMA write of the gather list `sges` to [remoteAddress, +their sum) in
// the peer's registration `rkey`; with `imm`, it also consumes one of the
// peer's posted receives, which completes with the immediate.
struct Write {
  uint64_t wrId = 0;
  std::span<const Sge> sges;
  uint64_t remoteAddress = 0;
  uint32_t rkey = 0;
  std::optional<uint32_t> imm;
};

// A reliable-connected queue pair on one port.
class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qpn() const = 0;
  // INIT, then RTR toward `remote`, then RTS sending from `localPsn`.
  virtual void connect(const QpAddress& remote, uint32_t localPsn) = 0;
  // Every write is signalled: its completion comes on the queue pair's CQ.
  virtual void postWrite(const Write& write) = 0;
  // A receive with no buffer, for one write's immediate.
  virtual void postRecv(uint64_t wrId) = 0;
};

// One opened port of one device, with its protection domain.
class Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& name() const = 0;
  virtual int port() const = 0;
  virtual PortInfo portInfo() const = 0;
  // This side's address for a queue pair `qpn` sending from `psn`.
  virtual QpAddress address(uint32_t qpn, uint32_t psn) const = 0;
  // `remoteWrite`: peers may write into it (a receive FIFO).
  virtual std::unique_ptr<MemoryRegion> registerMemory(void* address, size_t bytes, bool remoteWrite) = 0;
  virtual std::unique_ptr<CompletionQueue> createCq(int depth) = 0;
  // One completion queue serves both sides of the queue pair.
  virtual std::unique_ptr<QueuePair> createQp(CompletionQueue& cq, int sendDepth, int recvDepth) = 0;
};

struct DeviceInfo {
  std::string name;
  std::vector<PortInfo> ports;  // port i + 1
};

// A source of devices: the real libibverbs, or the fake.
class Verbs {
 public:
  virtual ~Verbs() = default;
  // "libibverbs" or "fake".
  virtual const char* name() const = 0;
  virtual std::vector<DeviceInfo> devices() = 0;
  // Opens `device` on `port` (1-based), addressing by gid index `gidIndex`
  // on RoCE ports.
  virtual std::unique_ptr<Device> open(const std::string& device, int port, int gidIndex) = 0;
};

// The verbs in use: the fake a test installed (ScopedVerbs), else the real
// libibverbs where the build has it, else null.
Verbs* currentVerbs();

// Installs `verbs` for the whole process while it lives (tests: the fake).
class ScopedVerbs {
 public:
  explicit ScopedVerbs(Verbs& verbs);
  ~ScopedVerbs();
  ScopedVerbs(const ScopedVerbs&) = delete;
  ScopedVerbs& operator=(const ScopedVerbs&) = delete;

 private:
  Verbs* previous_;
};

// The real libibverbs, where the build has it (null otherwise).
Verbs* realVerbs();

}  // namespace loom::transport::ibverbs
