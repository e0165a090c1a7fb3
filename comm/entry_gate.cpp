#include "comm/entry_gate.hpp"

#include <atomic>

#include "base/backoff.hpp"
#include "base/error.hpp"
#include "base/shared_by_key.hpp"

namespace loom {
namespace {
// Takes `m`, trying for a while before sleeping on it: a peer holds the gate
// for a fraction of a microsecond, and a mutex's sleep and wake-up cost
// tens (20 us a hand-off between two threads on a 2-vCPU VM, 1.2-1.6 with
// this and pass's spin).
void lockSoon(std::mutex& m) {
  for (int i = 0; i < 128; ++i) {
    if (m.try_lock()) return;
    cpuRelax();
  }
  m.lock();
}
}  // namespace

uint64_t EntryGate::thisThread() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

std::shared_ptr<EntryGate> EntryGate::of(const std::string& key) { return sharedByKey<EntryGate>(key); }

void EntryGate::noteCreator(int rank, uint64_t thread) {
  std::lock_guard lock(mutex_);
  driver_.try_emplace(rank, thread);
}

void EntryGate::enterCall(int rank, const std::vector<bool>& besides) {
  {
    lockSoon(mutex_);
    std::lock_guard lock(mutex_, std::adopt_lock);
    Held& mine = held_[thisThread()];
    mine.ranks.insert(rank);
    mine.callsBefore.try_emplace(rank, calls_[rank]);
    const uint64_t call = ++calls_[rank];
    driver_[rank] = thisThread();
    for (int r = 0; r < static_cast<int>(besides.size()); ++r) {
      if (besides[static_cast<size_t>(r)]) mine.needs.push_back({.rank = rank, .writer = r, .call = true, .upTo = call});
    }
    changes_.fetch_add(1, std::memory_order_release);
  }
  entered_.notify_all();
}

void EntryGate::enterMessages(int rank, std::span<const Message> messages, const std::vector<bool>& besides) {
  {
    lockSoon(mutex_);
    std::lock_guard lock(mutex_, std::adopt_lock);
    Held& mine = held_[thisThread()];
    mine.ranks.insert(rank);
    driver_[rank] = thisThread();
    for (const Message& m : messages) {
      if (m.pieces == 0) continue;
      // This rank's word counts what it gives; the peer's, what it waits for.
      const Word given = m.send ? Word{rank, m.peer, false} : Word{m.peer, rank, true};
      const Word waited = m.send ? Word{rank, m.peer, true} : Word{m.peer, rank, false};
      mine.piecesBefore.try_emplace(given, pieces_[given]);
      const uint64_t count = pieces_[given] += m.pieces;
      const uint64_t upTo = !m.send || m.takenAtEnd ? count : count > 2 ? count - 2 : 0;
      if (static_cast<size_t>(m.peer) < besides.size() && besides[static_cast<size_t>(m.peer)] && upTo != 0) {
        mine.needs.push_back({.rank = rank, .writer = m.peer, .word = waited, .upTo = upTo});
      }
    }
    changes_.fetch_add(1, std::memory_order_release);
  }
  entered_.notify_all();
}

bool EntryGate::satisfied(const Need& n) { return n.call ? calls_[n.writer] >= n.upTo : pieces_[n.word] >= n.upTo; }

bool EntryGate::metBy(const Held& h, const Need& n) {
  if (n.call) {
    const auto before = h.callsBefore.find(n.writer);
    return before != h.callsBefore.end() && before->second < n.upTo;
  }
  const auto before = h.piecesBefore.find(n.word);
  return before != h.piecesBefore.end() && before->second < n.upTo;
}

std::string EntryGate::heldBecause(int rank) {
  const uint64_t self = thisThread();
  // From this thread's waits to their writers, and on to the threads held at
  // the gate whose entries meet them (not yet queued): their waits count too.
  std::set<uint64_t> seen{self};
  std::vector<uint64_t> todo{self};
  std::set<int> seenRanks;
  std::vector<std::pair<Need, bool>> unmet;  // and whether it is this thread's own
  for (size_t i = 0; i < todo.size(); ++i) {
    const auto at = held_.find(todo[i]);
    if (at == held_.end()) continue;
    seenRanks.insert(at->second.ranks.begin(), at->second.ranks.end());
    for (const Need& n : at->second.needs) {
      if (at->second.ranks.contains(n.writer) || failed_.contains(n.writer)) continue;
      const auto driver = driver_.find(n.writer);
      if (todo[i] == self && driver != driver_.end() && driver->second == self) continue;
      if (!satisfied(n)) {
        unmet.emplace_back(n, todo[i] == self);
        continue;
      }
      for (const auto& [thread, held] : held_) {
        if (held.ranks.contains(n.writer) && metBy(held, n) && seen.insert(thread).second) todo.push_back(thread);
      }
    }
  }
  // This thread's own unmet needs hold it; another's hold it unless a thread
  // of this set is to meet them (entering later, once past the gate).
  const Need* first = nullptr;
  std::set<int> missing;
  for (const auto& [n, own] : unmet) {
    if (!own && seenRanks.contains(n.writer)) continue;
    if (first == nullptr) first = &n;
    missing.insert(n.writer);
  }
  if (first == nullptr) return {};
  std::string ranks;
  for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const auto [sender, receiver, taken] = first->word;
  const std::string part =
      first->call ? "call #" + std::to_string(first->upTo)
      : taken     ? "send to rank " + std::to_string(receiver) + " (piece " + std::to_string(first->upTo) + ")"
                  : "receive from rank " + std::to_string(sender) + " (piece " + std::to_string(first->upTo) + ")";
  const std::string whose = first->rank == rank ? "its " + part
                                                : "rank " + std::to_string(first->rank) + "'s " + part +
                                                      ", which this rank's waits reach";
  const char* never = first->call ? "made that call" : taken ? "made its receive" : "made its send";
  return whose + ": rank(s) " + ranks + ", thread(s) of this process on its GPU, never " + never;
}

void EntryGate::pass(int rank, std::chrono::milliseconds timeout) {
  const uint64_t self = thisThread();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  lockSoon(mutex_);
  std::unique_lock lock(mutex_, std::adopt_lock);
  if (!held_.contains(self)) return;
  std::string why;
  const auto through = [&] {
    why = heldBecause(rank);
    return why.empty() || failed_.contains(rank);
  };
  bool passed = through();
  // A peer's thread mostly enters within microseconds of this one, and a
  // wake-up from the condition variable costs more (22 us a hand-off on a
  // 2-vCPU VM): first spin, then yield, as every wait of Loom does
  // (base/backoff.hpp), looking at the gate again only when it changed; only
  // then sleep.
  Backoff backoff;
  for (bool asleep = false; !passed && !asleep;) {
    const uint64_t seen = changes_.load(std::memory_order_acquire);
    lock.unlock();
    while (!asleep && changes_.load(std::memory_order_acquire) == seen) {
      backoff.idle([](Backoff::Phase) {}, [&](std::chrono::microseconds) { asleep = true; });
    }
    lockSoon(mutex_);
    lock = std::unique_lock(mutex_, std::adopt_lock);
    passed = through();
  }
  if (!passed) passed = entered_.wait_until(lock, deadline, through);
  held_.erase(self);
  changes_.fetch_add(1, std::memory_order_release);
  lock.unlock();
  entered_.notify_all();
  if (passed) return;
  throw Error(loomRemoteError, "rank " + std::to_string(rank) + " waited " + std::to_string(timeout.count()) +
                                   " ms (LOOM_TIMEOUT_MS) to queue " + why +
                                   " (a stream waits for such a peer only once the peer's thread has made the call, "
                                   "since that thread may synchronize the device first)");
}

void EntryGate::leave() noexcept {
  {
    std::lock_guard lock(mutex_);
    held_.erase(thisThread());
    changes_.fetch_add(1, std::memory_order_release);
  }
  entered_.notify_all();
}

void EntryGate::fail(int rank) noexcept {
  try {
    std::lock_guard lock(mutex_);
    failed_.insert(rank);
    changes_.fetch_add(1, std::memory_order_release);
  } catch (const std::exception&) {
    // Out of memory for one set entry: the gate then waits out its timeout.
  }
  entered_.notify_all();
}

}  // namespace loom
