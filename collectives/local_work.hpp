// The copies and reductions a rank makes on memory it reaches, as the
// shared-memory algorithms drive them when they read their peers' buffers in
// place, without asking what memory those are: the CPU's (HostWork, through
// the plan's executor) for host buffers, this rank's device's (DeviceWork,
// kernels on the communicator's copy stream) for device buffers. The memory
// kind is chosen once, where the algorithm's first step learns that every
// rank's buffers are read in place (shm_steps.hpp); the reading code is one.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <span>

#include "collectives/cpu/reduce.hpp"
#include "collectives/executor.hpp"

namespace loom::coll {

class LocalWork {
 public:
  virtual ~LocalWork() = default;

  // dst <- src; nothing when they are the same or bytes is 0.
  virtual void copy(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // dst <- op(sources...) element-wise, `count` elements (cpu/reduce.hpp's rules).
  virtual void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                      size_t count) = 0;
  // Returns once what was asked is done, so that the rank may tell its peers
  // (they read what it wrote, or reuse what it read). The CPU's work is done
  // when each call returns; a device's is queued, and waited for here.
  virtual void finish() = 0;
};

// The CPU's work: the plan's executor, which does it as it is asked.
class HostWork final : public LocalWork {
 public:
  explicit HostWork(const Executor& executor) : executor_(executor) {}

  void copy(std::byte* dst, const std::byte* src, size_t bytes) override { executor_.copy(dst, src, bytes); }
  void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
              size_t count) override {
    executor_.reduce(type, op, sources, dst, count);
  }
  void finish() override {}

 private:
  const Executor& executor_;
};

}  // namespace loom::coll
