// One send or receive, from posting to completion. The thread that posted it
// waits for `state` to leave Pending; whichever thread is progressing the
// engine advances it (see engine.hpp).
#pragma once

#include <loom/loom.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "comm/engine/message_match.hpp"

namespace loom {

class Engine;

enum class OpKind { Send, Recv };
enum class OpState { Pending, Done, Failed };

struct P2pOp {
  Engine* engine = nullptr;  // of the communicator it belongs to
  OpKind kind = OpKind::Send;
  int peer = -1;
  std::byte* buffer = nullptr;  // read-only for sends
  size_t bytes = 0;
  // What the message is: 0, 0 for point-to-point calls; a collective's
  // sequence number and call signature for the ops of a direct algorithm.
  // Every slot carries them, and a receive checks them (message_match.hpp).
  uint32_t messageId = 0;
  uint32_t call = 0;
  DescribeMessage describeMessage = describeP2pMessage;

  // Owned by the progressing thread while Pending.
  size_t moved = 0;      // bytes copied into or out of slots
  bool started = false;  // its first slot went out or came in
  std::chrono::steady_clock::time_point lastActivity{};

  // Published with release once the op leaves Pending; error fields first.
  loomResult_t error = loomSuccess;
  std::string message;
  std::atomic<OpState> state{OpState::Pending};

  // "send of 64 bytes to rank 3" / "recv of 64 bytes from rank 3".
  std::string describe() const;
};

}  // namespace loom
