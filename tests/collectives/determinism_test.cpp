// LOOM_DETERMINISTIC=1: reductions fold every element's operands in rank
// order, in one pass. So on random floats, every algorithm that may run them
// (the tuner's pick, shm, direct) must give exactly the bits of the rank-order
// fold that each rank computes itself with the same kernel, at every size,
// and ten repeated runs must agree.
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collectives/cpu/reduce.hpp"
#include "tests/support/ranks.hpp"
#include "tools/check/collective_check.hpp"

namespace {

using loom::test::ScopedEnv;

enum class Kind { AllReduce, ReduceScatter, Reduce };

struct Op {
  loomRedOp_t api;
  loom::cpu::ReduceOp kernel;
  bool average;
};

// Rank r's random input of `elements`, the same on every rank that asks.
std::vector<std::byte> input(loomDataType_t type, int rank, size_t elements) {
  std::vector<std::byte> v(elements * loom::check::typeSize(type));
  std::mt19937_64 random(static_cast<uint64_t>(rank) * 7919 + elements);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  for (size_t i = 0; i < elements; ++i) loom::check::storeValue(type, v.data(), i, uniform(random));
  return v;
}

// The rank-order fold of every rank's input, as run.cpp finishes it (avg: the sum times 1/n).
std::vector<std::byte> reference(loomDataType_t type, Op op, int nranks, size_t elements) {
  std::vector<std::vector<std::byte>> inputs;
  std::vector<const void*> sources;
  for (int r = 0; r < nranks; ++r) inputs.push_back(input(type, r, elements));
  for (const auto& in : inputs) sources.push_back(in.data());
  std::vector<std::byte> out(elements * loom::check::typeSize(type));
  loom::cpu::reduce(type, op.kernel, sources, out.data(), elements);
  if (op.average) {
    const void* sum = out.data();
    loom::cpu::reduce(type, loom::cpu::ReduceOp::PreMulSum, std::span(&sum, 1), out.data(), elements, 1.0 / nranks);
  }
  return out;
}

// Runs `kind` of `count` (per rank's result block) on every rank and
// returns the ranks that got bits other than the reference's.
std::string run(std::vector<loomComm_t>& comms, Kind kind, loomDataType_t type, Op op, size_t count) {
  const int n = static_cast<int>(comms.size());
  const size_t size = loom::check::typeSize(type);
  const size_t elements = kind == Kind::ReduceScatter ? count * static_cast<size_t>(n) : count;
  const std::vector<std::byte> expected = reference(type, op, n, elements);
  std::vector<std::string> wrong(static_cast<size_t>(n));
  loom::test::onThreads(n, [&](int r) {
    const std::vector<std::byte> in = input(type, r, elements);
    std::vector<std::byte> out(count * size + 1);
    loomComm_t comm = comms[static_cast<size_t>(r)];
    loomResult_t result = loomInternalError;
    const std::byte* want = expected.data();
    switch (kind) {
      case Kind::AllReduce: result = loomAllReduce(in.data(), out.data(), count, type, op.api, comm, nullptr); break;
      case Kind::ReduceScatter:
        result = loomReduceScatter(in.data(), out.data(), count, type, op.api, comm, nullptr);
        want += static_cast<size_t>(r) * count * size;
        break;
      case Kind::Reduce: result = loomReduce(in.data(), out.data(), count, type, op.api, n - 1, comm, nullptr); break;
    }
    if (result != loomSuccess) {
      wrong[static_cast<size_t>(r)] = loomGetLastError(comm);
    } else if ((kind != Kind::Reduce || r == n - 1) && count != 0 && std::memcmp(out.data(), want, count * size) != 0) {
      wrong[static_cast<size_t>(r)] = "rank " + std::to_string(r) + " differs from the rank-order fold";
    }
  });
  std::string all;
  for (const auto& w : wrong) all += w.empty() ? "" : w + "; ";
  return all;
}

// Sanitizer builds (LOOM_TEST_FULL_MATRIX=0) run a slice, to fit CI's time.
constexpr bool kFull = LOOM_TEST_FULL_MATRIX;
const Op kSum{loomSum, loom::cpu::ReduceOp::Sum, false};
const Op kAvg{loomAvg, loom::cpu::ReduceOp::Sum, true};
const std::vector<Op> kOps = kFull ? std::vector<Op>{kSum, {loomProd, loom::cpu::ReduceOp::Prod, false},
                                                     {loomMax, loom::cpu::ReduceOp::Max, false}, kAvg}
                                   : std::vector<Op>{kSum, kAvg};
const std::vector<loomDataType_t> kTypes = kFull ? std::vector<loomDataType_t>{loomFloat32, loomFloat64,
                                                                               loomBfloat16, loomFloat16}
                                                 : std::vector<loomDataType_t>{loomFloat32, loomBfloat16};

TEST(Determinism, EveryAlgorithmGivesTheRankOrderBits) {
  ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  for (const char* algo : {"", "shm", "direct"}) {
    for (int n : kFull ? std::vector<int>{2, 3} : std::vector<int>{3}) {
      ScopedEnv algorithm("LOOM_ALGO", algo);
      auto comms = loom::test::initThreadComms(n);
      for (loomDataType_t type : kTypes) {
        for (const Op& op : kOps) {
          // 70001 float32s span two shared-segment steps; 7 and 1023 take the small paths.
          for (size_t count : kFull ? std::vector<size_t>{7, 1023, 70001} : std::vector<size_t>{7, 70001}) {
            for (Kind kind : {Kind::AllReduce, Kind::ReduceScatter, Kind::Reduce}) {
              const std::string wrong = run(comms, kind, type, op, count);
              ASSERT_TRUE(wrong.empty()) << "LOOM_ALGO='" << algo << "' " << n << " ranks, type " << type << " op "
                                         << op.api << " count " << count << " kind " << static_cast<int>(kind) << ": "
                                         << wrong;
            }
          }
        }
      }
      loom::test::destroyAll(comms);
    }
  }
}

TEST(Determinism, TenRunsAgreeBitwise) {
  ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  auto comms = loom::test::initThreadComms(3);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(run(comms, Kind::AllReduce, loomFloat32, kSum, kFull ? 300001 : 70001), "") << "run " << i;
  }
  loom::test::destroyAll(comms);
}

TEST(Determinism, AlgorithmsThatDoNotFoldInRankOrderAreRefused) {
  ScopedEnv deterministic("LOOM_DETERMINISTIC", "1");
  ScopedEnv algorithm("LOOM_ALGO", "allreduce:ring");
  auto comms = loom::test::initThreadComms(2);
  std::vector<loomResult_t> results(2);
  loom::test::onThreads(2, [&](int r) {
    float x = 1;
    results[static_cast<size_t>(r)] = loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comms[static_cast<size_t>(r)], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(comms[static_cast<size_t>(r)])).find("LOOM_DETERMINISTIC"), std::string::npos)
        << loomGetLastError(comms[static_cast<size_t>(r)]);
  }
  loom::test::destroyAll(comms);
}

}  // namespace
