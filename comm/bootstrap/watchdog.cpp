#include "comm/bootstrap/watchdog.hpp"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <utility>

#include "base/env.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/net/address.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/watchdog_message.hpp"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A connection on the listener must identify itself with a whole frame this soon.
constexpr auto kIdentifyWithin = std::chrono::seconds(2);
// Connections on the listener not yet done with; more are refused at once.
constexpr size_t kMaxIncoming = 64;
constexpr uint32_t kMaxFrameBytes = 8192;
// Heartbeats queued for a next rank that does not read them (it is stopped):
// beyond this, new beats are dropped rather than buffered.
constexpr size_t kMaxOutbox = 4096;
// Telling a rank of a failure: a rank that takes longer is unreachable.
constexpr milliseconds kNotifyTimeout{2000};
// Whether a rank's listener still takes connections, when this rank starts
// watching it: a refusal comes at once, so this only bounds a dark host.
constexpr milliseconds kProbeWithin{200};

class WatchdogRegistry;
WatchdogRegistry& watchdogRegistry();

// Every live watchdog of the process, stopped at exit.
class WatchdogRegistry {
 public:
  void add(Watchdog* w) {
    std::lock_guard lock(mutex_);
    if (!hooked_) hooked_ = std::atexit([] { watchdogRegistry().stopAll(); }) == 0;
    live_.push_back(w);
  }
  void remove(Watchdog* w) {
    std::lock_guard lock(mutex_);
    std::erase(live_, w);
  }
  void stopAll() {
    std::lock_guard lock(mutex_);
    for (Watchdog* w : live_) w->stop();
  }

 private:
  std::mutex mutex_;
  bool hooked_ = false;
  std::vector<Watchdog*> live_;
};

WatchdogRegistry& watchdogRegistry() {
  static auto* r = new WatchdogRegistry;  // never destroyed: the atexit hook may run after static destructors
  return *r;
}

// Heartbeat, Goodbye and ProgressQuery carry only their sender.
std::vector<std::byte> rankPayload(int rank) { return WatchdogMessage{.from = rank}.encode(); }

}  // namespace

struct Watchdog::Incoming {
  net::Socket socket;
  FrameReader reader;
  Deadline identifyBy;
  int from = -1;  // the rank whose heartbeat stream this is, once it has said so
};

Watchdog::Settings Watchdog::Settings::fromEnv(milliseconds timeout) {
  Settings s;
  s.heartbeat = milliseconds(env::getInt("LOOM_HEARTBEAT_MS", 0, 3'600'000));
  s.timeout = timeout;
  return s;
}

Watchdog::Watchdog(const Secret& secret, int rank, std::vector<std::string> addresses, net::Socket listener,
                   Settings settings, Handlers handlers)
    : secret_(secret),
      rank_(rank),
      nranks_(static_cast<int>(addresses.size())),
      next_((rank + 1) % nranks_),
      prev_((rank + nranks_ - 1) % nranks_),
      addresses_(std::move(addresses)),
      listener_(std::move(listener)),
      settings_(settings),
      handlers_(std::move(handlers)) {
  thread_ = std::thread([this] { run(); });
  watchdogRegistry().add(this);
}

Watchdog::~Watchdog() {
  watchdogRegistry().remove(this);
  stop();
}

void Watchdog::stop() {
  std::call_once(stopped_, [this] {
    stop_.cancel();
    thread_.join();
  });
}

void Watchdog::run() {
  LogRankScope scope(rank_);
  connectNext(Deadline::after(settings_.timeout));
  prevHeard_ = Clock::now();
  std::vector<std::unique_ptr<Incoming>> incoming;
  const auto silence = settings_.heartbeat * kSilentBeats;
  while (!stop_.cancelled()) {
    if (handlers_.tick) handlers_.tick();
    const auto now = Clock::now();
    if (settings_.heartbeat.count() > 0) {
      if (now >= nextBeat_) beat(now);
      if (prevUnheard_ && now >= nextPrevProbe_) probeUnheardPrev();
      const bool watched = prev_ >= 0 && !prevLeft_ && !isDeclared(prev_);
      if (watched && now - prevHeard_ > silence) {
        declare(prev_, "sent no heartbeat for " + std::to_string(silence.count()) +
                           " ms (LOOM_HEARTBEAT_MS x " + std::to_string(kSilentBeats) +
                           "): it is stopped, or its host is unreachable");
      }
    }
    std::erase_if(incoming, [](const auto& in) {
      if (in->from >= 0 || !in->identifyBy.expired()) return false;
      LOOM_WARN(Bootstrap, "dropped a connection to the bootstrap listener: no whole frame within %lld s",
                static_cast<long long>(kIdentifyWithin.count()));
      return true;
    });

    std::vector<pollfd> fds{{stop_.fd(), POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    for (const auto& in : incoming) fds.push_back({in->socket.fd(), POLLIN, 0});
    milliseconds wait{1000};
    if (settings_.heartbeat.count() > 0) {
      wait = std::clamp(std::chrono::duration_cast<milliseconds>(nextBeat_ - Clock::now()), milliseconds(0), wait);
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) continue;
    if (fds[0].revents != 0) break;
    for (size_t i = 0; i < incoming.size(); ++i) {
      if (fds[i + 2].revents != 0 && !serve(*incoming[i])) incoming[i].reset();
    }
    std::erase(incoming, nullptr);
    if (prevEnded_) {
      declareEndedPrev(incoming);
    } else if (fds[1].revents != 0) {
      acceptPending(incoming);
    }
  }
  if (!abandoned_.load(std::memory_order_acquire)) sayGoodbye();
}

size_t Watchdog::acceptPending(std::vector<std::unique_ptr<Incoming>>& incoming) {
  size_t taken = 0;
  for (;;) {
    net::Socket socket;
    try {
      socket = listener_.accept(Deadline::after(milliseconds(0)), nullptr);
    } catch (const Error&) {
      return taken;  // none waiting (or one went before we took it)
    }
    if (incoming.size() >= kMaxIncoming) {
      LOOM_WARN(Bootstrap, "refused a connection to the bootstrap listener: %zu are open already", incoming.size());
      continue;
    }
    incoming.push_back(std::make_unique<Incoming>(
        Incoming{std::move(socket), FrameReader(secret_, kMaxFrameBytes), Deadline::after(kIdentifyWithin)}));
    ++taken;
  }
}

void Watchdog::declareEndedPrev(std::vector<std::unique_ptr<Incoming>>& incoming) {
  // A rank that learnt of a failure told every rank before its
  // communicator could be aborted (declare): that notice was connected to
  // this listener before its heartbeats ended. Read first, it names the
  // rank that failed, not the one that left because of it.
  const size_t taken = acceptPending(incoming);
  for (size_t i = incoming.size() - taken; i < incoming.size(); ++i) {
    if (!serve(*incoming[i])) incoming[i].reset();
  }
  std::erase(incoming, nullptr);
  const Ended ended = *std::exchange(prevEnded_, std::nullopt);
  declare(ended.rank, ended.why);  // nothing, where a notice named it already
}

net::Socket Watchdog::connectTo(int rank, Deadline deadline, const Cancellation* cancel) const {
  const auto& address = addresses_[static_cast<size_t>(rank)];
  // Its listener was up for the ring: a refusal means the rank is gone.
  return net::Socket::connect(net::SocketAddress::parse(address), deadline, cancel,
                              "rank " + std::to_string(rank) + " at " + address, net::Socket::Refused::Fail);
}

void Watchdog::sendTo(int rank, FrameType type, std::span<const std::byte> payload, Deadline deadline,
                      const Cancellation* cancel) const {
  auto socket = connectTo(rank, deadline, cancel);
  sendFrame(socket, type, secret_, payload, deadline, cancel);
}

void Watchdog::connectNext(Deadline deadline) {
  try {
    toNext_ = connectTo(next_, deadline, &stop_);
    // The first heartbeat names the stream, also when no more follow.
    outbox_ = encodeFrame(FrameType::Heartbeat, secret_, rankPayload(rank_));
    beat(Clock::now());
  } catch (const Error& e) {
    if (!stop_.cancelled()) LOOM_WARN(Bootstrap, "cannot send heartbeats to rank %d: %s", next_, e.what());
  }
}

void Watchdog::beat(Clock::time_point now) {
  nextBeat_ = now + settings_.heartbeat;
  if (!toNext_.valid()) return;
  if (outbox_.size() < kMaxOutbox) {
    const auto frame = encodeFrame(FrameType::Heartbeat, secret_, rankPayload(rank_));
    outbox_.insert(outbox_.end(), frame.begin(), frame.end());
  }
  try {
    const size_t n = toNext_.sendSome(outbox_, {});
    outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(n));
  } catch (const Error& e) {
    // The next rank is gone; its own next watches it.
    LOOM_INFO(Bootstrap, "stopped sending heartbeats to rank %d: %s", next_, e.what());
    toNext_.close();
  }
}

bool Watchdog::serve(Incoming& in) {
  try {
    while (auto frame = in.reader.read(in.socket)) {
      const auto m = WatchdogMessage::decode(*frame, nranks_, rank_);
      switch (m.type) {
        case FrameType::Heartbeat:
          // From the previous live rank, or from one that is becoming it (it
          // learnt of a failure between us before this rank did).
          if (in.from < 0) {
            in.from = m.from;
            in.socket.setLabel("rank " + std::to_string(m.from));
          } else if (m.from != in.from) {
            throw Error(loomRemoteError, "heartbeat from rank " + std::to_string(m.from) + " on rank " +
                                             std::to_string(in.from) + "'s stream");
          }
          if (m.from == prev_) {
            prevHeard_ = Clock::now();
            prevUnheard_ = false;
          }
          break;
        case FrameType::Goodbye:
          if (m.from == prev_) prevLeft_ = true;
          return false;
        case FrameType::FailureNotice:
          if (!isDeclared(m.failed)) {
            declared_.push_back(m.failed);
            handlers_.onFailure(m.failed, m.text + " (seen by rank " + std::to_string(m.from) + ")");
            closeRing(m.failed);
          }
          return false;
        case FrameType::ShrinkOffer:
          {
            std::lock_guard lock(offersMutex_);
            offers_[{m.from, m.epoch}] = m.uniqueId;
          }
          offersChanged_.notify_all();
          return false;
        case FrameType::MismatchNotice:
          handlers_.onMismatch(m.from, m.text);
          return false;
        case FrameType::LossNotice:
          handlers_.onLoss(m.from, m.text);
          return false;
        case FrameType::ProgressQuery: {
          const WatchdogMessage report{.type = FrameType::ProgressReport,
                                       .from = rank_,
                                       .text = handlers_.progress->describe(),
                                       .progress = handlers_.progress->snapshot()};
          sendFrame(in.socket, FrameType::ProgressReport, secret_, report.encode(), Deadline::after(kNotifyTimeout), &stop_);
          return false;
        }
        default:
          throw Error(loomRemoteError, "a progress report nobody asked for");
      }
    }
    return true;
  } catch (const Error& e) {
    if (in.from >= 0 && in.from == prev_ && !prevLeft_) {
      prevEnded_ = Ended{.rank = prev_,
                         .why = std::string("its heartbeat connection ended without a goodbye (") + e.what() +
                                "): the process died or aborted its communicator"};
    } else if (in.reader.midFrame() || e.code() != loomRemoteError) {
      LOOM_WARN(Bootstrap, "dropped a connection to the bootstrap listener: %s", e.what());
    } else {
      LOOM_INFO(Bootstrap, "a connection to the bootstrap listener closed between frames");
    }
    return false;
  }
}

void Watchdog::declare(int rank, const std::string& why) {
  if (isDeclared(rank)) return;
  declared_.push_back(rank);
  handlers_.onFailure(rank, why + " (seen by rank " + std::to_string(rank_) + ")");
  std::vector<int> others;
  for (int r = 0; r < nranks_; ++r) {
    if (r != rank_ && !isDeclared(r)) others.push_back(r);
  }
  // Not cancelled by stop(): a program that hears of the failure may abort
  // this rank's communicator at once, and the rank watching this one would
  // then name this rank, not the one that failed. The abort waits for them
  // (each send bounded by kNotifyTimeout).
  tell(others, {.type = FrameType::FailureNotice, .from = rank_, .failed = rank, .text = why}, "of the failure",
       nullptr);
  closeRing(rank);
}

milliseconds Watchdog::rewatchWithin() const {
  // A live rank's listener answers at once; one across a dark link would
  // hold this thread, whose own watch must not fall silent meanwhile.
  const milliseconds beat = settings_.heartbeat.count() > 0 ? settings_.heartbeat : kNotifyTimeout;
  return std::clamp(beat, milliseconds(50), kNotifyTimeout);
}

bool Watchdog::isDeclared(int rank) const {
  return std::find(declared_.begin(), declared_.end(), rank) != declared_.end();
}

int Watchdog::nearestLive(int from, int step) const {
  for (int r = (from + step + nranks_) % nranks_; r != rank_; r = (r + step + nranks_) % nranks_) {
    if (!isDeclared(r)) return r;
  }
  return -1;
}

void Watchdog::closeRing(int failed) {
  if (failed == next_) {
    // Heartbeats go to the next live rank now, which watches this one.
    toNext_.close();
    outbox_.clear();
    next_ = nearestLive(next_, +1);
    if (next_ >= 0) connectNext(Deadline::after(rewatchWithin()));
  }
  if (failed == prev_ && !prevLeft_) {
    // The failed rank watched its own previous rank: this one does now, or
    // two neighbours dying together would leave the first unnamed. Its
    // heartbeats come once it learns of the failure; a listener that
    // refuses a connection says at once that it is gone too.
    prev_ = nearestLive(prev_, -1);
    prevHeard_ = Clock::now();
    prevUnheard_ = prev_ >= 0;
    probeUnheardPrev();
  }
}

void Watchdog::probeUnheardPrev() {
  if (!prevUnheard_ || prev_ < 0 || isDeclared(prev_)) return;
  // Until its first heartbeat, once a period: a rank that died with (or
  // just after) the one before this rank never sends one, and its listener
  // refuses at once, long before its silence would count.
  nextPrevProbe_ = Clock::now() + rewatchWithin();
  try {
    connectTo(prev_, Deadline::after(std::min(kProbeWithin, rewatchWithin())), &stop_);
  } catch (const Error& e) {
    if (e.code() == loomRemoteError) {
      declare(prev_, std::string("its listener refused a connection once the rank after it had failed (") + e.what() +
                         "): it is gone too");
    }
  }
}

void Watchdog::reportMismatch(const std::string& what) {
  tellEveryone({.type = FrameType::MismatchNotice, .from = rank_, .text = what}, "that the ranks are out of step");
}

void Watchdog::reportLoss(const std::string& what, int skip) {
  tellEveryone({.type = FrameType::LossNotice, .from = rank_, .text = what}, "what a call lost", skip);
}

void Watchdog::tellEveryone(const WatchdogMessage& notice, const char* what, int skip) {
  std::vector<int> others;
  for (int r = 0; r < nranks_; ++r) {
    if (r != rank_ && r != skip) others.push_back(r);
  }
  tell(others, notice, what, &stop_);
}

void Watchdog::tell(std::span<const int> ranks, const WatchdogMessage& notice, const char* what,
                    const Cancellation* cancel) {
  constexpr int kAtOnce = 16;
  const auto payload = notice.encode();
  const auto tellOne = [&](int r) {
    try {
      sendTo(r, notice.type, payload, Deadline::after(kNotifyTimeout), cancel);
    } catch (const Error& e) {
      LOOM_INFO(Bootstrap, "could not tell rank %d %s: %s", r, what, e.what());
    }
  };
  for (size_t first = 0; first < ranks.size(); first += kAtOnce) {
    std::vector<std::thread> senders;
    for (size_t i = first; i < std::min(ranks.size(), first + kAtOnce); ++i) {
      try {
        senders.emplace_back(tellOne, ranks[i]);
      } catch (const std::system_error&) {
        tellOne(ranks[i]);  // no thread to be had: this one, then
      }
    }
    for (auto& s : senders) s.join();
  }
}

void Watchdog::sayGoodbye() {
  if (!toNext_.valid()) return;
  const auto frame = encodeFrame(FrameType::Goodbye, secret_, rankPayload(rank_));
  outbox_.insert(outbox_.end(), frame.begin(), frame.end());
  try {
    toNext_.sendAll(outbox_, Deadline::after(kNotifyTimeout), nullptr);
  } catch (const Error& e) {
    LOOM_INFO(Bootstrap, "could not say goodbye to rank %d: %s", next_, e.what());
  }
}

void Watchdog::sendOffer(int to, uint32_t epoch, std::span<const std::byte> uniqueId, Deadline deadline) {
  const WatchdogMessage offer{.type = FrameType::ShrinkOffer,
                             .from = rank_,
                             .epoch = epoch,
                             .uniqueId = {uniqueId.begin(), uniqueId.end()}};
  sendTo(to, FrameType::ShrinkOffer, offer.encode(), deadline, nullptr);
}

std::vector<std::byte> Watchdog::awaitOffer(int from, uint32_t epoch, Deadline deadline) {
  std::unique_lock lock(offersMutex_);
  const auto key = std::make_pair(from, epoch);
  if (!offersChanged_.wait_until(lock, deadline.at(), [&] { return offers_.count(key) != 0; })) {
    throw Error(loomTimeout, "no offer from rank " + std::to_string(from) + " before the deadline");
  }
  auto id = std::move(offers_[key]);
  offers_.erase(key);
  return id;
}

std::optional<Progress::Snapshot> Watchdog::probe(int rank, milliseconds within) {
  const auto deadline = Deadline::after(within);
  try {
    auto socket = connectTo(rank, deadline, &stop_);
    sendFrame(socket, FrameType::ProgressQuery, secret_, rankPayload(rank_), deadline, &stop_);
    const auto payload = recvFrame(socket, FrameType::ProgressReport, secret_, kMaxFrameBytes, deadline, &stop_);
    const auto m = WatchdogMessage::decode({FrameType::ProgressReport, payload}, nranks_, rank_);
    if (m.from != rank) return std::nullopt;
    return m.progress;
  } catch (const Error& e) {
    LOOM_INFO(Bootstrap, "rank %d did not say where it is: %s", rank, e.what());
    return std::nullopt;
  }
}

std::vector<std::string> Watchdog::survey(milliseconds within, std::span<const int> failed) {
  const auto deadline = Deadline::after(within);
  std::vector<std::string> answers(static_cast<size_t>(nranks_));
  answers[static_cast<size_t>(rank_)] = handlers_.progress->describe();
  struct Asked {
    int rank;
    net::Socket socket;
    FrameReader reader;
  };
  std::vector<Asked> asked;
  for (int r : failed) {
    if (r >= 0 && r < nranks_ && r != rank_) answers[static_cast<size_t>(r)] = "failed, not asked";
  }
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_ || !answers[static_cast<size_t>(r)].empty()) continue;
    try {
      auto socket = connectTo(r, deadline, nullptr);
      sendFrame(socket, FrameType::ProgressQuery, secret_, rankPayload(rank_), deadline, nullptr);
      asked.push_back({r, std::move(socket), FrameReader(secret_, kMaxFrameBytes)});
    } catch (const Error& e) {
      answers[static_cast<size_t>(r)] = std::string("unreachable (") + e.what() + ")";
    }
  }
  while (!asked.empty() && !deadline.expired()) {
    std::vector<pollfd> fds;
    for (const auto& a : asked) fds.push_back({a.socket.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), deadline.pollTimeoutMs()) <= 0) continue;
    for (size_t i = 0; i < asked.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto& a = asked[i];
      std::string& answer = answers[static_cast<size_t>(a.rank)];
      try {
        auto frame = a.reader.read(a.socket);
        if (!frame) continue;
        const auto m = WatchdogMessage::decode(*frame, nranks_, rank_);
        if (m.type != FrameType::ProgressReport || m.from != a.rank) throw Error(loomRemoteError, "a malformed answer");
        answer = m.text;
      } catch (const Error& e) {
        answer = std::string("no answer (") + e.what() + ")";
      }
    }
    std::erase_if(asked, [&](const Asked& a) { return !answers[static_cast<size_t>(a.rank)].empty(); });
  }
  for (const auto& a : asked) {
    answers[static_cast<size_t>(a.rank)] = "no answer within " + std::to_string(within.count()) + " ms";
  }
  return answers;
}

}  // namespace loom
