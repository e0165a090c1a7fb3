// What a bootstrap listener or a rank reads from a stranger or a broken
// peer. The bytes are assembled into frames by FrameReader in pieces of any
// size, as they arrive from a socket, and each frame's payload goes to the
// decoder of its type; a unique id (which users pass between processes
// themselves) goes to its decoder. The property: every defect is a
// loom::Error. Nothing else may escape, read out of bounds (ASan) or meet
// undefined behavior (UBSan).
#include <fuzzer/FuzzedDataProvider.h>
#include <loom/loom.h>

#include <cstdint>
#include <algorithm>
#include <span>
#include <vector>

#include "base/error.hpp"
#include "comm/bootstrap/frame.hpp"
#include "comm/bootstrap/rendezvous.hpp"
#include "comm/bootstrap/unique_id.hpp"
#include "comm/bootstrap/watchdog_message.hpp"

namespace {

constexpr uint32_t kMaxFrameBytes = 64 * 1024;
constexpr int kRanks = 8;
constexpr int kSelf = 3;

const loom::Secret& jobSecret() {
  static const loom::Secret secret = [] {
    loom::Secret s;
    for (size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<std::byte>(0xA0 + i);
    return s;
  }();
  return secret;
}

void decodePayload(const loom::Frame& frame) {
  switch (frame.type) {
    case loom::FrameType::Hello:
      loom::Hello::decode(frame.payload);
      break;
    case loom::FrameType::RootReply:
      loom::RootReply::decode(frame.payload);
      break;
    default:
      loom::WatchdogMessage::decode(frame, kRanks, kSelf);
  }
}

void decodeUniqueId(FuzzedDataProvider& in) {
  loomUniqueId id{};
  const auto bytes = in.ConsumeBytes<char>(sizeof id.internal);
  std::copy(bytes.begin(), bytes.end(), id.internal);
  try {
    loom::decodeUniqueId(id);
  } catch (const loom::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) decodeUniqueId(in);
  const size_t piece = in.ConsumeIntegralInRange<size_t>(1, 64);
  // Half the streams are frames with the job's secret, so that the payload
  // decoders are reached without first guessing 16 random bytes.
  std::vector<std::byte> stream;
  if (in.ConsumeBool()) {
    while (in.remaining_bytes() > 0) {
      const auto type = in.ConsumeIntegralInRange<uint16_t>(1, static_cast<uint16_t>(loom::kLastFrameType));
      const auto payload = in.ConsumeBytes<std::byte>(in.ConsumeIntegralInRange<size_t>(0, 4096));
      const auto frame = loom::encodeFrame(static_cast<loom::FrameType>(type), jobSecret(), payload);
      stream.insert(stream.end(), frame.begin(), frame.end());
    }
  } else {
    stream = in.ConsumeRemainingBytes<std::byte>();
  }

  loom::FrameReader reader(jobSecret(), kMaxFrameBytes);
  std::span<const std::byte> left(stream);
  try {
    while (!left.empty()) {
      auto chunk = left.first(std::min(piece, left.size()));
      left = left.subspan(chunk.size());
      while (!chunk.empty()) {
        if (auto frame = reader.feed(chunk)) {
          try {
            decodePayload(*frame);
          } catch (const loom::Error&) {
            // a malformed payload: the listener drops that connection
          }
        }
      }
    }
  } catch (const loom::Error&) {
    // a malformed header: the listener drops that connection
  }
  return 0;
}
