// The layout of one shared-memory FIFO: a control page, then the slots.
//
//   head  — slots committed; written only by the sender (release), read by the receiver (acquire)
//   tail  — slots released; written only by the receiver (release), read by the sender (acquire)
//   tags  — tag of slot i, written by the sender before head passes i
//   refusesHandles — set by the receiver (release, before the tail passes
//           the handle's slot) once it cannot map the sender's handles
//   handle — the handle in flight: its slot number x 4 + Offered, Taken or
//           Withdrawn; the sender offers (before committing the slot), then
//           one compare-and-swap decides between its withdrawal and the
//           receiver's taking
//
// Each counter and each tag sits on its own cache line, so the two sides
// never write the same line. Counters only grow (64 bits do not wrap).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/cache_line.hpp"
#include "transport/connection.hpp"
#include "transport/transport.hpp"

namespace loom::transport::shm {

constexpr uint32_t kMaxSlots = 64;

// FifoControl::handle's states, in its low two bits.
enum HandleState : uint64_t { kHandleOffered = 0, kHandleTaken = 1, kHandleWithdrawn = 2 };

struct alignas(kCacheLine) TagLine {
  SlotTag tag;
};

struct FifoControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};
  alignas(kCacheLine) std::atomic<uint32_t> refusesHandles{0};
  alignas(kCacheLine) std::atomic<uint64_t> handle{0};
  alignas(kCacheLine) TagLine tags[kMaxSlots];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free (address-free)");

// Where things are in a segment holding one FIFO of `shape`.
class FifoView {
 public:
  static constexpr size_t kControlBytes = (sizeof(FifoControl) + 4095) / 4096 * 4096;
  static size_t segmentBytes(const FifoShape& shape) { return kControlBytes + shape.totalBytes(); }

  FifoView(std::byte* base, FifoShape shape) : base_(base), shape_(shape) {}

  FifoControl& control() const { return *reinterpret_cast<FifoControl*>(base_); }
  SlotTag& tag(uint64_t slot) const { return control().tags[slot % shape_.slots].tag; }
  std::byte* slot(uint64_t slot) const {
    return base_ + kControlBytes + (slot % shape_.slots) * size_t{shape_.slotBytes};
  }
  const FifoShape& shape() const { return shape_; }

 private:
  std::byte* base_;
  FifoShape shape_;
};

}  // namespace loom::transport::shm
