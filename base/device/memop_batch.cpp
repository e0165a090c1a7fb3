#include "base/device/memop_batch.hpp"

#include <utility>

namespace loom::cuda {

void MemopBatch::wait(const uint64_t* word, uint64_t value) {
  // A wait only reads its word; MemOp holds one pointer for both kinds.
  ops_.push_back({.write = false, .word = const_cast<uint64_t*>(word), .value = value});
}

void MemopBatch::write(uint64_t* word, uint64_t value) { ops_.push_back({.write = true, .word = word, .value = value}); }

StreamHandle MemopBatch::stream() {
  flush();
  return stream_;
}

std::vector<MemOp> MemopBatch::take() { return std::exchange(ops_, {}); }

void MemopBatch::flush() {
  if (ops_.empty()) return;
  runtime_.memops(stream_, ops_);
  ops_.clear();
}

}  // namespace loom::cuda
