#include "comm/bootstrap/watchdog_message.hpp"

#include "base/bytes.hpp"
#include "base/error.hpp"

namespace loom {
namespace {

int checkedRank(int32_t rank, int nranks, int self, const char* role) {
  if (rank < 0 || rank >= nranks || rank == self) {
    throw Error(loomRemoteError, std::string("watchdog frame names rank ") + std::to_string(rank) + " as " + role +
                                     " (this is rank " + std::to_string(self) + " of " + std::to_string(nranks) + ")");
  }
  return rank;
}

}  // namespace

std::vector<std::byte> WatchdogMessage::encode() const {
  ByteWriter w;
  w.put(static_cast<int32_t>(from));
  switch (type) {
    case FrameType::FailureNotice:
      w.put(static_cast<int32_t>(failed));
      w.putString(text.substr(0, kMaxTextBytes));
      break;
    case FrameType::ShrinkOffer:
      w.put(epoch);
      w.putBytes(uniqueId);
      break;
    case FrameType::ProgressReport:
      w.put(static_cast<uint8_t>(progress.state));
      for (const Progress::Call& c : {progress.current, progress.previous}) {
        w.put(c.sequence);
        w.put(c.call);
        w.put(c.bytes);
        w.put(c.sentMask);
      }
      w.putString(text.substr(0, kMaxTextBytes));
      break;
    case FrameType::MismatchNotice:
    case FrameType::LossNotice:
      w.putString(text.substr(0, kMaxTextBytes));
      break;
    default:
      break;
  }
  return std::move(w.bytes());
}

WatchdogMessage WatchdogMessage::decode(const Frame& frame, int nranks, int self) {
  ByteReader r(frame.payload, "watchdog frame");
  WatchdogMessage m;
  m.type = frame.type;
  m.from = checkedRank(r.get<int32_t>(), nranks, self, "its sender");
  switch (frame.type) {
    case FrameType::Heartbeat:
    case FrameType::Goodbye:
    case FrameType::ProgressQuery:
      break;
    case FrameType::FailureNotice:
      m.failed = checkedRank(r.get<int32_t>(), nranks, self, "failed");
      m.text = r.getString(kMaxTextBytes);
      break;
    case FrameType::ShrinkOffer: {
      m.epoch = r.get<uint32_t>();
      if (r.remaining() > kMaxUniqueIdBytes) throw Error(loomRemoteError, "shrink offer with an oversized unique id");
      const auto id = r.take(r.remaining());
      m.uniqueId.assign(id.begin(), id.end());
      break;
    }
    case FrameType::ProgressReport: {
      const auto state = r.get<uint8_t>();
      if (state > static_cast<uint8_t>(Progress::State::Failed)) {
        throw Error(loomRemoteError, "progress report with state " + std::to_string(state));
      }
      m.progress.state = static_cast<Progress::State>(state);
      for (Progress::Call* c : {&m.progress.current, &m.progress.previous}) {
        c->sequence = r.get<uint32_t>();
        c->call = r.get<uint32_t>();
        c->bytes = r.get<uint64_t>();
        c->sentMask = r.get<uint64_t>();
      }
      m.text = r.getString(kMaxTextBytes);
      break;
    }
    case FrameType::MismatchNotice:
    case FrameType::LossNotice:
      m.text = r.getString(kMaxTextBytes);
      break;
    default:
      throw Error(loomRemoteError, "frame type " + std::to_string(static_cast<int>(frame.type)) +
                                       " is not a watchdog's");
  }
  r.expectEnd();
  return m;
}

}  // namespace loom
