// The collective channel: a connection per direction between each pair of
// ranks besides the point-to-point one the engine drives. It belongs to the
// running collective (under the communicator's collective lock) and nothing
// progresses it behind the collective's back, so a collective's chunks never
// interleave with a user's sends. Connected lazily, like the engine's.
#pragma once

#include <memory>
#include <vector>

#include "comm/engine/engine.hpp"

namespace loom::coll {

class CollectiveChannel {
 public:
  explicit CollectiveChannel(Engine& engine);

  transport::SendConnection& send(int peer);  // connects on first use
  transport::RecvConnection* recv(int peer);  // null until the peer has connected

 private:
  Engine& engine_;
  std::vector<std::unique_ptr<transport::SendConnection>> send_;
  std::vector<std::unique_ptr<transport::RecvConnection>> recv_;
};

}  // namespace loom::coll
