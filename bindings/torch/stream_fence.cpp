#include "bindings/torch/stream_fence.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <thread>

namespace loom::torch {

StreamFence::StreamFence(c10::Device device) {
  if (!device.is_cuda()) return;
  const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  event_ = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
  event_->record(cuda.getStream(device));
  device_ = device;
}

bool StreamFence::waitUntil(std::chrono::steady_clock::time_point deadline) const {
  if (!event_) return true;
  // Spinning on query() would take a core from the ranks' own work; a kernel
  // of the size a collective waits for runs for microseconds to
  // milliseconds, so the sleeps grow from 20 us to 1 ms.
  auto pause = std::chrono::microseconds(20);
  while (!event_->query()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

}  // namespace loom::torch
