// The pipeline schedules as tables, run by the simulator with no
// communication at all: every (chunk, micro-batch) runs forward and
// backward once on its owner, after its input arrived; sends and receives
// pair in order and cannot deadlock even when a send waits for its
// receive; 1F1B holds at most stages - s micro-batches at stage s; and each
// stage idles (p - 1) / m of its busy time, (p - 1) / (v m) interleaved.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "training/parallel/schedule.hpp"

namespace {

using namespace loom::train;

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

void expectSound(ScheduleKind kind, const PipelineShape& shape) {
  const std::string where = std::string(scheduleName(kind)) + " p=" + std::to_string(shape.stages) +
                            " m=" + std::to_string(shape.microBatches) + " v=" + std::to_string(shape.chunks);
  const Schedule schedule = makeSchedule(kind, shape);
  // Backward twice as long as forward, as in a transformer; the bubble
  // does not depend on the ratio.
  for (const auto& [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}}) {
    const ScheduleRun run = simulate(schedule, shape, {f, b / 2, b / 2});
    ASSERT_TRUE(run.errors.empty()) << where << "\n" << joined(run.errors);
    const double bubble = static_cast<double>(shape.stages - 1) / (shape.chunks * shape.microBatches);
    for (int s = 0; s < shape.stages; ++s) {
      EXPECT_NEAR(run.idle[static_cast<size_t>(s)], bubble, 1e-12) << where << " stage " << s << " f=" << f << " b=" << b;
      const auto peak = run.peakInFlight[static_cast<size_t>(s)];
      EXPECT_EQ(peak, stashesNeeded(schedule, shape, s)) << where;
      if (kind == ScheduleKind::GPipe) {
        EXPECT_EQ(peak[0], shape.microBatches) << where;
      }
      if (kind == ScheduleKind::OneFOneB) {
        EXPECT_EQ(peak[0], std::min(shape.stages - s, shape.microBatches)) << where;
      }
    }
  }
}

TEST(PipelineSchedule, GPipeAnd1F1BAreSoundForTwoToFourStagesAndOneToEightMicroBatches) {
  for (int p = 2; p <= 4; ++p) {
    for (int m = 1; m <= 8; ++m) {
      expectSound(ScheduleKind::GPipe, {p, m, 1});
      expectSound(ScheduleKind::OneFOneB, {p, m, 1});
    }
  }
}

TEST(PipelineSchedule, InterleavedIsSoundWithTwoAndThreeChunks) {
  for (int p = 2; p <= 4; ++p) {
    for (int m = p; m <= 8; m += p) {
      expectSound(ScheduleKind::Interleaved, {p, m, 2});
      expectSound(ScheduleKind::Interleaved, {p, m, 3});
    }
  }
}

// ZB-H1: every (chunk, micro-batch) runs F, B and W once, in order, on
// its owner; every stage holds at most min(p, m) micro-batches (1F1B's
// first stage's peak); with W no longer than F (the paper's setting) each
// stage idles (p - 1)(F + B - W) / (m (F + B + W)) of its busy time from
// m >= p micro-batches, a third of 1F1B's where F = B = W; and never more
// than 1F1B whatever the costs.
TEST(PipelineSchedule, ZeroBubbleH1IsSoundAndIdlesAsThePaperSays) {
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 8; ++m) {
      const PipelineShape shape{p, m, 1};
      const std::string where = "p=" + std::to_string(p) + " m=" + std::to_string(m);
      const Schedule zb = makeSchedule(ScheduleKind::ZeroBubbleH1, shape);
      const Schedule oneF = makeSchedule(ScheduleKind::OneFOneB, shape);
      for (const StepCosts costs : {StepCosts{1, 1, 1}, StepCosts{1, 1, 0.5}, StepCosts{2, 1, 1}, StepCosts{1, 2, 1},
                                    StepCosts{1, 1.5, 1.5}, StepCosts{1, 1, 2}}) {
        const ScheduleRun run = simulate(zb, shape, costs);
        ASSERT_TRUE(run.errors.empty()) << where << "\n" << joined(run.errors);
        const ScheduleRun base = simulate(oneF, shape, costs);
        const double busy = m * (costs.forward + costs.input + costs.weights);
        for (int s = 0; s < p; ++s) {
          const auto at = static_cast<size_t>(s);
          EXPECT_EQ(run.peakInFlight[at][0], std::min(p, m)) << where << " stage " << s;
          EXPECT_EQ(run.peakInFlight[at], stashesNeeded(zb, shape, s)) << where;
          EXPECT_LE(run.idle[at], base.idle[at] + 1e-12) << where << " stage " << s;
          if (m >= p && costs.weights <= costs.forward) {
            const double bubble = (p - 1) * (costs.forward + costs.input - costs.weights) / busy;
            EXPECT_NEAR(run.idle[at], bubble, 1e-12) << where << " stage " << s << " F " << costs.forward << " B "
                                                     << costs.input << " W " << costs.weights;
          }
        }
        if (m >= p && p > 1 && costs.forward == costs.input && costs.input == costs.weights) {
          EXPECT_NEAR(run.idle[0], base.idle[0] / 3, 1e-12) << where;
        }
      }
    }
  }
  // A W before its B, or W's summed out of order, are caught.
  const PipelineShape shape{2, 2, 1};
  Schedule early = makeSchedule(ScheduleKind::ZeroBubbleH1, shape);
  auto& last = early[1];
  const auto w = std::find_if(last.begin(), last.end(), [](const Action& a) { return a.op == Action::Op::BackwardWeights; });
  ASSERT_NE(w, last.end());
  const Action moved = *w;
  last.erase(w);
  last.insert(last.begin(), moved);
  EXPECT_NE(joined(simulate(early, shape, {}).errors).find("W of micro-batch 0 on chunk 1 runs before its input"),
            std::string::npos)
      << joined(simulate(early, shape, {}).errors);
  Schedule swapped = makeSchedule(ScheduleKind::ZeroBubbleH1, shape);
  std::vector<Action*> ws;
  for (auto& a : swapped[0]) {
    if (a.op == Action::Op::BackwardWeights) ws.push_back(&a);
  }
  ASSERT_EQ(ws.size(), 2u);
  std::swap(ws[0]->micro, ws[1]->micro);
  EXPECT_NE(joined(simulate(swapped, shape, {}).errors).find("summed out of order"), std::string::npos);
  EXPECT_THROW(makeSchedule(ScheduleKind::ZeroBubbleH1, {2, 4, 2}), std::invalid_argument);
  EXPECT_EQ(parseSchedule("zb-h1"), ScheduleKind::ZeroBubbleH1);
}

TEST(PipelineSchedule, OneStageRunsEverythingInOrderWithNoTransfers) {
  const Schedule s = makeSchedule(ScheduleKind::OneFOneB, {1, 3, 1});
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(s[0].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(s[0][i].op, i % 2 == 0 ? Action::Op::Forward : Action::Op::Backward);
    EXPECT_EQ(s[0][i].micro, static_cast<int>(i / 2));
  }
}

// The simulator is the test's reference: it must catch each kind of broken table.
TEST(PipelineSchedule, TheSimulatorCatchesBrokenTables) {
  const PipelineShape shape{2, 2, 1};
  const Schedule good = makeSchedule(ScheduleKind::OneFOneB, shape);
  ASSERT_TRUE(simulate(good, shape, {1, 1, 1}).errors.empty());
  const auto firstError = [&](const Schedule& s) {
    const auto run = simulate(s, shape, {1, 1, 1});
    return run.errors.empty() ? std::string("(none)") : run.errors.front();
  };
  // Rank 1 receives micro-batch 1 before 0: out of order.
  Schedule swapped = good;
  for (auto& a : swapped[1]) {
    for (auto& t : a.transfers) {
      if (t.kind == Transfer::Kind::Activation) t.micro = 1 - t.micro;
    }
  }
  EXPECT_NE(firstError(swapped).find("where it expects"), std::string::npos) << firstError(swapped);
  // Rank 0 waits for micro-batch 0's gradient before it sends its activation: a deadlock.
  Schedule early = good;
  for (auto& a : early[0]) {
    auto& t = a.transfers;
    const auto wait = std::find_if(t.begin(), t.end(), [](const Transfer& x) {
      return !x.send && x.kind == Transfer::Kind::Gradient && x.micro == 0;
    });
    if (wait == t.end()) continue;
    const Transfer moved = *wait;
    t.erase(wait);
    early[0].insert(early[0].begin(), Action{Action::Op::Exchange, 0, 0, {moved}});
    break;
  }
  bool deadlock = false;
  for (const auto& e : simulate(early, shape, {1, 1, 1}).errors) deadlock |= e.find("deadlock") != std::string::npos;
  EXPECT_TRUE(deadlock) << joined(simulate(early, shape, {1, 1, 1}).errors);
  // A backward dropped: named.
  Schedule dropped = good;
  for (size_t i = dropped[0].size(); i-- > 0;) {
    if (dropped[0][i].op == Action::Op::Backward) {
      dropped[0].erase(dropped[0].begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  bool named = false;
  for (const auto& e : simulate(dropped, shape, {1, 1, 1}).errors) named |= e.find("not once each") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(PipelineSchedule, ShapesItCannotRunAreNamed) {
  EXPECT_THROW(makeSchedule(ScheduleKind::Interleaved, {2, 3, 2}), std::invalid_argument);
  EXPECT_THROW(makeSchedule(ScheduleKind::Interleaved, {2, 4, 1}), std::invalid_argument);
  EXPECT_THROW(makeSchedule(ScheduleKind::GPipe, {2, 4, 2}), std::invalid_argument);
  try {
    makeSchedule(ScheduleKind::Interleaved, {4, 6, 2});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--micro-batches 6"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseSchedule("zigzag"), std::invalid_argument);
  EXPECT_EQ(parseSchedule("1f1b"), ScheduleKind::OneFOneB);
}

}  // namespace
