// The entry gate of a communicator's calls on CUDA streams, shared by its
// ranks that are threads of this process on one GPU (EntryGate::of).
//
// Such ranks share their device: a thread that synchronizes it
// (cudaDeviceSynchronize, which nccl-tests' threads call between calls;
// cudaFree) waits for every stream there, its peers' too. Were a peer's
// stream waiting for a write that this thread has not queued yet, neither
// would ever go on: a resident call's stream waits on its peers' flags, and
// a call through the host holds its stream until its host worker has met
// the peers. So no stream is made to wait for a peer's part that is not
// queued or about to be: a thread enters everything its group will queue,
// for every rank it drives (enterCall, enterMessages, with what each wait
// needs; a call that holds no stream enters with no needs, so that every
// rank numbers the same calls), then passes the gate (pass) before it
// queues any of it, and queues without waiting again. It passes once every peer of its GPU
// whose writes its waits need has entered them, and so, transitively, has
// every peer whose writes those peers' waits need where those peers are
// held at the gate themselves: then every thread of that set passes, and
// none is left held by a thread that may be synchronizing the device. A
// call so blocks its thread until its peers' threads have made theirs (at
// most the communicator's timeout, then loomRemoteError naming them), never
// for a peer in another process or on another GPU, nor for one whose latest
// call this very thread made (one thread driving several ranks: NCCL asks it
// to group their calls, and its order is its own).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace loom {

class EntryGate {
 public:
  // A message as the resident area claims it: to (`send`) or from `peer`, in
  // `pieces` pieces; `takenAtEnd`: a send read in place, which waits at its
  // end for its receiver to have taken its last piece.
  struct Message {
    int peer = -1;
    bool send = false;
    uint64_t pieces = 0;
    bool takenAtEnd = false;
  };

  // The calling thread's number: never reused, as a std::thread::id may be
  // once its thread has ended.
  static uint64_t thisThread();
  // The gate of the communicator `key` names (its unique id's bytes), one
  // for all its ranks in this process; it lasts while one of them holds it.
  static std::shared_ptr<EntryGate> of(const std::string& key);

  // `rank`'s driver until its first call: the thread that asked for its
  // communicator.
  void noteCreator(int rank, uint64_t thread);
  // `rank`'s next call; `besides`: per rank, a peer on its GPU in this
  // process whose part the call waits for on its stream (none: a call that
  // holds no stream, only numbered).
  void enterCall(int rank, const std::vector<bool>& besides);
  // `rank`'s next messages, numbered per ordered pair from 1 as the
  // resident area numbers their pieces (a message through the host is one
  // piece): a receive waits for every piece, a send for its receiver to
  // have taken the pieces two before (its slots), or, `takenAtEnd`, its own;
  // `besides` as for enterCall.
  void enterMessages(int rank, std::span<const Message> messages, const std::vector<bool>& besides);
  // Waits until this thread may queue what it entered, as above, or `rank`'s
  // communicator failed (fail); throws loomRemoteError naming the ranks
  // past `timeout`. Nothing to do where this thread entered nothing.
  void pass(int rank, std::chrono::milliseconds timeout);
  // Forgets what this thread entered and has not passed (its group failed
  // before it queued anything).
  void leave() noexcept;
  // `rank`'s communicator failed: it enters nothing more, and no thread
  // waits for it or for itself there.
  void fail(int rank) noexcept;

 private:
  using Word = std::tuple<int, int, bool>;  // (sender, receiver, taken)
  // What a wait needs of its writer: its call `upTo` entered, or `upTo`
  // pieces of `word`; `rank`, whose wait it is.
  struct Need {
    int rank = -1;
    int writer = -1;
    bool call = false;
    Word word{};
    uint64_t upTo = 0;
  };
  // A thread that entered and has not passed: the ranks it entered for,
  // what their waits need, and what those ranks had entered before (calls,
  // the pieces of each word they give): a need met by that much was queued
  // by an earlier group, not this one.
  struct Held {
    std::set<int> ranks;
    std::vector<Need> needs;
    std::map<int, uint64_t> callsBefore;
    std::map<Word, uint64_t> piecesBefore;
  };
  bool satisfied(const Need& n);
  // Whether `n`, met, is met by what `h` entered and has not yet queued.
  static bool metBy(const Held& h, const Need& n);
  // Why this thread may not yet queue what it entered for `rank`: what it
  // waits for and the ranks missing; empty once it may. Under mutex_.
  std::string heldBecause(int rank);

  std::mutex mutex_;
  std::condition_variable entered_;
  // Bumped under mutex_ at every change, so that a thread spinning before it
  // sleeps (pass) looks at the gate again only when something moved.
  std::atomic<uint64_t> changes_{0};
  std::map<int, uint64_t> calls_;      // per rank, the resident calls its thread has entered
  std::map<Word, uint64_t> pieces_;    // per word, the pieces its writer has entered
  std::set<int> failed_;               // ranks whose communicator failed
  std::map<uint64_t, Held> held_;      // by thisThread()
  std::map<int, uint64_t> driver_;     // per rank, the thread that entered its latest call
};

}  // namespace loom
