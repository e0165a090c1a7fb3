// A store-load fence split in two halves of unequal cost, for a handshake
// (Dekker's) where one side runs all the time and the other rarely: a poster
// stores its counter and then looks for sleepers on every step, a waiter
// announces itself and then looks at the counter only before it sleeps.
//
// Each side needs a full fence between its store and its load, or the CPU
// may let the load pass the store (x86's store buffer), and each side misses
// the other's store: the sleeper sleeps through the post. A full fence costs
// the poster a locked instruction that waits for its store's cache line to
// come back from the peer that read it, some tens of nanoseconds a post on a
// small collective of 0.1 us. Split, the frequent side's half orders only the
// compiler, and the rare side's half is membarrier(2): every thread of every
// process registered for it on this machine passes a full fence before it
// returns, so either the poster's store was already visible, or its load
// comes after the sleeper's store (the argument liburcu's and folly's
// asymmetric barriers rest on). Where the kernel does not offer it, both
// halves are full fences.
#pragma once

#include <atomic>

namespace loom {

class AsymmetricFence {
 public:
  // Registers this process for the heavy half (again after a fork: the
  // child's memory map is its own): false where the kernel refuses
  // membarrier's expedited global command.
  static bool registerProcess();

  // `split`: every process whose threads take the light half registered
  // (registerProcess). Else both halves are full fences.
  explicit AsymmetricFence(bool split) : split_(split) {}

  bool split() const { return split_; }
  // The frequent side: between its store and its load.
  void light() const {
    if (split_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  // The rare side: between its store and its load. A system call where split.
  void heavy() const;

 private:
  bool split_;
};

}  // namespace loom
