// The copy every data path of Loom makes: memcpy, but fast whatever the two
// buffers' alignment relative to each other.
//
// From about 2 KiB glibc's memcpy (2.36) moves data with one `rep movsb`. On
// the AMD EPYC of the project's VMs that ran 15-30x slower (about 2 GB/s
// against 30-60 for 4-128 KiB in cache) whenever dst was 1 to 31 bytes past
// src modulo a 4 KiB page: the usual case when a page-aligned slot is copied
// into a malloc'd buffer, which starts 16 bytes into its page. There,
// copyBytes moves 16-byte vectors itself. Everywhere else it is memcpy, which
// measured faster than such vectors for the FIFOs' large copies.
// bench/RESULTS.md, "Relative alignment".
#pragma once

#include <cstddef>

namespace loom {

// memcpy(dst, src, bytes); the ranges do not overlap.
void copyBytes(std::byte* dst, const std::byte* src, size_t bytes);

}  // namespace loom
