// A TCP socket owned by value (RAII), non-blocking underneath, whose every
// blocking operation takes a Deadline and an optional Cancellation. A peer
// that closes or resets becomes loomRemoteError, a deadline loomTimeout, a
// cancellation loomInvalidUsage ("aborted"); each message names the socket's
// label (e.g. "rank 3 at 10.0.0.2:4455").
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "base/cancellation.hpp"
#include "base/deadline.hpp"
#include "base/net/address.hpp"

namespace loom::net {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd, std::string label = "peer");
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A listener on `address` (port 0: any free port).
  static Socket listen(const SocketAddress& address, std::string label = "listener");
  // Whether a refused connection is worth retrying: a peer that may not
  // listen yet (rendezvous, stores) or one known to listen already, whose
  // refusal means it is gone (data connections).
  enum class Refused { Retry, Fail };
  // Connects before the deadline; a refusal is retried or fails per `refused`.
  static Socket connect(const SocketAddress& address, Deadline deadline, const Cancellation* cancel,
                        std::string label, Refused refused = Refused::Retry);

  // On a listener: the next connection, or loomTimeout / aborted.
  Socket accept(Deadline deadline, const Cancellation* cancel) const;

  void sendAll(std::span<const std::byte> data, Deadline deadline, const Cancellation* cancel);
  void recvAll(std::span<std::byte> data, Deadline deadline, const Cancellation* cancel);
  // What is readable now, up to data.size() bytes, without waiting; 0 when
  // nothing is. A closed or reset peer throws loomRemoteError.
  size_t recvSome(std::span<std::byte> data);
  // What can be sent now of `head` then `body` (one gather write), without
  // waiting; 0 when the kernel buffer is full. A lost peer throws loomRemoteError.
  size_t sendSome(std::span<const std::byte> head, std::span<const std::byte> body);
  // Sends `out` on `to` while receiving `in` from `from`, so that a ring of
  // ranks that all send first cannot deadlock on full kernel buffers.
  static void exchange(Socket& to, std::span<const std::byte> out, Socket& from, std::span<std::byte> in,
                       Deadline deadline, const Cancellation* cancel);

  // True if the peer closed or reset the connection; never waits. For
  // connections that carry no data in this direction (a liveness check).
  bool peerClosed() const;

  SocketAddress localAddress() const;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  const std::string& label() const { return label_; }
  void setLabel(std::string label) { label_ = std::move(label); }
  void close();

 private:
  // Bytes sent now without blocking (may be 0).
  size_t sendSome(std::span<const std::byte> data);

  int fd_ = -1;
  std::string label_;
};

// Waits until fd has `events` (POLLIN/POLLOUT), the deadline passes
// (loomTimeout naming `what`) or cancel fires (aborted).
void waitForFd(int fd, short events, Deadline deadline, const Cancellation* cancel, const std::string& what);

}  // namespace loom::net
