#include "collectives/scratch.hpp"

namespace loom::coll {

std::span<std::byte> Scratch::get(size_t bytes) {
  if (bytes_ < bytes) {
    data_.reset();
    data_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
    bytes_ = bytes;
  }
  return {data_.get(), bytes};
}

std::byte* DeviceScratch::get(size_t bytes) {
  if (buffer_ == nullptr || buffer_->size() < bytes) {
    buffer_.reset();
    buffer_ = std::make_unique<cuda::DeviceBuffer>(bytes);
  }
  return buffer_->data();
}

}  // namespace loom::coll
