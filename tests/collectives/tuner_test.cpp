// The tuner's choices: the shared segment wherever every rank shares a node,
// never across nodes, and LOOM_ALGO obeyed or refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "base/env.hpp"
#include "base/error.hpp"
#include "collectives/cpu/host_executor.hpp"
#include "collectives/tuner.hpp"
#include "tests/support/ranks.hpp"

namespace loom::coll {
namespace {

using loom::test::ScopedEnv;

constexpr CollectiveKind kShmKinds[] = {CollectiveKind::AllReduce, CollectiveKind::AllGather,
                                        CollectiveKind::ReduceScatter, CollectiveKind::Broadcast,
                                        CollectiveKind::Reduce,    CollectiveKind::AlltoAll,
                                        CollectiveKind::Gather,    CollectiveKind::Scatter};

TEST(Tuner, OneNodeUsesTheSharedSegmentAtEverySize) {
  Tuner tuner({.nranks = 4, .nodes = 1, .sharedMemory = true}, Overrides{});
  for (CollectiveKind kind : kShmKinds) {
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20, size_t{1} << 30}) {
      const Choice choice = tuner.choose(kind, bytes, hostExecutor());
      EXPECT_STREQ(choice.algorithm->name, "shm") << collectiveName(kind) << " " << bytes;
      EXPECT_GT(choice.chunkBytes, 0u);
      EXPECT_EQ(choice.chunkBytes % 64, 0u);
    }
  }
}

TEST(Tuner, AcrossNodesOrOverSocketsNeverPicksTheSegment) {
  for (Layout layout : {Layout{.nranks = 4, .nodes = 2, .sharedMemory = false},
                        Layout{.nranks = 4, .nodes = 1, .sharedMemory = false}}) {
    Tuner tuner(layout, Overrides{});
    for (CollectiveKind kind : kShmKinds) {
      for (size_t bytes : {size_t{8}, size_t{1} << 20}) {
        EXPECT_STRNE(tuner.choose(kind, bytes, hostExecutor()).algorithm->name, "shm");
      }
    }
  }
}

TEST(Tuner, LoomAlgoShmAcrossNodesIsRefusedByName) {
  ScopedEnv algo("LOOM_ALGO", "shm");
  Tuner tuner({.nranks = 4, .nodes = 2, .sharedMemory = false}, Overrides::fromEnv());
  try {
    tuner.choose(CollectiveKind::AllReduce, 1024, hostExecutor());
    FAIL() << "LOOM_ALGO=shm across two nodes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("LOOM_ALGO"), std::string::npos) << e.what();
  }
  // Where it applies, it is obeyed, for each of the eight collectives the segment runs.
  Tuner oneNode({.nranks = 4, .nodes = 1, .sharedMemory = true}, Overrides::fromEnv());
  EXPECT_STREQ(oneNode.choose(CollectiveKind::Reduce, 8, hostExecutor()).algorithm->name, "shm");
  EXPECT_STREQ(oneNode.choose(CollectiveKind::AlltoAll, 8, hostExecutor()).algorithm->name, "shm");
}

TEST(Tuner, LoomAlgoDoesNotClaimTheCollectivesItsAlgorithmLacks) {
  ScopedEnv algo("LOOM_ALGO", "rd");
  Tuner tuner({.nranks = 4, .nodes = 2, .sharedMemory = false}, Overrides::fromEnv());
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 8, hostExecutor()).algorithm->name, "rd");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AlltoAll, 8, hostExecutor()).algorithm->name, "direct");
}

TEST(Tuner, LoomChunkSizeSetsTheSegmentSlotWithinItsCap) {
  ScopedEnv chunk("LOOM_CHUNKSIZE", "65536");
  Tuner tuner({.nranks = 2, .nodes = 1, .sharedMemory = true}, Overrides::fromEnv());
  EXPECT_EQ(tuner.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).chunkBytes, 65536u);
  ScopedEnv huge("LOOM_CHUNKSIZE", std::to_string(1 << 30));
  Tuner capped({.nranks = 2, .nodes = 1, .sharedMemory = true}, Overrides::fromEnv());
  EXPECT_LE(capped.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).chunkBytes, size_t{16} << 20);
}

// Nodes with the same two or more ranks each run large all-reduces, and
// all-gathers and reduce-scatters of every size, hierarchically (measured
// across two namespaces of two ranks: 0.5-0.84 of the flat ring's time from
// 16 KiB); nodes with unequal counts never do, nor broadcasts.
TEST(Tuner, UniformNodesRunHierarchically) {
  Tuner uniform({.nranks = 4, .nodes = 2, .sharedMemory = false, .ranksPerNode = 2}, Overrides{});
  EXPECT_STREQ(uniform.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).algorithm->name, "hier");
  EXPECT_STRNE(uniform.choose(CollectiveKind::AllReduce, 8, hostExecutor()).algorithm->name, "hier");
  for (const size_t bytes : {size_t{16} << 10, size_t{1} << 20}) {
    EXPECT_STREQ(uniform.choose(CollectiveKind::AllGather, bytes, hostExecutor()).algorithm->name, "hier") << bytes;
    EXPECT_STREQ(uniform.choose(CollectiveKind::ReduceScatter, bytes, hostExecutor()).algorithm->name, "hier") << bytes;
  }
  EXPECT_STRNE(uniform.choose(CollectiveKind::Broadcast, 1 << 20, hostExecutor()).algorithm->name, "hier");
  Tuner uneven({.nranks = 3, .nodes = 2, .sharedMemory = false, .ranksPerNode = 0}, Overrides{});
  EXPECT_STRNE(uneven.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).algorithm->name, "hier");
  EXPECT_STRNE(uneven.choose(CollectiveKind::AllGather, 1 << 20, hostExecutor()).algorithm->name, "hier");
  Tuner onePerNode({.nranks = 4, .nodes = 4, .sharedMemory = false, .ranksPerNode = 1}, Overrides{});
  EXPECT_STRNE(onePerNode.choose(CollectiveKind::AllReduce, 1 << 20, hostExecutor()).algorithm->name, "hier");
  EXPECT_STRNE(onePerNode.choose(CollectiveKind::ReduceScatter, 1 << 20, hostExecutor()).algorithm->name, "hier");
}

// Recursive doubling folds after its exchange, the ring as chunks arrive:
// across two nodes of one rank, rd keeps the small all-reduces and the ring
// takes the large ones (measured: the ring 0.7x rd's time at 4-16 MiB).
TEST(Tuner, TwoNodesGiveLargeAllReducesToThePipelinedRing) {
  Tuner tuner({.nranks = 2, .nodes = 2, .sharedMemory = false}, Overrides{});
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 8, hostExecutor()).algorithm->name, "rd");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 16 << 10, hostExecutor()).algorithm->name, "rd");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 4 << 20, hostExecutor()).algorithm->name, "ring");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 64 << 20, hostExecutor()).algorithm->name, "ring");
}

// Across many nodes the trees take the middle sizes: fewer hops than the
// ring, less data per rank than recursive doubling.
TEST(Tuner, ManyNodesGiveMediumAllReducesToTheTrees) {
  Tuner tuner({.nranks = 16, .nodes = 16, .sharedMemory = false}, Overrides{});
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 8, hostExecutor()).algorithm->name, "rd");
  EXPECT_STREQ(tuner.choose(CollectiveKind::AllReduce, 256 << 10, hostExecutor()).algorithm->name, "tree");
  EXPECT_STRNE(tuner.choose(CollectiveKind::AllReduce, 64 << 20, hostExecutor()).algorithm->name, "tree");
  EXPECT_STRNE(tuner.choose(CollectiveKind::AllGather, 256 << 10, hostExecutor()).algorithm->name, "tree");
}

}  // namespace
}  // namespace loom::coll

namespace loom::coll {
namespace {

// The registry: one entry per (algorithm, collective), every collective
// reachable, and every name the one LOOM_ALGO documents.
TEST(AlgorithmRegistry, HoldsEachAlgorithmOncePerCollectiveAndCoversEveryCollective) {
  std::set<std::pair<std::string, int>> seen;
  for (const AlgorithmEntry* entry : algorithms()) {
    ASSERT_NE(entry->run, nullptr) << entry->name;
    ASSERT_NE(entry->costUs, nullptr) << entry->name;
    EXPECT_TRUE(seen.emplace(entry->name, static_cast<int>(entry->kind)).second)
        << entry->name << " registered twice for " << collectiveName(entry->kind);
    EXPECT_EQ(findAlgorithm(entry->name, entry->kind), entry);
  }
  for (int k = 0; k < kCollectiveKinds; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    const bool covered = std::any_of(algorithms().begin(), algorithms().end(),
                                     [&](const AlgorithmEntry* e) { return e->kind == kind; });
    EXPECT_TRUE(covered) << collectiveName(kind) << " has no algorithm";
  }
  EXPECT_EQ(algorithmNames(), "ring, rd, direct, shm, tree, hier");
  EXPECT_EQ(findAlgorithm("rd", CollectiveKind::AllGather), nullptr);
  EXPECT_FALSE(isAlgorithmName("nccl"));
}

TEST(AlgorithmRegistry, LoomAlgoDocumentsEveryName) {
  std::string doc;
  for (const auto& var : env::table()) {
    if (var.name == "LOOM_ALGO") doc = var.doc;
  }
  ASSERT_FALSE(doc.empty());
  EXPECT_NE(doc.find("(" + algorithmNames() + ")"), std::string::npos) << doc;
}

}  // namespace
}  // namespace loom::coll
