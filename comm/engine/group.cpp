#include "comm/engine/group.hpp"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "comm/base/error.hpp"
#include "comm/engine/wait.hpp"

namespace loom::group {
namespace {

struct State {
  int depth = 0;
  std::vector<Call> calls;
};
thread_local State state;

// Runs the collectives in order, then posts every point-to-point op and
// waits for all of them.
void runNow(const std::vector<Call>& calls) {
  for (const auto& call : calls) {
    if (call.collective) call.collective();
  }
  std::vector<P2pOp> ops(calls.size());
  std::vector<P2pOp*> pointers;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].collective) continue;
    ops[i].engine = &calls[i].comm->engine();
    ops[i].kind = calls[i].kind;
    ops[i].peer = calls[i].peer;
    ops[i].buffer = calls[i].buffer;
    ops[i].bytes = calls[i].bytes;
    pointers.push_back(&ops[i]);
  }
  if (!pointers.empty()) runOps(pointers);
}

// One task on `stream`; each communicator counts it as a call in flight, so
// that destroying or aborting the communicator waits for it.
void enqueue(HostStream& stream, std::vector<Call> calls) {
  for (const auto& c : calls) c.comm->streamTasks.fetch_add(1, std::memory_order_acq_rel);
  stream.enqueue([calls = std::move(calls)] {
    struct Release {
      const std::vector<Call>& calls;
      ~Release() {
        for (const auto& c : calls) c.comm->streamTasks.fetch_sub(1, std::memory_order_acq_rel);
      }
    } release{calls};
    try {
      runNow(calls);
    } catch (const Error& e) {
      for (const auto& c : calls) c.comm->setLastError(e.what());
      throw;
    }
  });
}

void execute(std::vector<Call> calls) {
  if (std::all_of(calls.begin(), calls.end(), [](const Call& c) { return c.stream == nullptr; })) {
    return runNow(calls);  // the common case, a blocking call or group: nothing to split
  }
  // Split by stream, keeping each stream's calls in order.
  std::vector<Call> blocking;
  std::vector<std::pair<HostStream*, std::vector<Call>>> streams;
  for (const auto& c : calls) {
    if (c.stream == nullptr) {
      blocking.push_back(c);
      continue;
    }
    auto it = std::find_if(streams.begin(), streams.end(), [&](const auto& s) { return s.first == c.stream; });
    if (it == streams.end()) it = streams.insert(streams.end(), {c.stream, {}});
    it->second.push_back(c);
  }
  for (auto& [stream, streamCalls] : streams) enqueue(*stream, std::move(streamCalls));
  if (!blocking.empty()) runNow(blocking);
}

}  // namespace

void start() { ++state.depth; }

void end() {
  if (state.depth == 0) throw Error(loomInvalidUsage, "loomGroupEnd without a matching loomGroupStart");
  if (--state.depth > 0) return;
  execute(std::exchange(state.calls, {}));
}

bool deferred(const HostStream* stream) { return state.depth > 0 || stream != nullptr; }

void submit(const Call& call) {
  if (state.depth > 0) {
    state.calls.push_back(call);
    return;
  }
  execute({call});
}

}  // namespace loom::group
