#include "comm/bootstrap/watchdog_message.hpp"

#include "comm/base/bytes.hpp"
#include "comm/base/error.hpp"

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
    case FrameType::MismatchNotice:
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
    case FrameType::ProgressReport:
    case FrameType::MismatchNotice:
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
