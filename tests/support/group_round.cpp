#include "tests/support/group_round.hpp"

#include <cstddef>

#include "tools/check/collective_call.hpp"

namespace loom::test {

std::string runGroupRound(const std::vector<loomComm_t>& comms, int firstRank, int nranks, check::Coll coll,
                          size_t count, int root, GroupStreams streams) {
  const size_t n = comms.size();
  std::vector<check::Case> cases;
  std::vector<std::vector<std::byte>> send(n), recv(n);
  std::vector<loomStream_t> stream(n, nullptr);
  std::string failure;
  const auto fail = [&](const std::string& what) {
    if (failure.empty()) failure = what;
  };
  for (size_t i = 0; i < n; ++i) {
    const int rank = firstRank + static_cast<int>(i);
    cases.push_back({coll, loomInt32, check::Op::Sum, nranks, rank, root, count});
    send[i].resize(check::sendElements(cases[i]) * sizeof(int32_t));
    recv[i].resize(check::recvElements(cases[i]) * sizeof(int32_t));
    check::fillSend(cases[i], send[i].data());
    if (streams == GroupStreams::PerRank || (streams == GroupStreams::Shared && i == 0)) {
      if (loomStreamCreate(&stream[i]) != loomSuccess) fail("loomStreamCreate failed");
    } else if (streams == GroupStreams::Shared) {
      stream[i] = stream[0];
    }
  }
  if (loomGroupStart() != loomSuccess) fail("loomGroupStart failed");
  for (size_t i = 0; i < n; ++i) {
    if (check::callCollective(cases[i], send[i].data(), recv[i].data(), loomSum, comms[i], stream[i]) != loomSuccess) {
      fail("rank " + std::to_string(cases[i].rank) + ": " + loomGetLastError(comms[i]));
    }
  }
  if (loomGroupEnd() != loomSuccess) fail(std::string("loomGroupEnd: ") + loomGetLastError(nullptr));
  for (size_t i = 0; i < n; ++i) {
    if (stream[i] == nullptr || (streams == GroupStreams::Shared && i != 0)) continue;
    if (loomStreamSynchronize(stream[i]) != loomSuccess) fail(std::string("stream: ") + loomGetLastError(nullptr));
    loomStreamDestroy(stream[i]);
  }
  for (size_t i = 0; i < n && failure.empty(); ++i) {
    if (!check::hasResult(cases[i])) continue;
    const std::string wrong = check::checkResult(cases[i], recv[i].data());
    if (!wrong.empty()) fail("rank " + std::to_string(cases[i].rank) + ": " + wrong);
  }
  return failure;
}

}  // namespace loom::test
