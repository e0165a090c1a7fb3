#include "collectives/signature_check.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/datatype.hpp"
#include "base/env.hpp"
#include "base/error.hpp"

namespace loom::coll {
namespace {

// Fixed size and plain, so it travels as bytes; fields that do not apply to
// the collective are -1, so that only what matters can differ.
struct Signature {
  uint32_t sequence;
  int32_t kind;
  uint64_t count;
  int32_t type;
  int32_t op;       // cpu::ReduceOp, or -1 for data movement
  int32_t average;  // 1 for loomAvg
  int32_t root;     // -1 for unrooted collectives

  bool operator==(const Signature& o) const {
    return sequence == o.sequence && kind == o.kind && count == o.count && type == o.type && op == o.op &&
           average == o.average && root == o.root;
  }
};

Signature signatureOf(const Collective& c, uint32_t sequence) {
  using K = CollectiveKind;
  const bool reduces = c.kind == K::AllReduce || c.kind == K::Reduce || c.kind == K::ReduceScatter;
  const bool rooted = c.kind == K::Broadcast || c.kind == K::Reduce || c.kind == K::Gather || c.kind == K::Scatter;
  Signature s{};
  s.sequence = sequence;
  s.kind = static_cast<int32_t>(c.kind);
  s.count = c.count;
  s.type = static_cast<int32_t>(c.type);
  s.op = reduces ? static_cast<int32_t>(c.reduction.op) : -1;
  s.average = reduces && c.reduction.average ? 1 : 0;
  s.root = rooted ? c.root : -1;
  return s;
}

std::string describe(const Signature& s) {
  constexpr const char* kOps[] = {"sum", "prod", "min", "max", "premulsum"};
  std::string text = std::string(collectiveName(static_cast<CollectiveKind>(s.kind))) + " #" +
                     std::to_string(s.sequence) + " of count " + std::to_string(s.count) + " " +
                     datatypeName(static_cast<loomDataType_t>(s.type));
  if (s.op >= 0) text += s.average ? " avg" : std::string(" ") + kOps[s.op];
  if (s.root >= 0) text += " root " + std::to_string(s.root);
  return text;
}

}  // namespace

bool signatureCheckEnabled() { return env::getInt("LOOM_CHECK", 0, 1) == 1; }

void checkSignatures(Communicator& comm, const Collective& c, uint32_t sequence) {
  const int n = comm.size();
  std::vector<Signature> all(static_cast<size_t>(n));
  all[static_cast<size_t>(comm.rank())] = signatureOf(c, sequence);
  comm.bootstrap().allgather(std::as_writable_bytes(std::span(all)), sizeof(Signature));

  // Group the ranks by signature, in order of their first rank.
  std::vector<std::pair<Signature, std::vector<int>>> groups;
  for (int r = 0; r < n; ++r) {
    const Signature& s = all[static_cast<size_t>(r)];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == s; });
    if (it == groups.end()) it = groups.insert(groups.end(), {s, {}});
    it->second.push_back(r);
  }
  if (groups.size() == 1) return;
  std::string message = "LOOM_CHECK: the ranks called different collectives:";
  for (const auto& [s, ranks] : groups) {
    message += ranks.size() == 1 ? " rank " : " ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) message += (i ? "," : "") + std::to_string(ranks[i]);
    message += " called " + describe(s) + ";";
  }
  message.pop_back();
  throw Error(loomInvalidUsage, message);
}

}  // namespace loom::coll
