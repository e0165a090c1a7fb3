// How the ring algorithms cut a span of bytes into nranks slices of whole
// elements: equal but for the tail (trailing slices may be short or empty,
// identically on every rank).
#pragma once

#include <algorithm>
#include <cstddef>

namespace loom::coll {

struct Slice {
  size_t offset;
  size_t bytes;
};

inline Slice sliceOf(size_t bytes, size_t typeSize, int nslices, int index) {
  const size_t elements = bytes / typeSize;
  const size_t per = (elements + static_cast<size_t>(nslices) - 1) / static_cast<size_t>(nslices);
  const size_t begin = std::min(elements, per * static_cast<size_t>(index));
  const size_t end = std::min(elements, begin + per);
  return {begin * typeSize, (end - begin) * typeSize};
}

// (i mod n) for any int i, as a rank.
inline int ringIndex(int i, int n) { return ((i % n) + n) % n; }

}  // namespace loom::coll
