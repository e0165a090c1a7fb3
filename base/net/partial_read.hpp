// Accumulates an exact number of bytes from a non-blocking socket across
// several readiness events: what a server needs that multiplexes many
// connections in one poll() loop (the rendezvous root, the TCP store).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/net/socket.hpp"

namespace loom::net {

class PartialRead {
 public:
  explicit PartialRead(size_t size) { expect(size); }

  // Starts over, waiting for `size` bytes.
  void expect(size_t size) {
    buffer_.assign(size, std::byte{0});
    filled_ = 0;
  }
  // Reads what is available now; true once all expected bytes are in. A
  // closed or reset peer throws loomRemoteError.
  bool advance(Socket& socket) {
    filled_ += socket.recvSome(std::span(buffer_).subspan(filled_));
    return filled_ == buffer_.size();
  }
  std::span<const std::byte> bytes() const { return buffer_; }

 private:
  std::vector<std::byte> buffer_;
  size_t filled_ = 0;
};

}  // namespace loom::net
