#include "comm/engine/message_match.hpp"

#include "base/error.hpp"

namespace loom {

std::string describeP2pMessage(const transport::SlotTag& tag) {
  const std::string size = "a " + std::to_string(tag.messageBytes) + "-byte ";
  if (tag.call == 0 && tag.message == 0) return size + "point-to-point message";
  return size + "piece of collective #" + std::to_string(tag.message);
}

void requireMatch(const transport::SlotTag& tag, const ExpectedMessage& expected, uint64_t offset, int peer,
                  const std::string& what) {
  const bool sameMessage =
      tag.messageBytes == expected.bytes && tag.message == expected.message && tag.call == expected.call;
  if (sameMessage && tag.offset == offset) return;
  std::string message = (what.empty() ? "" : what + ": ") + "rank " + std::to_string(peer) + " sent ";
  if (sameMessage) {
    message += "the piece at offset " + std::to_string(tag.offset) + " of " + expected.describe(tag) +
               " where offset " + std::to_string(offset) + " was due";
  } else {
    message += expected.describe(tag) + " where this rank expects " + expected.describe(expected.tagAt(offset));
  }
  throw Error(loomInvalidUsage, message +
                                    " (every rank must make the same calls in the same order, with matching counts, "
                                    "types, ops, roots and peers)");
}

}  // namespace loom
