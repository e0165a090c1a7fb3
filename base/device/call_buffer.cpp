#include "base/device/call_buffer.hpp"

#include <exception>

namespace loom::cuda {

CallBuffer::CallBuffer(size_t bytes, MemopBatch& batch)
    : batch_(batch), data_(static_cast<std::byte*>(batch.runtime().allocOnStream(bytes, batch.stream()))) {}

CallBuffer::~CallBuffer() {
  StreamHandle stream = nullptr;
  try {
    stream = batch_.stream();  // what the batch gathered goes first
  } catch (const std::exception&) {
    return;
  }
  batch_.runtime().freeOnStream(data_, stream);
}

}  // namespace loom::cuda
