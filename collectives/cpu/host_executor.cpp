#include "collectives/cpu/host_executor.hpp"

#include "base/copy_bytes.hpp"
#include "collectives/cpu/host_primitives.hpp"

namespace loom::coll {
namespace {

class HostExecutor final : public Executor {
 public:
  const char* name() const override { return "cpu"; }
  bool reaches(memory::MemoryKind kind) const override { return memory::hostReachable(kind); }
  bool isHost() const override { return true; }

  void copy(std::byte* dst, const std::byte* src, size_t bytes) const override {
    if (dst != src && bytes != 0) copyBytes(dst, src, bytes);
  }
  void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
              double scalar) const override {
    cpu::reduce(type, op, sources, dst, count, scalar);
  }
  void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor) const override {
    cpu::divide(type, dst, count, divisor);
  }
  std::unique_ptr<Primitives> primitives(Links& links, int prev, int next,
                                         const PrimitiveCall& call) const override {
    return std::make_unique<HostPrimitives>(links, prev, next, call);
  }
};

}  // namespace

const Executor& hostExecutor() {
  static const HostExecutor kExecutor;
  return kExecutor;
}

}  // namespace loom::coll
