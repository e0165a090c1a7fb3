// One send or receive, from posting to completion. The thread that posted it
// waits for `state` to leave Pending; whichever thread is progressing the
// engine advances it (see engine.hpp).
#pragma once

#include <loom/loom.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "comm/engine/message_match.hpp"
#include "memory/registration.hpp"

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
  // Device memory between ranks of one node (group.cpp, by_handle.cpp): a
  // send's buffer, to go by this handle for the receiver to copy from (its
  // bytes copied from the device slot by slot where the receiver cannot map
  // it); a receive's, which a message that comes by handle is copied
  // straight into (`buffer` is then the pinned copy that bytes land in).
  std::optional<memory::Handle> handle;
  std::byte* deviceTarget = nullptr;

  // Owned by the progressing thread while Pending.
  size_t moved = 0;      // bytes copied into or out of slots
  bool started = false;  // its first slot went out or came in
  bool byHandle = false;       // a send whose handle's slot is out, numbered handleSlot
  uint64_t handleSlot = 0;
  bool landedOnDevice = false;  // a receive whose message went straight to deviceTarget
  std::chrono::steady_clock::time_point lastActivity{};

  // Published with release once the op leaves Pending; error fields first.
  loomResult_t error = loomSuccess;
  std::string message;
  std::atomic<OpState> state{OpState::Pending};

  // "send of 64 bytes to rank 3" / "recv of 64 bytes from rank 3".
  std::string describe() const;
};

}  // namespace loom
