#include "base/device/device_buffer.hpp"

#include "base/device/cuda.hpp"

namespace loom::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes)
    : runtime_(runtime()), data_(static_cast<std::byte*>(runtime_.allocDevice(bytes))), bytes_(bytes) {}

DeviceBuffer::~DeviceBuffer() { runtime_.freeDevice(data_); }

void DeviceBuffer::upload(const void* host) { runtime_.copyNow(data_, host, bytes_); }

void DeviceBuffer::download(void* host) const { runtime_.copyNow(host, data_, bytes_); }

}  // namespace loom::cuda
