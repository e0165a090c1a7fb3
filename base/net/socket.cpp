#include "base/net/socket.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "base/error.hpp"

namespace loom::net {
namespace {

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool isRemoteFailure(int err) { return err == ECONNRESET || err == EPIPE || err == ECONNABORTED || err == ETIMEDOUT; }

}  // namespace

void waitForFd(int fd, short events, Deadline deadline, const Cancellation* cancel, const std::string& what) {
  pollfd fds[2] = {{fd, events, 0}, {cancel ? cancel->fd() : -1, POLLIN, 0}};
  for (;;) {
    if (cancel) cancel->throwIfCancelled();
    int rc = ::poll(fds, cancel ? 2 : 1, deadline.pollTimeoutMs());
    if (rc < 0) {
      if (errno == EINTR) continue;
      throwSystemError("poll", errno);
    }
    if (cancel) cancel->throwIfCancelled();
    if (fds[0].revents != 0) return;  // ready, or an error the caller's next call reports
    if (deadline.expired()) throw Error(loomTimeout, "timed out waiting for " + what);
  }
}

Socket::Socket(int fd, std::string label) : fd_(fd), label_(std::move(label)) {}

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_), label_(std::move(other.label_)) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    label_ = std::move(other.label_);
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SocketAddress& address, std::string label) {
  Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), std::move(label));
  if (!s.valid()) throwSystemError("socket", errno);
  int one = 1;
  ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd_, address.get(), address.length()) != 0) {
    throwSystemError("bind " + address.toString(), errno);
  }
  if (::listen(s.fd_, SOMAXCONN) != 0) throwSystemError("listen " + address.toString(), errno);
  return s;
}

Socket Socket::connect(const SocketAddress& address, Deadline deadline, const Cancellation* cancel,
                       std::string label, Refused refused) {
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    Socket s(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), label);
    if (!s.valid()) throwSystemError("socket", errno);
    int rc = ::connect(s.fd_, address.get(), address.length());
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      waitForFd(s.fd_, POLLOUT, deadline, cancel, "connection to " + label + " at " + address.toString());
      socklen_t len = sizeof err;
      ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      setNoDelay(s.fd_);
      return s;
    }
    if (err == ECONNREFUSED && refused == Refused::Fail) {
      throw Error(loomRemoteError, label + " refused the connection (nothing listens at " + address.toString() +
                                       " any more: it exited?)");
    }
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET) {
      throwSystemError("connect to " + label + " at " + address.toString(), err);
    }
    if (deadline.expired()) {
      throw Error(loomTimeout, "timed out connecting to " + label + " at " + address.toString() +
                                   " (last error: connection refused)");
    }
    // The peer is not listening yet: back off, but stay within the deadline and abortable.
    pollfd p{cancel ? cancel->fd() : -1, POLLIN, 0};
    ::poll(&p, 1, deadline.capped(backoff).pollTimeoutMs());
    if (cancel) cancel->throwIfCancelled();
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Socket Socket::accept(Deadline deadline, const Cancellation* cancel) const {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      setNoDelay(fd);
      return Socket(fd, "incoming connection");
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throwSystemError("accept on " + label_, errno);
    waitForFd(fd_, POLLIN, deadline, cancel, "a connection on " + label_);
  }
}

size_t Socket::sendSome(std::span<const std::byte> data) {
  for (;;) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (isRemoteFailure(errno)) throw Error(loomRemoteError, "connection to " + label_ + " lost while sending");
    throwSystemError("send to " + label_, errno);
  }
}

size_t Socket::sendSome(std::span<const std::byte> head, std::span<const std::byte> body) {
  iovec iov[2] = {{const_cast<std::byte*>(head.data()), head.size()}, {const_cast<std::byte*>(body.data()), body.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (isRemoteFailure(errno)) throw Error(loomRemoteError, "connection to " + label_ + " lost while sending");
    throwSystemError("send to " + label_, errno);
  }
}

size_t Socket::recvSome(std::span<std::byte> data) {
  if (data.empty()) return 0;
  for (;;) {
    ssize_t n = ::recv(fd_, data.data(), data.size(), 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) throw Error(loomRemoteError, "connection closed by " + label_);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (isRemoteFailure(errno)) throw Error(loomRemoteError, "connection to " + label_ + " reset");
    throwSystemError("recv from " + label_, errno);
  }
}

void Socket::sendAll(std::span<const std::byte> data, Deadline deadline, const Cancellation* cancel) {
  while (!data.empty()) {
    size_t n = sendSome(data);
    data = data.subspan(n);
    if (!data.empty() && n == 0) waitForFd(fd_, POLLOUT, deadline, cancel, "sending to " + label_);
  }
}

void Socket::recvAll(std::span<std::byte> data, Deadline deadline, const Cancellation* cancel) {
  while (!data.empty()) {
    size_t n = recvSome(data);
    data = data.subspan(n);
    if (!data.empty() && n == 0) waitForFd(fd_, POLLIN, deadline, cancel, "data from " + label_);
  }
}

void Socket::exchange(Socket& to, std::span<const std::byte> out, Socket& from, std::span<std::byte> in,
                      Deadline deadline, const Cancellation* cancel) {
  while (!out.empty() || !in.empty()) {
    if (!out.empty()) out = out.subspan(to.sendSome(out));
    if (!in.empty()) in = in.subspan(from.recvSome(in));
    if (out.empty() && in.empty()) break;
    pollfd fds[3];
    nfds_t count = 0;
    if (!out.empty()) fds[count++] = {to.fd_, POLLOUT, 0};
    if (!in.empty()) fds[count++] = {from.fd_, POLLIN, 0};
    if (cancel) fds[count++] = {cancel->fd(), POLLIN, 0};
    int rc = ::poll(fds, count, deadline.pollTimeoutMs());
    if (rc < 0 && errno != EINTR) throwSystemError("poll", errno);
    if (cancel) cancel->throwIfCancelled();
    if (rc == 0 && deadline.expired()) {
      throw Error(loomTimeout, "timed out exchanging data with " + (in.empty() ? to.label_ : from.label_));
    }
  }
}

bool Socket::peerClosed() const {
  std::byte probe;
  for (;;) {
    ssize_t n = ::recv(fd_, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n > 0) return false;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

SocketAddress Socket::localAddress() const {
  sockaddr_storage storage{};
  socklen_t len = sizeof storage;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &len) != 0) throwSystemError("getsockname", errno);
  return SocketAddress(reinterpret_cast<sockaddr*>(&storage), len);
}

}  // namespace loom::net
