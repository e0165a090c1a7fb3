#include "comm/store/tcp_store.hpp"

#include <poll.h>

#include <algorithm>
#include <map>
#include <optional>
#include <thread>

#include "base/bytes.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/partial_read.hpp"

namespace loom {

StoreRequestHeader parseStoreRequestHeader(std::span<const std::byte, kStoreHeaderBytes> raw) {
  ByteReader r(raw, "store request");
  auto op = r.get<uint8_t>();
  auto keyBytes = r.get<uint32_t>();
  auto valueBytes = r.get<uint32_t>();
  if (op < static_cast<uint8_t>(StoreOp::Set) || op > static_cast<uint8_t>(StoreOp::Erase)) {
    throw Error(loomRemoteError, "store request has unknown op " + std::to_string(op));
  }
  if (keyBytes == 0 || keyBytes > kMaxStoreKeyBytes) throw Error(loomRemoteError, "store request key length out of range");
  if (valueBytes > kMaxStoreValueBytes || (op != static_cast<uint8_t>(StoreOp::Set) && valueBytes != 0)) {
    throw Error(loomRemoteError, "store request value length out of range");
  }
  return {static_cast<StoreOp>(op), keyBytes, valueBytes};
}

namespace {

constexpr std::array<std::byte, 4> kHelloMagic{std::byte{'L'}, std::byte{'S'}, std::byte{'T'}, std::byte{'R'}};
constexpr std::byte kAdmitted{1};
constexpr std::byte kRefused{0};

}  // namespace

std::array<std::byte, kStoreHelloBytes> encodeStoreHello(const std::optional<Secret>& secret) {
  std::array<std::byte, kStoreHelloBytes> hello{};
  std::copy(kHelloMagic.begin(), kHelloMagic.end(), hello.begin());
  if (secret) std::copy(secret->bytes.begin(), secret->bytes.end(), hello.begin() + kHelloMagic.size());
  return hello;
}

bool storeHelloAdmits(std::span<const std::byte, kStoreHelloBytes> hello, const std::optional<Secret>& secret) {
  if (!std::equal(kHelloMagic.begin(), kHelloMagic.end(), hello.begin())) return false;
  if (!secret) return true;
  Secret presented;
  std::copy(hello.begin() + kHelloMagic.size(), hello.end(), presented.bytes.begin());
  return presented == *secret;  // constant time
}

namespace {

std::vector<std::byte> encodeRequest(StoreOp op, const std::string& key, std::span<const std::byte> value) {
  ByteWriter w;
  w.put(static_cast<uint8_t>(op));
  w.put(static_cast<uint32_t>(key.size()));
  w.put(static_cast<uint32_t>(value.size()));
  w.putBytes(std::as_bytes(std::span(key.data(), key.size())));
  w.putBytes(value);
  return std::move(w.bytes());
}

std::vector<std::byte> encodeReply(std::span<const std::byte> value) {
  ByteWriter w;
  w.put(static_cast<uint32_t>(value.size()));
  w.putBytes(value);
  return std::move(w.bytes());
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(const net::SocketAddress& address, std::optional<Secret> secret)
      : secret_(secret), listener_(net::Socket::listen(address, "store listener")), thread_([this] { run(); }) {}
  ~Impl() {
    cancel_.cancel();
    thread_.join();
  }
  net::SocketAddress address() const { return listener_.localAddress(); }

 private:
  struct Client {
    explicit Client(net::Socket s) : socket(std::move(s)) {}
    net::Socket socket;
    net::PartialRead read{kStoreHelloBytes};
    bool admitted = false;  // its hello carried the secret
    std::optional<StoreRequestHeader> header;
    std::string waitingFor;  // a GET whose key is not set yet
  };

  void run() {
    while (!cancel_.cancelled()) {
      std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}, {cancel_.fd(), POLLIN, 0}};
      for (auto& c : clients_) fds.push_back({c.socket.fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
      for (size_t i = fds.size(); i-- > 2;) {
        if (fds[i].revents != 0) service(i - 2);
      }
      if (fds[0].revents != 0) acceptAll();
    }
  }

  void acceptAll() {
    for (;;) {
      try {
        clients_.emplace_back(listener_.accept(Deadline::after(std::chrono::milliseconds(0)), nullptr));
      } catch (const Error&) {
        return;
      }
    }
  }

  void service(size_t index) {
    Client& c = clients_[index];
    try {
      if (!c.read.advance(c.socket)) return;
      if (!c.admitted) {
        const bool admits = storeHelloAdmits(c.read.bytes().first<kStoreHelloBytes>(), secret_);
        c.socket.sendAll(std::span(admits ? &kAdmitted : &kRefused, 1), Deadline::after(std::chrono::seconds(1)),
                         &cancel_);
        if (!admits) throw Error(loomInvalidUsage, "refused a client without the job's secret (LOOM_STORE_SECRET)");
        c.admitted = true;
        c.read.expect(kStoreHeaderBytes);
        return;
      }
      if (!c.header) {
        c.header = parseStoreRequestHeader(c.read.bytes().first<kStoreHeaderBytes>());
        c.read.expect(c.header->keyBytes + c.header->valueBytes);  // never empty: keys are not
        return;
      }
      auto body = c.read.bytes();
      std::string key(reinterpret_cast<const char*>(body.data()), c.header->keyBytes);
      handle(c, c.header->op, key, body.subspan(c.header->keyBytes));
      c.header.reset();
      c.read.expect(kStoreHeaderBytes);
    } catch (const Error& e) {
      if (e.code() != loomRemoteError || std::string(e.what()).find("closed") == std::string::npos) {
        LOOM_WARN(Bootstrap, "store server dropped a client: %s", e.what());
      }
      clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(index));
    }
  }

  void handle(Client& c, StoreOp op, const std::string& key, std::span<const std::byte> value) {
    switch (op) {
      case StoreOp::Set:
        values_[key].assign(value.begin(), value.end());
        reply(c, {});
        for (auto& waiter : clients_) {
          if (waiter.waitingFor == key) {
            waiter.waitingFor.clear();
            reply(waiter, values_[key]);
          }
        }
        break;
      case StoreOp::Get:
        if (auto it = values_.find(key); it != values_.end()) reply(c, it->second);
        else c.waitingFor = key;
        break;
      case StoreOp::Erase:
        values_.erase(key);
        reply(c, {});
        break;
    }
  }

  void reply(Client& c, std::span<const std::byte> value) {
    c.socket.sendAll(encodeReply(value), Deadline::after(std::chrono::seconds(10)), &cancel_);
  }

  std::optional<Secret> secret_;
  net::Socket listener_;
  Cancellation cancel_;
  std::vector<Client> clients_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::thread thread_;  // last: starts after every other member exists
};

TcpStoreServer::TcpStoreServer(const net::SocketAddress& address, std::optional<Secret> secret)
    : impl_(std::make_unique<Impl>(address, secret)) {}
TcpStoreServer::~TcpStoreServer() = default;
net::SocketAddress TcpStoreServer::address() const { return impl_->address(); }

TcpStore::TcpStore(const net::SocketAddress& address, bool serve, Deadline deadline, const Cancellation* cancel,
                   std::optional<Secret> secret) {
  if (serve) server_ = std::make_unique<TcpStoreServer>(address, secret);
  const std::string name = "the store at " + address.toString();
  socket_ = net::Socket::connect(address, deadline, cancel, name);
  socket_.sendAll(encodeStoreHello(secret), deadline, cancel);
  std::byte answer{};
  try {
    socket_.recvAll(std::span(&answer, 1), deadline, cancel);
  } catch (const Error& e) {
    if (e.code() != loomRemoteError) throw;
    answer = kRefused;  // closed without an answer: not a Loom store, or one that refuses us
  }
  if (answer != kAdmitted) {
    throw Error(loomInvalidUsage, name + " refused this process: it needs the job's LOOM_STORE_SECRET" +
                                      (secret ? " (this one differs)" : " (none is set here)"));
  }
}

TcpStore::~TcpStore() = default;

void TcpStore::request(StoreOp op, const std::string& key, std::span<const std::byte> value, Deadline deadline,
                       const Cancellation* cancel) {
  if (key.empty() || key.size() > kMaxStoreKeyBytes) throw Error(loomInvalidArgument, "store key length out of range");
  if (value.size() > kMaxStoreValueBytes) throw Error(loomInvalidArgument, "store value too large");
  socket_.sendAll(encodeRequest(op, key, value), deadline, cancel);
}

void TcpStore::set(const std::string& key, std::span<const std::byte> value) {
  auto deadline = Deadline::after(std::chrono::seconds(30));
  request(StoreOp::Set, key, value, deadline, nullptr);
  uint32_t length = 0;
  socket_.recvAll(std::as_writable_bytes(std::span(&length, 1)), deadline, nullptr);
  if (length != 0) throw Error(loomRemoteError, "store server answered a SET with data");
}

std::vector<std::byte> TcpStore::get(const std::string& key, Deadline deadline, const Cancellation* cancel) {
  request(StoreOp::Get, key, {}, deadline, cancel);
  uint32_t length = 0;
  try {
    socket_.recvAll(std::as_writable_bytes(std::span(&length, 1)), deadline, cancel);
  } catch (const Error& e) {
    socket_.close();  // the server still holds our GET: this connection is out of step now
    if (e.code() == loomTimeout) throw Error(loomTimeout, "timed out waiting for store key '" + key + "'");
    throw;
  }
  if (length > kMaxStoreValueBytes) throw Error(loomRemoteError, "store server answered with an oversized value");
  std::vector<std::byte> value(length);
  socket_.recvAll(value, deadline, cancel);
  return value;
}

void TcpStore::erase(const std::string& key) {
  auto deadline = Deadline::after(std::chrono::seconds(30));
  request(StoreOp::Erase, key, {}, deadline, nullptr);
  uint32_t length = 0;
  socket_.recvAll(std::as_writable_bytes(std::span(&length, 1)), deadline, nullptr);
}

}  // namespace loom
