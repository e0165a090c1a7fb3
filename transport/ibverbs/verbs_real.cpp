// The real verbs: libibverbs (rdma-core). Each object owns what it created
// and destroys it in its destructor, in the order verbs requires (queue
// pairs before their completion queues, those before their channels, all
// before the protection domain and the device context).
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>

#include "base/error.hpp"
#include "transport/ibverbs/verbs.hpp"

namespace loom::transport::ibverbs {
namespace {

// Transport retries: 4.096 µs x 2^14 (about 67 ms) per try, 7 tries: a
// peer that answers nothing fails the queue pair in about half a second,
// well inside any communicator's timeout. NCCL waits longer (2^20) because
// it has no heartbeats of its own; Loom's watchdog names a dead rank anyway.
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetries = 7;
constexpr uint8_t kRnrRetries = 7;  // 7: retry for ever (a receive is always posted first, so it never waits)

[[noreturn]] void fail(const std::string& what, int errnum) { throwSystemError(what, errnum != 0 ? errnum : EIO); }

WcStatus statusOf(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::Success;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::LocalProtection;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::RemoteAccess;
    case IBV_WC_RETRY_EXC_ERR: return WcStatus::RetryExceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::RnrRetryExceeded;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::Flushed;
    default: return WcStatus::Other;
  }
}

PortInfo portInfoOf(const ibv_port_attr& a) {
  return {.active = a.state == IBV_PORT_ACTIVE,
          .ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET,
          .lid = a.lid,
          .activeMtu = static_cast<uint8_t>(a.active_mtu)};
}

class RealMemoryRegion final : public MemoryRegion {
 public:
  explicit RealMemoryRegion(ibv_mr* mr) : mr_(mr) {}
  ~RealMemoryRegion() override { ibv_dereg_mr(mr_); }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }

 private:
  ibv_mr* mr_;
};

class RealCompletionQueue final : public CompletionQueue {
 public:
  RealCompletionQueue(ibv_context* context, int depth) {
    channel_ = ibv_create_comp_channel(context);
    if (channel_ == nullptr) fail("ibv_create_comp_channel", errno);
    const int flags = ::fcntl(channel_->fd, F_GETFL);
    ::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK);  // takeEvents never blocks
    cq_ = ibv_create_cq(context, depth, nullptr, channel_, 0);
    if (cq_ == nullptr) {
      const int e = errno;
      ibv_destroy_comp_channel(channel_);
      fail("ibv_create_cq of depth " + std::to_string(depth), e);
    }
  }
  ~RealCompletionQueue() override {
    if (unacked_ > 0) ibv_ack_cq_events(cq_, unacked_);
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(channel_);
  }

  size_t poll(std::span<Completion> out) override {
    ibv_wc wcs[16];
    const int want = static_cast<int>(std::min<size_t>(out.size(), 16));
    const int n = ibv_poll_cq(cq_, want, wcs);
    if (n < 0) fail("ibv_poll_cq", EIO);
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      Completion& c = out[i];
      c.wrId = wc.wr_id;
      c.status = statusOf(wc.status);
      c.vendor = wc.status;
      c.opcode = WcOpcode::Other;
      if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE) c.opcode = WcOpcode::RdmaWrite;
      if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        c.opcode = WcOpcode::RecvRdmaWithImm;
        c.imm = ntohl(wc.imm_data);
        c.bytes = wc.byte_len;
      }
    }
    return static_cast<size_t>(n);
  }
  int eventFd() const override { return channel_->fd; }
  void arm() override {
    if (const int rc = ibv_req_notify_cq(cq_, 0); rc != 0) fail("ibv_req_notify_cq", rc);
  }
  bool takeEvents() override {
    bool any = false;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &context) == 0) {
      any = true;
      // Acknowledged in batches: each ack takes a lock in the provider.
      if (++unacked_ >= 64) {
        ibv_ack_cq_events(cq_, unacked_);
        unacked_ = 0;
      }
    }
    return any;
  }

  ibv_cq* get() { return cq_; }

 private:
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_ = 0;
};

class RealQueuePair final : public QueuePair {
 public:
  RealQueuePair(ibv_qp* qp, int port, int gidIndex, uint8_t mtu) : qp_(qp), port_(port), gidIndex_(gidIndex), mtu_(mtu) {}
  ~RealQueuePair() override { ibv_destroy_qp(qp_); }

  uint32_t qpn() const override { return qp_->qp_num; }

  void connect(const QpAddress& remote, uint32_t localPsn) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(port_);
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");

    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min(mtu_, remote.mtu));
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = remote.lid;
    a.ah_attr.port_num = static_cast<uint8_t>(port_);
    if (remote.global) {
      a.ah_attr.is_global = 1;
      std::copy(remote.gid.begin(), remote.gid.end(), a.ah_attr.grh.dgid.raw);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gidIndex_);
      a.ah_attr.grh.hop_limit = 255;
    }
    modify(a,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
               IBV_QP_MIN_RNR_TIMER,
           "RTR");

    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = kAckTimeout;
    a.retry_cnt = kRetries;
    a.rnr_retry = kRnrRetries;
    a.sq_psn = localPsn;
    a.max_rd_atomic = 1;
    modify(a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
           "RTS");
  }

  void postWrite(const Write& write) override {
    ibv_sge sges[2];
    if (write.sges.size() > 2) throw Error(loomInternalError, "an RDMA write of more than 2 pieces");
    for (size_t i = 0; i < write.sges.size(); ++i) {
      sges[i] = {.addr = write.sges[i].address, .length = write.sges[i].bytes, .lkey = write.sges[i].lkey};
    }
    ibv_send_wr wr{};
    wr.wr_id = write.wrId;
    wr.sg_list = sges;
    wr.num_sge = static_cast<int>(write.sges.size());
    wr.opcode = write.imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    if (write.imm) wr.imm_data = htonl(*write.imm);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = write.remoteAddress;
    wr.wr.rdma.rkey = write.rkey;
    ibv_send_wr* bad = nullptr;
    if (const int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) fail("ibv_post_send", rc);
  }

  void postRecv(uint64_t wrId) override {
    ibv_recv_wr wr{};
    wr.wr_id = wrId;
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) fail("ibv_post_recv", rc);
  }

 private:
  void modify(ibv_qp_attr& a, int mask, const char* state) {
    if (const int rc = ibv_modify_qp(qp_, &a, mask); rc != 0) fail(std::string("moving a queue pair to ") + state, rc);
  }

  ibv_qp* qp_;
  int port_;
  int gidIndex_;
  uint8_t mtu_;
};

class RealDevice final : public Device {
 public:
  RealDevice(ibv_context* context, std::string name, int port, int gidIndex)
      : context_(context), name_(std::move(name)), port_(port), gidIndex_(gidIndex) {
    if (ibv_query_port(context_, static_cast<uint8_t>(port_), &attr_) != 0) {
      const int e = errno;
      ibv_close_device(context_);
      fail("ibv_query_port of " + name_ + ":" + std::to_string(port_), e);
    }
    ibv_gid gid{};
    if (attr_.link_layer == IBV_LINK_LAYER_ETHERNET || attr_.lid == 0) {
      if (ibv_query_gid(context_, static_cast<uint8_t>(port_), gidIndex_, &gid) != 0) {
        const int e = errno;
        ibv_close_device(context_);
        fail("ibv_query_gid of " + name_ + ":" + std::to_string(port_) + " index " + std::to_string(gidIndex_), e);
      }
      global_ = true;
    }
    std::copy(std::begin(gid.raw), std::end(gid.raw), gid_.begin());
    pd_ = ibv_alloc_pd(context_);
    if (pd_ == nullptr) {
      const int e = errno;
      ibv_close_device(context_);
      fail("ibv_alloc_pd on " + name_, e);
    }
  }
  ~RealDevice() override {
    ibv_dealloc_pd(pd_);
    ibv_close_device(context_);
  }

  const std::string& name() const override { return name_; }
  int port() const override { return port_; }
  PortInfo portInfo() const override { return portInfoOf(attr_); }
  QpAddress address(uint32_t qpn, uint32_t psn) const override {
    return {.lid = attr_.lid, .gid = gid_, .qpn = qpn, .psn = psn, .mtu = static_cast<uint8_t>(attr_.active_mtu),
            .global = global_};
  }
  std::unique_ptr<MemoryRegion> registerMemory(void* address, size_t bytes, bool remoteWrite) override {
    const int access = IBV_ACCESS_LOCAL_WRITE | (remoteWrite ? IBV_ACCESS_REMOTE_WRITE : 0);
    ibv_mr* mr = ibv_reg_mr(pd_, address, bytes, access);
    if (mr == nullptr) fail("ibv_reg_mr of " + std::to_string(bytes) + " bytes on " + name_, errno);
    return std::make_unique<RealMemoryRegion>(mr);
  }
  std::unique_ptr<CompletionQueue> createCq(int depth) override {
    return std::make_unique<RealCompletionQueue>(context_, depth);
  }
  std::unique_ptr<QueuePair> createQp(CompletionQueue& cq, int sendDepth, int recvDepth) override {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = static_cast<RealCompletionQueue&>(cq).get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = static_cast<uint32_t>(sendDepth);
    init.cap.max_recv_wr = static_cast<uint32_t>(recvDepth);
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &init);
    if (qp == nullptr) fail("ibv_create_qp on " + name_, errno);
    return std::make_unique<RealQueuePair>(qp, port_, gidIndex_, static_cast<uint8_t>(attr_.active_mtu));
  }

 private:
  ibv_context* context_;
  std::string name_;
  int port_;
  int gidIndex_;
  ibv_port_attr attr_{};
  Gid gid_{};
  bool global_ = false;
  ibv_pd* pd_ = nullptr;
};

// The device list, freed when it goes.
struct DeviceList {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  ~DeviceList() {
    if (list != nullptr) ibv_free_device_list(list);
  }
  std::span<ibv_device*> devices() const { return {list, list == nullptr ? 0 : static_cast<size_t>(count)}; }
};

class RealVerbs final : public Verbs {
 public:
  const char* name() const override { return "libibverbs"; }

  std::vector<DeviceInfo> devices() override {
    std::vector<DeviceInfo> out;
    DeviceList list;
    for (ibv_device* device : list.devices()) {
      ibv_context* context = ibv_open_device(device);
      if (context == nullptr) continue;
      DeviceInfo info{.name = ibv_get_device_name(device), .ports = {}};
      ibv_device_attr attr{};
      if (ibv_query_device(context, &attr) == 0) {
        for (int port = 1; port <= attr.phys_port_cnt; ++port) {
          ibv_port_attr p{};
          info.ports.push_back(ibv_query_port(context, static_cast<uint8_t>(port), &p) == 0 ? portInfoOf(p) : PortInfo{});
        }
      }
      ibv_close_device(context);
      out.push_back(std::move(info));
    }
    return out;
  }

  std::unique_ptr<Device> open(const std::string& device, int port, int gidIndex) override {
    DeviceList list;
    for (ibv_device* d : list.devices()) {
      if (device != ibv_get_device_name(d)) continue;
      ibv_context* context = ibv_open_device(d);
      if (context == nullptr) fail("ibv_open_device of " + device, errno);
      return std::make_unique<RealDevice>(context, device, port, gidIndex);
    }
    throw Error(loomSystemError, "RDMA device " + device + " is gone");
  }
};

}  // namespace

Verbs* realVerbs() {
  static RealVerbs verbs;
  return &verbs;
}

}  // namespace loom::transport::ibverbs
