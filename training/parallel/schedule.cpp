#include "training/parallel/schedule.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace loom::train {
namespace {

constexpr const char* kSchedules[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};

using Op = Action::Op;
using Kind = Transfer::Kind;

Action compute(Op op, int micro, int chunk) { return {op, micro, chunk, {}}; }

// Rank s's computations in order. 1F1B and interleaved share Megatron's
// walk: the k-th forward is micro-batch (k / (p v)) p + k mod p on local
// chunk (k / p) mod v, the k-th backward the same micro-batch on local
// chunk v - 1 - (k / p) mod v; with v = 1 that is micro-batch k.
std::vector<Action> computations(ScheduleKind kind, const PipelineShape& shape, int s) {
  const int p = shape.stages, m = shape.microBatches, v = shape.chunks;
  std::vector<Action> out;
  if (kind == ScheduleKind::GPipe) {
    for (int i = 0; i < m; ++i) out.push_back(compute(Op::Forward, i, s));
    for (int i = 0; i < m; ++i) out.push_back(compute(Op::Backward, i, s));
    return out;
  }
  if (kind == ScheduleKind::ZeroBubbleH1) {
    // 1F1B's F and B; each B's W waits until s W's are pending, and the
    // drain runs a W after each B, then the ones held back.
    const int warmup = std::min(m, p - s - 1);
    std::deque<int> pending;
    const auto backward = [&](int i) {
      out.push_back(compute(Op::BackwardInput, i, s));
      pending.push_back(i);
    };
    const auto weights = [&] {
      out.push_back(compute(Op::BackwardWeights, pending.front(), s));
      pending.pop_front();
    };
    for (int i = 0; i < warmup; ++i) out.push_back(compute(Op::Forward, i, s));
    for (int i = 0; i < m - warmup; ++i) {
      out.push_back(compute(Op::Forward, warmup + i, s));
      backward(i);
      if (static_cast<int>(pending.size()) > s) weights();
    }
    for (int i = m - warmup; i < m; ++i) {
      backward(i);
      weights();
    }
    while (!pending.empty()) weights();
    return out;
  }
  const auto micro = [&](int k) { return k / (p * v) * p + k % p; };
  const auto forward = [&](int k) { return compute(Op::Forward, micro(k), (k / p % v) * p + s); };
  const auto backward = [&](int k) { return compute(Op::Backward, micro(k), (v - 1 - k / p % v) * p + s); };
  const int total = m * v;
  const int warmup = std::min(total, kind == ScheduleKind::OneFOneB ? p - s - 1 : (p - s - 1) * 2 + (v - 1) * p);
  for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(forward(warmup + i));
    out.push_back(backward(i));
  }
  for (int i = total - warmup; i < total; ++i) out.push_back(backward(i));
  return out;
}

// What computation `a` needs received before it runs, and what it sends after.
std::vector<Transfer> needs(const Action& a, const PipelineShape& shape) {
  const int last = shape.modelChunks() - 1;
  if (a.op == Op::Forward && a.chunk > 0) {
    return {{Kind::Activation, false, shape.owner(a.chunk - 1), a.micro, a.chunk - 1}};
  }
  if ((a.op == Op::Backward || a.op == Op::BackwardInput) && a.chunk < last) {
    return {{Kind::Gradient, false, shape.owner(a.chunk + 1), a.micro, a.chunk}};
  }
  return {};
}
std::vector<Transfer> makes(const Action& a, const PipelineShape& shape) {
  const int last = shape.modelChunks() - 1;
  if (a.op == Op::Forward && a.chunk < last) return {{Kind::Activation, true, shape.owner(a.chunk + 1), a.micro, a.chunk}};
  if ((a.op == Op::Backward || a.op == Op::BackwardInput) && a.chunk > 0) {
    return {{Kind::Gradient, true, shape.owner(a.chunk - 1), a.micro, a.chunk - 1}};
  }
  return {};
}

// Whether `op` ends a micro-batch's use of its stash on a chunk (and
// writes the chunk's parameter gradients).
bool endsUse(Op op) { return op == Op::Backward || op == Op::BackwardWeights; }

const char* opName(Op op) {
  switch (op) {
    case Op::Forward: return "forward";
    case Op::Backward: return "backward";
    case Op::BackwardInput: return "B";
    case Op::BackwardWeights: return "W";
    case Op::Exchange: break;
  }
  return "exchange";
}

std::string describe(const Transfer& t) {
  return std::string(t.send ? "send " : "receive ") + (t.kind == Kind::Activation ? "activation" : "gradient") +
         " of micro-batch " + std::to_string(t.micro) + " across edge " + std::to_string(t.edge) +
         (t.send ? " to rank " : " from rank ") + std::to_string(t.peer);
}

}  // namespace

ScheduleKind parseSchedule(const std::string& name) {
  for (size_t i = 0; i < std::size(kSchedules); ++i) {
    if (name == kSchedules[i]) return static_cast<ScheduleKind>(i);
  }
  throw std::invalid_argument("--schedule " + name + ": not a schedule (gpipe, 1f1b, interleaved, zb-h1)");
}

const char* scheduleName(ScheduleKind kind) { return kSchedules[static_cast<size_t>(kind)]; }

Schedule makeSchedule(ScheduleKind kind, const PipelineShape& shape) {
  if (shape.stages < 1) throw std::invalid_argument("a pipeline needs at least one stage");
  if (shape.microBatches < 1) throw std::invalid_argument("--micro-batches must be at least 1");
  if (kind == ScheduleKind::Interleaved) {
    if (shape.chunks < 2) {
      throw std::invalid_argument("--chunks " + std::to_string(shape.chunks) +
                                  ": --schedule interleaved needs at least 2 chunks per rank");
    }
    if (shape.microBatches % shape.stages != 0) {
      throw std::invalid_argument("--micro-batches " + std::to_string(shape.microBatches) +
                                  ": --schedule interleaved needs a multiple of the " + std::to_string(shape.stages) +
                                  " stages");
    }
  } else if (shape.chunks != 1) {
    throw std::invalid_argument("--chunks " + std::to_string(shape.chunks) + ": --schedule " + scheduleName(kind) +
                                " runs one chunk per rank (interleaved runs several)");
  }
  Schedule schedule(static_cast<size_t>(shape.stages));
  for (int s = 0; s < shape.stages; ++s) {
    std::vector<Action>& out = schedule[static_cast<size_t>(s)];
    std::vector<Transfer> pending;  // the last computation's sends
    for (const Action& a : computations(kind, shape, s)) {
      for (Transfer& t : needs(a, shape)) pending.push_back(t);
      if (!pending.empty()) out.push_back({Op::Exchange, 0, 0, std::move(pending)});
      out.push_back(a);
      pending = makes(a, shape);
    }
    if (!pending.empty()) out.push_back({Op::Exchange, 0, 0, std::move(pending)});
  }
  return schedule;
}

std::vector<int> stashesNeeded(const Schedule& schedule, const PipelineShape& shape, int rank) {
  std::vector<int> inFlight(static_cast<size_t>(shape.chunks)), peak(inFlight.size());
  for (const Action& a : schedule[static_cast<size_t>(rank)]) {
    if (a.op != Op::Forward && !endsUse(a.op)) continue;
    int& n = inFlight[static_cast<size_t>(a.chunk / shape.stages)];
    n += a.op == Op::Forward ? 1 : -1;
    peak[static_cast<size_t>(a.chunk / shape.stages)] = std::max(peak[static_cast<size_t>(a.chunk / shape.stages)], n);
  }
  return peak;
}

ScheduleRun simulate(const Schedule& schedule, const PipelineShape& shape, const StepCosts& costs) {
  ScheduleRun run;
  const int p = shape.stages, m = shape.microBatches, chunks = shape.modelChunks();
  if (schedule.size() != static_cast<size_t>(p)) {
    run.errors.push_back("a table for " + std::to_string(schedule.size()) + " ranks, not " + std::to_string(p));
    return run;
  }
  struct Posted {
    int rank;
    size_t index;  // in the rank's exchange
    int micro;
    int edge;
    double time;   // when it was posted
  };
  struct RankState {
    size_t pc = 0;
    double clock = 0;
    double busy = 0;
    bool posted = false;
    std::vector<double> done;  // per transfer of the current exchange: when it finished, or < 0
    std::set<std::tuple<Kind, int, int>> received;  // (kind, micro, edge)
    std::vector<int> inFlight;
  };
  std::vector<RankState> ranks(static_cast<size_t>(p));
  run.peakInFlight.assign(static_cast<size_t>(p), std::vector<int>(static_cast<size_t>(shape.chunks)));
  for (auto& r : ranks) r.inFlight.assign(static_cast<size_t>(shape.chunks), 0);
  // Per (chunk, micro-batch): forwards run, dL/dx computed (Backward or
  // B), parameter gradients written (Backward or W).
  std::vector<int> forwards(static_cast<size_t>(chunks * m)), inputGrads(forwards.size()), weightGrads(forwards.size());
  std::vector<int> lastBackward(static_cast<size_t>(chunks), -1);
  // Per (kind, from, to): the sends and receives posted and not yet paired,
  // paired in order as a transport pairs them.
  std::map<std::tuple<Kind, int, int>, std::pair<std::deque<Posted>, std::deque<Posted>>> channels;
  const auto error = [&](int rank, const std::string& what) {
    run.errors.push_back("rank " + std::to_string(rank) + ": " + what);
  };
  // A receive finishes once its send is posted (and the receiver is there);
  // the sender never waits.
  const auto pair = [&](std::pair<std::deque<Posted>, std::deque<Posted>>& c, Kind kind) {
    while (!c.first.empty() && !c.second.empty()) {
      const Posted s = c.first.front(), r = c.second.front();
      c.first.pop_front();
      c.second.pop_front();
      if (s.micro != r.micro || s.edge != r.edge) {
        error(r.rank, std::string("receives the ") + (kind == Kind::Activation ? "activation" : "gradient") +
                          " of micro-batch " + std::to_string(s.micro) + " edge " + std::to_string(s.edge) +
                          " where it expects micro-batch " + std::to_string(r.micro) + " edge " + std::to_string(r.edge));
      }
      ranks[static_cast<size_t>(r.rank)].done[r.index] = std::max(s.time, r.time);
    }
  };

  for (bool moved = true; moved;) {
    moved = false;
    for (int rank = 0; rank < p; ++rank) {
      RankState& st = ranks[static_cast<size_t>(rank)];
      const auto& actions = schedule[static_cast<size_t>(rank)];
      while (st.pc < actions.size()) {
        const Action& a = actions[st.pc];
        if (a.op != Op::Exchange) {
          const bool fwd = a.op == Op::Forward;
          const std::string what = std::string(opName(a.op)) + " of micro-batch " + std::to_string(a.micro) +
                                   " on chunk " + std::to_string(a.chunk);
          if (a.chunk < 0 || a.chunk >= chunks || a.micro < 0 || a.micro >= m || shape.owner(a.chunk) != rank) {
            error(rank, what + ": not this rank's");
            ++st.pc;
            continue;
          }
          const auto at = static_cast<size_t>(a.chunk * m + a.micro);
          bool inputHere = false;
          if (fwd) {
            inputHere = a.chunk == 0 || st.received.count({Kind::Activation, a.micro, a.chunk - 1}) != 0;
          } else if (a.op == Op::BackwardWeights) {
            inputHere = inputGrads[at] > 0;  // W reads what its B kept
          } else {
            inputHere = forwards[at] > 0 &&
                        (a.chunk == chunks - 1 || st.received.count({Kind::Gradient, a.micro, a.chunk}) != 0);
          }
          if (!inputHere) error(rank, what + " runs before its input is here");
          if (endsUse(a.op)) {
            if (a.micro <= lastBackward[static_cast<size_t>(a.chunk)]) {
              error(rank, what + " runs after micro-batch " +
                              std::to_string(lastBackward[static_cast<size_t>(a.chunk)]) +
                              "'s: the gradients would be summed out of order");
            }
            lastBackward[static_cast<size_t>(a.chunk)] = a.micro;
            ++weightGrads[at];
          }
          if (fwd) ++forwards[at];
          if (a.op == Op::Backward || a.op == Op::BackwardInput) ++inputGrads[at];
          int& n = st.inFlight[static_cast<size_t>(a.chunk / p)];
          if (fwd || endsUse(a.op)) n += fwd ? 1 : -1;
          int& peak = run.peakInFlight[static_cast<size_t>(rank)][static_cast<size_t>(a.chunk / p)];
          peak = std::max(peak, n);
          const double cost = fwd                                 ? costs.forward
                              : a.op == Op::Backward              ? costs.input + costs.weights
                              : a.op == Op::BackwardInput         ? costs.input
                                                                  : costs.weights;
          st.clock += cost;
          st.busy += cost;
          ++st.pc;
          moved = true;
          continue;
        }
        if (!st.posted) {
          st.posted = true;
          st.done.assign(a.transfers.size(), -1.0);
          moved = true;
          for (size_t i = 0; i < a.transfers.size(); ++i) {
            const Transfer& t = a.transfers[i];
            if (t.peer < 0 || t.peer >= p) {
              error(rank, describe(t) + ": no such rank");
              st.done[i] = st.clock;
              continue;
            }
            if (t.send) {
              const int made = t.kind == Kind::Activation ? t.edge : t.edge + 1;
              const auto at = static_cast<size_t>(made * m + t.micro);
              if (made < 0 || made >= chunks || (t.kind == Kind::Activation ? forwards[at] : inputGrads[at]) == 0) {
                error(rank, describe(t) + " before it was computed");
              }
            }
            if (t.send) st.done[i] = st.clock;
            auto& c = channels[{t.kind, t.send ? rank : t.peer, t.send ? t.peer : rank}];
            (t.send ? c.first : c.second).push_back({rank, i, t.micro, t.edge, st.clock});
            pair(c, t.kind);
          }
        }
        if (std::any_of(st.done.begin(), st.done.end(), [](double d) { return d < 0; })) break;  // blocked
        for (double d : st.done) st.clock = std::max(st.clock, d);
        for (const Transfer& t : a.transfers) {
          if (!t.send) st.received.insert({t.kind, t.micro, t.edge});
        }
        st.posted = false;
        ++st.pc;
        moved = true;
      }
    }
  }

  for (int rank = 0; rank < p; ++rank) {
    const RankState& st = ranks[static_cast<size_t>(rank)];
    const auto& actions = schedule[static_cast<size_t>(rank)];
    if (st.pc < actions.size()) {
      std::string waits;
      for (size_t i = 0; i < actions[st.pc].transfers.size(); ++i) {
        if (st.done[i] < 0) waits += (waits.empty() ? "" : "; ") + describe(actions[st.pc].transfers[i]);
      }
      error(rank, "deadlock at action " + std::to_string(st.pc) + ", waiting to " + waits);
    }
    run.makespan = std::max(run.makespan, st.clock);
  }
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < m; ++i) {
      const auto at = static_cast<size_t>(c * m + i);
      if (forwards[at] != 1 || inputGrads[at] != 1 || weightGrads[at] != 1) {
        error(shape.owner(c), "micro-batch " + std::to_string(i) + " on chunk " + std::to_string(c) + " runs forward " +
                                  std::to_string(forwards[at]) + ", backward to its input " +
                                  std::to_string(inputGrads[at]) + " and to its weights " +
                                  std::to_string(weightGrads[at]) + " times, not once each");
      }
    }
  }
  for (const auto& [key, queues] : channels) {
    if (!queues.first.empty() || !queues.second.empty()) {
      error(std::get<1>(key), std::to_string(queues.first.size()) + " sends to rank " + std::to_string(std::get<2>(key)) +
                                  " and " + std::to_string(queues.second.size()) + " receives there are unpaired");
    }
  }
  for (const RankState& st : ranks) run.idle.push_back(st.busy > 0 ? (run.makespan - st.busy) / st.busy : 0.0);
  return run;
}

}  // namespace loom::train
