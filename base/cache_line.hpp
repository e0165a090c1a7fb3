// The unit of sharing between cores: state that two sides write sits on lines
// of its own, so neither side's stores invalidate the other's.
#pragma once

#include <cstddef>

namespace loom {

constexpr size_t kCacheLine = 64;

}  // namespace loom
