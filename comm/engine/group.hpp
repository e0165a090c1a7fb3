// loomGroupStart / loomGroupEnd. Point-to-point calls made between them are
// collected per thread and run together at the end: all their ops are posted
// before any is waited for, so a ring exchange or an all-to-all written with
// sends and receives cannot deadlock. Outside a group a call is a group of one.
//
// Calls on a NULL stream run in the calling thread, which returns when they
// are done; calls on a host stream become one task of that stream.
#pragma once

#include <cstddef>

#include "comm/communicator.hpp"
#include "comm/engine/p2p_op.hpp"
#include "comm/engine/stream.hpp"

namespace loom::group {

struct Call {
  Communicator* comm;
  HostStream* stream;  // null: blocking
  OpKind kind;
  int peer;
  std::byte* buffer;
  size_t bytes;
};

void start();
// Runs what the outermost group collected; throws the first failure.
void end();
// Inside a group: records the call. Outside: runs it now.
void submit(const Call& call);

}  // namespace loom::group
