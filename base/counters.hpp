// How this process's calls ran, counted as they run: which collectives and
// point-to-point ops went on a stream with no host thread, which read their
// peers' buffers in place, which went in pieces or by handle. A call's result
// cannot say which path it took (a staged call and a resident one give the
// same bits); these can. One table of names, read by loomGetCounter (loom.h)
// for tools and tests. Each count is a relaxed atomic add where its event
// happens, on the device and by-handle paths: a host call counts nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom::counters {

enum class Counter : unsigned {
  ResidentCalls,                // collectives queued on a stream, no host thread in the loop
  ResidentCallsInWindows,       // of those, read in symmetric windows
  ResidentCallsOfferedInPlace,  // of those, whose rank offered its input where it lies (no scratch)
  ResidentWholeCalls,           // of those, run as one piece (threads of one process on one GPU)
  ResidentPointToPointOps,      // sends and receives queued on a stream
  ResidentSendsReadInPlace,     // of those sends, read by the receiver from the sender's buffer
  BytesTakenByHandle,           // bytes receivers copied from their senders' buffers by handle
  StagedPieces,                 // pieces of staged calls run one after another (runInPieces)
  HostKernelBytes,              // bytes the host's stand-ins for device kernels (the fake device's) wrote by
                                // reductions and copies, not divides nor a PreMulSum's scaling of its own input
  Count,
};

inline constexpr size_t kCounterCount = static_cast<size_t>(Counter::Count);

// The names loomGetCounter takes, in Counter's order.
inline constexpr std::array<std::string_view, kCounterCount> kCounterNames = {
    "resident_calls",
    "resident_calls_in_windows",
    "resident_calls_offered_in_place",
    "resident_whole_calls",
    "resident_p2p_ops",
    "resident_sends_read_in_place",
    "bytes_taken_by_handle",
    "staged_pieces",
    "host_kernel_bytes",
};

// Adds `n` to `counter`.
void add(Counter counter, uint64_t n = 1);

// The count of `counter` since the process began.
uint64_t value(Counter counter);

// The counter called `name`, if one is.
std::optional<Counter> named(std::string_view name);

// Every name, comma-separated: what an unknown name's error lists.
std::string_view allNames();

}  // namespace loom::counters
