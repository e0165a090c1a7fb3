// pp, tp and 3d (trainer.hpp): the ranks as a D x P x T mesh, cut by
// loomCommSplit into three kinds of groups, tensor innermost:
//
//   tensor group    T neighbours in rank order (a node's, when the launcher
//                   numbers a node's ranks together), each holding a share
//                   of every layer of their stage: Megatron's tensor
//                   parallelism (layers/parallel_linear.hpp and friends),
//                   whose all-reduces run inside the layers;
//   pipeline        the P stages of one data-parallel replica, one tensor
//                   rank each: the model's top-level layers cut into P x v
//                   chunks (partition.hpp), every micro-batch of the
//                   replica's share flowing through them as the schedule's
//                   table says (schedule.hpp);
//   data parallel   the D replicas of one (stage, tensor rank), each running
//                   M / D of the step's micro-batches; their gradients are
//                   summed bucket by bucket (units.hpp, --bucket-kb) on a
//                   stream as each chunk's last micro-batch finishes a
//                   bucket's layers: all-reduced, or under ZeRO-1 reduced
//                   to the owners of its parts.
//
// The pipeline engine runs this rank's row of the table:
//
//   forward   on a stash of its own: a copy of the chunk's layers bound to
//             the chunk's parameters, keeping that micro-batch's
//             activations until its backward (so a stage holds as many
//             micro-batches as the schedule has in flight there, and the
//             activation account shows GPipe's m against 1F1B's stages - s);
//   backward  writes the chunk's gradients, which are summed over the
//             micro-batches in order as single sums them; a zero-bubble
//             table (zb-h1) runs it as two halves, B (dL/dx, sent at once)
//             and, later, W (the gradients, summed as above), the stash
//             kept until both are done;
//   exchange  sends go out on a Loom stream per kind (the data copied first,
//             so the stash can move on), receives block until they arrive.
//
// The step then ends as single's does, scaled by 1/M, clipped by the global
// norm and stepped chunk by chunk. With one tensor rank the norm is summed
// chunk by chunk in model order, each owner going on from the last one's
// partial sum, so a pipeline's parameters are single's bit for bit; tensor
// parallelism sums partial products in another order (a tolerance).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "training/clock.hpp"
#include "training/layers/cross_entropy.hpp"
#include "training/parallel/micro_batch.hpp"
#include "training/parallel/partition.hpp"
#include "training/parallel/trainer.hpp"
#include "training/parallel/units.hpp"
#include "training/parallel/update.hpp"

namespace loom::train {
namespace {

using Kind = Transfer::Kind;
using Event = TimelineEvent::Kind;

// Where this rank sits in the mesh, from the mode and the flags.
struct Mesh {
  int dp, pp, tp;           // sizes
  int dpRank, ppRank, tpRank;
};

Mesh meshOf(const TrainConfig& config, int rank, int ranks) {
  int d = 1, p = 1, t = 1;
  if (config.mode == Mode::Pp) p = ranks;
  if (config.mode == Mode::Tp) t = ranks;
  if (config.mode == Mode::ThreeD) {
    d = config.dp, p = config.pp, t = config.tp;
    if (d < 1 || p < 1 || t < 1 || d * p * t != ranks) {
      throw std::invalid_argument("--dp " + std::to_string(d) + " --pp " + std::to_string(p) + " --tp " +
                                  std::to_string(t) + ": the mesh must hold the job's " + std::to_string(ranks) +
                                  " ranks (dp x pp x tp)");
    }
  }
  return {d, p, t, rank / (t * p), rank / t % p, rank % t};
}

// Where layers first..last keep their parameters in the dense model.
struct DenseRange {
  size_t offset;
  size_t count;
};
DenseRange denseRange(const Model& model, LayerRange layers) {
  const size_t offset = model.slices()[layers.first].offset;
  return {offset, model.slices()[layers.last].offset + model.slices()[layers.last].count - offset};
}

// One micro-batch in flight on a chunk.
struct Stash {
  Stash(Sequence seq, MemoryAccount& account)
      : layers(std::move(seq)), input(account, Category::Activations), dy(account, Category::Activations),
        dx(account, Category::Activations) {}
  Sequence layers;
  Tracked<float> input;  // the received activation, or the micro-batch's samples
  Tracked<float> dy;     // the received gradient, or dL/dlogits
  Tracked<float> dx;     // the gradient for the chunk before
  std::span<const float> output;
  std::vector<int32_t> labels;  // the last chunk's
  int micro = -1;               // -1: free
  bool sent = false;            // dL/dx sent (or, on the first chunk, not needed)
  bool weightsPending = false;  // B ran, W has not
};

// This data-parallel rank's part of a chunk's optimizer under ZeRO-1: the
// r-th ceil(n / D) elements (the last part shorter, or empty).
struct OptimizerShard {
  size_t first;
  size_t count;
  size_t stride;  // ceil(n / D): each rank's part, padded
};

OptimizerShard shardOf(size_t n, int parts, int part, bool sharded) {
  if (!sharded) return {0, n, n};
  const size_t stride = (n + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts);
  const size_t first = std::min(n, stride * static_cast<size_t>(part));
  return {first, std::min(stride, n - first), stride};
}

// A model chunk this rank holds (its tensor share), its parameters and
// gradients in T.
template <class T>
struct Chunk {
  Chunk(MemoryAccount& account, size_t count, OptimizerShard part, const TrainConfig& config)
      : params(account, Category::Parameters, count), grads(account, Category::Gradients, count),
        sum(account, Category::Gradients), shard(part), padded(account, Category::Communication),
        update(account, part.count, config) {}
  int index = 0;  // in the model
  Tracked<T> params;
  Tracked<T> grads;
  Tracked<float> sum;    // the micro-batches' gradient sum in float32, when there are several
  OptimizerShard shard;  // what this rank's optimizer steps (all of it without ZeRO-1)
  // ZeRO-1: the chunk padded to D equal parts, where each owner receives
  // the replicas' sum of its part's gradients and the stepped parts are
  // all-gathered, in place.
  Tracked<T> padded;
  Update<T> update;
  std::vector<Unit> buckets;        // the replicas' reductions, last layers first (units.hpp)
  std::vector<Bf16Home> homes;      // bf16: each layer's slices, which the window widens
  std::vector<uint8_t> replicated;  // tensor parallel: 1 where every tensor rank holds the parameter
  std::vector<std::unique_ptr<Stash>> stashes;
  // What the replicas reduce: fp32, the sum (or the one micro-batch's
  // gradients); bf16, the gradients, into which the sum was rounded once.
  std::span<T> reduced() {
    if constexpr (std::is_same_v<T, float>) return sum.size() > 0 ? sum.span() : grads.span();
    else return grads.span();
  }
  const Sequence& layout() const { return stashes.front()->layers; }
};

template <class T>
class MeshTrainer final : public Trainer {
 public:
  MeshTrainer(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm& comm,
              MemoryAccount& account, const ModelRecipe& recipe)
      : model_(model),
        data_(data),
        config_(config),
        comm_(comm),
        mesh_(meshOf(config, comm.rank(), comm.size())),
        split_(splitWork(config, model, data, mesh_.dp)),
        plan_(data.size(), config.batch, config.seed),
        window_(account),
        scratch_(account, Category::Activations) {
    if (config.dataParallel != Mode::Ddp && config.dataParallel != Mode::Zero1) {
      throw std::invalid_argument(std::string("--data-parallel ") + modeName(config.dataParallel) +
                                  ": a pipeline sums every micro-batch's gradients before the replicas reduce "
                                  "them, so only ddp and zero1 shard nothing a pipeline needs (DeepSpeed's rule too)");
    }
    // The three kinds of groups; gradients travel on a pipeline communicator of their own (schedule.hpp).
    tpComm_ = comm.split(mesh_.dpRank * mesh_.pp + mesh_.ppRank, mesh_.tpRank);
    ppComm_ = comm.split(mesh_.dpRank * mesh_.tp + mesh_.tpRank, mesh_.ppRank);
    dpComm_ = comm.split(mesh_.ppRank * mesh_.tp + mesh_.tpRank, mesh_.dpRank);
    gradComm_ = ppComm_.split(0, mesh_.ppRank);
    tensor_ = {&tpComm_, mesh_.tpRank, mesh_.tp, config.sequenceParallel && mesh_.tp > 1, &bytes_.tp, &tpSeconds_,
               &tpStream_};
    if (tensor_.sequence && rows() % static_cast<size_t>(mesh_.tp) != 0) {
      throw std::invalid_argument("--sequence-parallel 1: " + std::to_string(rows()) +
                                  " rows per micro-batch do not split over " + std::to_string(mesh_.tp) + " tensor ranks");
    }
    shape_ = {mesh_.pp, static_cast<int>(split_.perRank), config.chunks};
    const Schedule schedule = makeSchedule(config.schedule, shape_);
    actions_ = schedule[static_cast<size_t>(mesh_.ppRank)];
    const size_t parts = static_cast<size_t>(shape_.modelChunks());
    std::vector<size_t> weights;
    for (const auto& slice : model.slices()) weights.push_back(slice.count);
    if (config.balanceByTime && config.stages.empty()) weights = measuredLayerTimes(model, recipe);
    ranges_ = config.stages.empty() ? balanceLayers(weights, parts) : listedLayers(config.stages, model.layers(), parts);
    const std::vector<int> stashes = stashesNeeded(schedule, shape_, mesh_.ppRank);
    const std::vector<float> dense = model.paramsAsFloat();  // every rank initialized it alike
    for (int c = 0; c < shape_.chunks; ++c) {
      chunks_.push_back(buildChunk(c * shape_.stages + mesh_.ppRank, std::max(1, stashes[static_cast<size_t>(c)]), model,
                                   dense, recipe, account));
    }
    tieHeadToEmbedding(model);
    model.release();  // the whole model comes back in materialize()
  }

  // A failure names ranks of the group it happened in (a split
  // communicator numbers its own), and a group without the failed rank
  // fails only when a neighbour gives up: the message also says which
  // world rank the job's communicator saw fail, and which world ranks this
  // rank's groups hold.
  StepReport step(uint64_t step) override {
    try {
      return stepOnce(step);
    } catch (const loom::CallError& e) {
      throw std::runtime_error(std::string(e.what()) + " [" + failedInTheWorld() + groupsInWorldRanks() + "]");
    }
  }

  std::string layout() const override {
    std::string text = std::to_string(mesh_.dp) + " x " + std::to_string(mesh_.pp) + " x " + std::to_string(mesh_.tp) +
                       " (dp x pp x tp); chunks of layers";
    for (const LayerRange& r : ranges_) text += " " + std::to_string(r.first) + "-" + std::to_string(r.last);
    return text;
  }

  // Every rank gets the dense model (denseParams()).
  void materialize() override {
    model_.allocate();
    const std::vector<float> dense = denseParams();
    const auto params = model_.params<T>();
    for (size_t i = 0; i < dense.size(); ++i) params[i] = fromFloat<T>(dense[i]);  // bf16: exact, they were bf16
  }
  // Each stage's tensor group gathers its shares of each chunk into the
  // dense layout, the stage broadcasts them down its pipeline (every
  // data-parallel replica holds the same).
  std::vector<float> denseParams() override {
    std::vector<float> out(model_.paramCount());
    for (int index = 0; index < shape_.modelChunks(); ++index) {
      const DenseRange range = denseRange(model_, ranges_[static_cast<size_t>(index)]);
      const auto part = std::span(out).subspan(range.offset, range.count);
      const int owner = shape_.owner(index);
      if (owner == mesh_.ppRank) {
        const Chunk<T>& chunk = chunkAt(index);
        std::vector<float> mine(chunk.params.size());
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = toFloat(chunk.params[i]);
        const std::vector<float> dense = gatherShares(chunk, mine);
        std::copy(dense.begin(), dense.end(), part.begin());
      }
      ppComm_.broadcast(part, owner);
    }
    return out;
  }

  // Each chunk's state, its ZeRO-1 parts gathered over the replicas and its
  // tensor shares into the dense layout, written by the first replica's
  // first tensor rank.
  std::vector<StateRun> save() override {
    std::vector<StateRun> runs;
    for (auto& chunk : chunks_) {
      const DenseRange range = denseRange(model_, ranges_[static_cast<size_t>(chunk->index)]);
      const bool writer = mesh_.dpRank == 0 && mesh_.tpRank == 0;
      StateRun run{range.offset, range.count, {}};
      for (const std::span<float> part : components(*chunk)) {
        const std::vector<float> dense = gatherShares(*chunk, gatherParts(*chunk, part));
        if (writer) run.values.insert(run.values.end(), dense.begin(), dense.end());
      }
      if (writer) runs.push_back(std::move(run));
    }
    return runs;
  }
  // Each chunk's dense range, dealt into this tensor rank's share and its
  // ZeRO-1 part; then bf16's parameters from the master weights, and the
  // replicas' parts gathered under ZeRO-1.
  void load(const CheckpointReader& from) override {
    for (auto& chunk : chunks_) {
      const DenseRange range = denseRange(model_, ranges_[static_cast<size_t>(chunk->index)]);
      std::vector<float> dense(range.count), mine(chunk->params.size());
      const auto parts = components(*chunk);
      for (size_t c = 0; c < parts.size(); ++c) {
        from.read(c, range.offset, dense);
        chunk->layout().fromTwin(dense, mine);
        std::copy_n(mine.begin() + static_cast<std::ptrdiff_t>(chunk->shard.first), chunk->shard.count, parts[c].begin());
      }
      chunk->update.optimizer().setSteps(from.info().optimizerSteps);
      chunk->update.restored(chunk->params.span().subspan(chunk->shard.first, chunk->shard.count));
      if (zero1()) allGather(*chunk);
    }
  }
  Optimizer& optimizer() override { return chunks_.front()->update.optimizer(); }

 private:
  // "world rank 1 failed; ", once the job's communicator has learnt it (its
  // watchdog's heartbeats, LOOM_HEARTBEAT_MS, take a moment): up to 2 s.
  std::string failedInTheWorld() const {
    for (int tries = 0; tries < 200; ++tries) {
      int ranks[4] = {}, count = 0;
      if (loomCommGetFailedRanks(comm_.get(), ranks, 4, &count) == loomSuccess && count > 0) {
        return "world rank " + std::to_string(ranks[0]) + " failed; ";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
  }

  // "tensor group: world ranks 0 1; pipeline: 1 3; data parallel: 1 5"
  std::string groupsInWorldRanks() const {
    const auto world = [&](int d, int p, int t) { return std::to_string((d * mesh_.pp + p) * mesh_.tp + t); };
    std::string tensor, pipeline, data;
    for (int t = 0; t < mesh_.tp; ++t) tensor += " " + world(mesh_.dpRank, mesh_.ppRank, t);
    for (int p = 0; p < mesh_.pp; ++p) pipeline += " " + world(mesh_.dpRank, p, mesh_.tpRank);
    for (int d = 0; d < mesh_.dp; ++d) data += " " + world(d, mesh_.ppRank, mesh_.tpRank);
    return "this rank's groups, in world ranks: tensor" + tensor + "; pipeline" + pipeline + "; data parallel" + data;
  }

  StepReport stepOnce(uint64_t step) {
    const double start = monotonicSeconds();
    events_.clear();
    bytes_ = {};
    tpSeconds_ = 0;
    dpLaunch_.reset();
    batch_ = plan_.step(step);
    lossSum_ = 0;
    for (const Action& a : actions_) {
      switch (a.op) {
        case Action::Op::Forward: forward(a.micro, chunkAt(a.chunk)); break;
        case Action::Op::Backward:
        case Action::Op::BackwardInput:
        case Action::Op::BackwardWeights: backward(a.micro, chunkAt(a.chunk), a.op); break;
        case Action::Op::Exchange: exchange(a.transfers); break;
      }
    }
    const double sendsFrom = monotonicSeconds();
    activationStream_.synchronize();
    gradientStream_.synchronize();
    outboxUsed_ = 0;
    if (monotonicSeconds() - sendsFrom > 1e-6) events_.push_back({Event::Send, -1, -1, sendsFrom, monotonicSeconds()});
    // The replicas' reductions were launched bucket by bucket in each
    // chunk's last backward (backward()), but for ZeRO-1's tied copies: it
    // sums them before the replicas do (the same sum, reassociated), so
    // their buckets go now. The optimizer waits for them all.
    if (zero1()) {
      sumTiedGradients();
      for (auto& chunk : chunks_) {
        for (const Unit& b : chunk->buckets) {
          if (holdsTie(*chunk, b)) reduceReplicas(*chunk, b);
        }
      }
    }
    double dpWaited = 0;
    if (dpLaunch_) {
      const double dpFrom = monotonicSeconds();
      dpStream_.synchronize();
      dpWaited = monotonicSeconds() - dpFrom;
      events_.push_back({Event::Reduce, -1, -1, *dpLaunch_, monotonicSeconds()});
    }
    if (!zero1()) sumTiedGradients();

    StepReport report;
    report.samples = config_.batch;
    // Communication: of the tensor group's collectives, the time waited on
    // them (the started ones hide under dW's product); of the replicas'
    // all-reduces, the wait at the end.
    report.exposedSeconds = tpSeconds_ + dpWaited;
    report.commSeconds = tpSeconds_ + (dpLaunch_ ? monotonicSeconds() - *dpLaunch_ : 0.0);
    // One rank per replica reports its loss (the last stage's first tensor rank).
    const bool reports = mesh_.ppRank == mesh_.pp - 1 && mesh_.tpRank == 0;
    std::vector<double> loss{reports ? lossSum_ : 0.0};
    comm_.allReduce(std::span(loss));
    report.loss = loss[0] / static_cast<double>(config_.microBatches);

    const double optimizerFrom = monotonicSeconds();
    const float mean = 1.0f / static_cast<float>(config_.microBatches);
    const double squares = mesh_.tp > 1 || zero1() ? sumOfSquaresOverTheMesh(mean) : sumOfSquaresInModelOrder(mean);
    report.gradNorm = std::sqrt(squares);
    const float lr = learningRate(step, config_.warmup, config_.steps, config_.lr, config_.minLr);
    const float clip = clipScale(squares, config_.clip);
    for (auto& chunk : chunks_) {
      chunk->update.step(chunk->params.span().subspan(chunk->shard.first, chunk->shard.count),
                         stepped(*chunk), mean, clip, lr);
      if (zero1()) allGather(*chunk);
    }
    const double end = monotonicSeconds();
    events_.push_back({Event::Optimizer, -1, -1, optimizerFrom, end});

    report.seconds = end - start;
    double busy = 0;
    for (const auto& e : events_) {
      if (e.kind == Event::Forward || e.kind == Event::Backward || e.kind == Event::Weights ||
          e.kind == Event::Optimizer) {
        busy += e.end - e.start;
      }
    }
    report.idleShare = report.seconds > 0 ? std::max(0.0, 1.0 - busy / report.seconds) : 0.0;
    report.bytes = bytes_;
    report.events = events_;
    return report;
  }

  Chunk<T>& chunkAt(int index) { return *chunks_[static_cast<size_t>(index / shape_.stages)]; }
  const Chunk<T>& chunkAt(int index) const { return *chunks_[static_cast<size_t>(index / shape_.stages)]; }
  size_t rows() const { return split_.microSize * data_.rowsPerSample(); }
  // Rows of the activations between chunks: this rank's share under
  // sequence parallelism (every chunk edge lies between the embedding and
  // the head, where the rows are split).
  size_t edgeRows() const { return tensor_.sequence ? rows() / static_cast<size_t>(mesh_.tp) : rows(); }
  // The samples of this replica's micro-batch `micro` (of the step's M).
  std::span<const size_t> samples(int micro) const {
    const size_t global = static_cast<size_t>(mesh_.dpRank) * split_.perRank + static_cast<size_t>(micro);
    return std::span(batch_).subspan(global * split_.microSize, split_.microSize);
  }

  // The stash holding `micro` on `chunk`, or a free one for it.
  Stash& stashFor(Chunk<T>& chunk, int micro) {
    Stash* free = nullptr;
    for (auto& s : chunk.stashes) {
      if (s->micro == micro) return *s;
      if (s->micro < 0 && free == nullptr) free = s.get();
    }
    if (free == nullptr) throw std::logic_error("pipeline: no free activation stash (the schedule's count is wrong)");
    free->micro = micro;
    return *free;
  }

  void forward(int micro, Chunk<T>& chunk) {
    const double from = monotonicSeconds();
    Stash& stash = stashFor(chunk, micro);
    const bool first = chunk.index == 0, last = chunk.index == shape_.modelChunks() - 1;
    if (first || last) {
      // The first chunk reads the samples, the last their labels.
      Tracked<float>& x = first ? stash.input : scratch_;
      x.resize(split_.microSize * data_.features());
      stash.labels.resize(rows());
      gather(data_, samples(micro), x.span(), stash.labels);
    }
    const Sequence::Hooks widened = windowed(chunk, stash, nullptr, Bf16Window::Pass::Forward);
    stash.output = stash.layers.forward(stash.input.span(), first ? rows() : edgeRows(), mixed() ? &widened : nullptr);
    if (last) {
      stash.dy.resize(stash.output.size());
      lossSum_ += mesh_.tp > 1 ? crossEntropy(stash.output, stash.labels, rows(), data_.classes(), tensor_, stash.dy.span())
                               : crossEntropy(stash.output, stash.labels, rows(), data_.classes(), stash.dy.span());
    }
    events_.push_back({Event::Forward, micro, chunk.index, from, monotonicSeconds()});
  }

  // A whole backward (Op::Backward), or one of its halves: B
  // (BackwardInput), dL/dx alone, or W (BackwardWeights), the gradients.
  void backward(int micro, Chunk<T>& chunk, Action::Op op) {
    const double from = monotonicSeconds();
    Stash& stash = stashFor(chunk, micro);
    const bool several = chunk.sum.size() > 0, last = static_cast<size_t>(micro) + 1 == split_.perRank;
    // Several micro-batches are summed in float32 in order (bf16: rounded
    // into the gradients once, after the last), as single sums them.
    // The last micro-batch completes the buckets: the replicas reduce each
    // at once, on a stream, while the backward goes on (as ddp's buckets
    // do; elementwise, so the same sums as one call a chunk).
    Sequence::Hooks sum;
    size_t nextBucket = 0;
    sum.afterBackward = [&](size_t layer) {
      const auto& slice = stash.layers.slices()[layer];
      if (several) {
        sumMicroBatch(chunk.grads.span().subspan(slice.offset, slice.count),
                      chunk.sum.span().subspan(slice.offset, slice.count), micro == 0, last);
      }
      while (last && mesh_.dp > 1 && nextBucket < chunk.buckets.size() &&
             chunk.buckets[nextBucket].firstLayer >= layer) {
        const Unit& b = chunk.buckets[nextBucket++];
        if (!zero1() || !holdsTie(chunk, b)) reduceReplicas(chunk, b);
      }
    };
    if (op == Action::Op::BackwardWeights) {
      const Sequence::Hooks hooks = mixed() ? windowed(chunk, stash, &sum, Bf16Window::Pass::Backward) : sum;
      stash.layers.backwardWeights(&hooks);
      stash.weightsPending = false;
      releaseIfDone(stash);
      events_.push_back({Event::Weights, micro, chunk.index, from, monotonicSeconds()});
      return;
    }
    std::span<float> dx;
    if (chunk.index > 0) {
      stash.dx.resize(edgeRows() * stash.layers.inFeatures());
      dx = stash.dx.span();
    }
    const size_t inRows = chunk.index == 0 ? rows() : edgeRows();
    if (op == Action::Op::Backward) {
      const Sequence::Hooks hooks = mixed() ? windowed(chunk, stash, &sum, Bf16Window::Pass::Backward) : sum;
      stash.layers.backward(stash.dy.span(), dx, inRows, &hooks);
    } else {
      const Sequence::Hooks widened = windowed(chunk, stash, nullptr, Bf16Window::Pass::Input);
      stash.layers.backwardInput(stash.dy.span(), dx, inRows, mixed() ? &widened : nullptr);
      stash.weightsPending = true;
    }
    if (chunk.index == 0) {  // nothing of it is sent
      stash.sent = true;
      releaseIfDone(stash);
    }
    events_.push_back({Event::Backward, micro, chunk.index, from, monotonicSeconds()});
  }

  // A stash is free once its dL/dx is sent and its gradients written.
  static void releaseIfDone(Stash& stash) {
    if (!stash.sent || stash.weightsPending) return;
    stash.micro = -1;
    stash.sent = false;
  }

  void exchange(const std::vector<Transfer>& transfers) {
    struct Receive {
      std::span<float> into;
      const Transfer* transfer;
    };
    std::vector<Receive> receives;
    for (const Transfer& t : transfers) {
      const bool activation = t.kind == Kind::Activation;
      // An activation leaves chunk `edge` and enters edge + 1; a gradient the other way.
      Chunk<T>& chunk = chunkAt(t.send == activation ? t.edge : t.edge + 1);
      Stash& stash = stashFor(chunk, t.micro);
      const loom::Comm& comm = activation ? ppComm_ : gradComm_;
      if (t.send) {
        const double from = monotonicSeconds();
        const std::span<const float> data = activation ? stash.output : std::span<const float>(stash.dx.span());
        if (outboxUsed_ == outbox_.size()) outbox_.emplace_back(model_.account(), Category::Communication);
        Tracked<float>& copy = outbox_[outboxUsed_++];  // the same buffer as last step's send in this place
        copy.resize(data.size());
        std::copy(data.begin(), data.end(), copy.data());
        if (!activation) {  // its last use, unless its W is still to run
          stash.sent = true;
          releaseIfDone(stash);
        }
        comm.send(copy.span(), t.peer, activation ? &activationStream_ : &gradientStream_);
        bytes_.pp += data.size_bytes();
        events_.push_back({Event::Send, t.micro, chunk.index, from, monotonicSeconds()});
        continue;
      }
      Tracked<float>& into = activation ? stash.input : stash.dy;
      into.resize(edgeRows() * (activation ? stash.layers.inFeatures() : stash.layers.outFeatures()));
      receives.push_back({into.span(), &t});
    }
    if (receives.empty()) return;
    const double from = monotonicSeconds();
    loom::Group group;
    for (const Receive& r : receives) {
      (r.transfer->kind == Kind::Activation ? ppComm_ : gradComm_).recv(r.into, r.transfer->peer);
    }
    group.end();
    for (const Receive& r : receives) {
      const int into = r.transfer->kind == Kind::Activation ? r.transfer->edge + 1 : r.transfer->edge;
      events_.push_back({Event::Receive, r.transfer->micro, into, from, monotonicSeconds()});
    }
  }

  // Model chunk `index` as this rank holds it: its tensor share of the
  // parameters, taken from the dense model (every rank initialized it
  // alike), and `stashes` copies of its layers bound to them.
  std::unique_ptr<Chunk<T>> buildChunk(int index, int stashes, const Model& model, std::span<const float> dense,
                                       const ModelRecipe& recipe, MemoryAccount& account) {
    const LayerRange layers = ranges_[static_cast<size_t>(index)];
    std::vector<Sequence> copies;
    for (int k = 0; k < stashes; ++k) {
      Model copy(account);
      recipe(copy, mesh_.tp > 1 ? &tensor_ : nullptr);
      copies.push_back(copy.takeLayers(layers.first, layers.last));
    }
    const size_t count = copies.at(0).paramCount();
    auto chunk = std::make_unique<Chunk<T>>(account, count, shardOf(count, mesh_.dp, mesh_.dpRank, zero1()), config_);
    if (zero1()) chunk->padded.resize(chunk->shard.stride * static_cast<size_t>(mesh_.dp));
    chunk->index = index;
    if (split_.perRank > 1) chunk->sum.resize(count);
    chunk->buckets = planUnits(copies.front().slices(), config_.firstBucketBytes, config_.bucketBytes, sizeof(T));
    for (Sequence& seq : copies) {
      chunk->stashes.push_back(std::make_unique<Stash>(std::move(seq), account));
      if constexpr (std::is_same_v<T, float>) chunk->stashes.back()->layers.bind(chunk->params.span(), chunk->grads.span());
    }
    std::vector<float> mine(count);
    const DenseRange range = denseRange(model, layers);
    chunk->layout().fromTwin(dense.subspan(range.offset, range.count), mine);
    for (size_t i = 0; i < count; ++i) chunk->params[i] = fromFloat<T>(mine[i]);  // bf16: exact, they were bf16
    chunk->update.load(chunk->params.span().subspan(chunk->shard.first, chunk->shard.count));
    if constexpr (std::is_same_v<T, bf16>) {
      for (const auto& slice : chunk->layout().slices()) {
        chunk->homes.push_back({chunk->params.span().subspan(slice.offset, slice.count),
                                chunk->grads.span().subspan(slice.offset, slice.count)});
        window_.reserve(slice.count);
      }
    }
    chunk->replicated.resize(count);
    chunk->layout().markReplicated(chunk->replicated);
    return chunk;
  }

  // Each top-level layer's forward and backward time on one micro-batch,
  // in nanoseconds: rank 0 runs a dense copy of the model three times and
  // keeps each layer's fastest, and every rank partitions by its figures.
  std::vector<size_t> measuredLayerTimes(const Model& model, const ModelRecipe& recipe) {
    std::vector<double> seconds(model.layers(), 0.0);
    if (comm_.rank() == 0) {
      MemoryAccount scratch;  // working memory of the measurement, gone with it
      Model copy(scratch);
      recipe(copy, nullptr);
      copy.allocate();
      const std::vector<float> dense = model.paramsAsFloat();
      std::copy(dense.begin(), dense.end(), copy.params().begin());
      std::vector<float> x(split_.microSize * data_.features()), dlogits;
      std::vector<int32_t> labels(rows());
      batch_ = plan_.step(0);
      gather(data_, samples(0), x, labels);
      std::vector<double> best(model.layers(), 1e30), spent(model.layers());
      double from = 0;
      Model::Hooks hooks;
      hooks.beforeForward = hooks.beforeBackward = [&](size_t) { from = monotonicSeconds(); };
      hooks.afterForward = hooks.afterBackward = [&](size_t i) { spent[i] += monotonicSeconds() - from; };
      for (int round = 0; round < 3; ++round) {
        std::fill(spent.begin(), spent.end(), 0.0);
        const auto logits = copy.forward(x, rows(), &hooks);
        dlogits.resize(logits.size());
        crossEntropy(logits, labels, rows(), data_.classes(), dlogits);
        copy.backward(dlogits, rows(), &hooks);
        for (size_t i = 0; i < best.size(); ++i) best[i] = std::min(best[i], spent[i]);
      }
      seconds = best;
    }
    comm_.broadcast(std::span(seconds), 0);
    std::vector<size_t> out;
    for (double s : seconds) out.push_back(static_cast<size_t>(s * 1e9) + 1);  // no layer weighs nothing
    return out;
  }

  // Weight tying (Model::tie), as the GPT ties its head to its embedding:
  // the first chunk's first parameters and the last chunk's last layer's.
  // Their holders (one pipeline stage, or the first and the last) sum their
  // gradients, on a communicator of the two.
  void tieHeadToEmbedding(const Model& model) {
    if (model.ties().empty()) return;
    const Model::Tie& t = model.ties().front();
    if (model.ties().size() != 1 || t.a != model.slices().front().offset || t.b != model.slices().back().offset) {
      throw std::invalid_argument("pp, tp and 3d tie only the head to the embedding");
    }
    const int last = shape_.owner(shape_.modelChunks() - 1);
    if (mesh_.ppRank == 0) tie_.count = chunkAt(0).layout().layer(0).params().front().count;
    if (mesh_.ppRank == last) {
      const Sequence& layers = chunkAt(shape_.modelChunks() - 1).layout();
      tie_.head = layers.slices().back().offset;
      tie_.count = layers.layer(layers.layers() - 1).params().front().count;
    }
    if (last != 0) tieComm_ = ppComm_.split(mesh_.ppRank == 0 || mesh_.ppRank == last ? 0 : LOOM_SPLIT_NOCOLOR, mesh_.ppRank);
    tied_ = true;
  }

  void sumTiedGradients() {
    if (!tied_ || (mesh_.ppRank != 0 && mesh_.ppRank != shape_.owner(shape_.modelChunks() - 1))) return;
    const int last = shape_.modelChunks() - 1;
    const auto wte = [&] { return chunkAt(0).reduced().first(tie_.count); };
    const auto head = [&] { return chunkAt(last).reduced().subspan(tie_.head, tie_.count); };
    if (shape_.owner(last) == 0) return sumTiedCopies(wte(), head());  // one stage holds both
    const auto mine = mesh_.ppRank == 0 ? wte() : head();
    tieComm_.allReduce(mine);
    bytes_.pp += mine.size_bytes();
  }

  // Where the norm leaves a chunk's elements out: the head's tied copy.
  std::pair<size_t, size_t> uncounted(int index) const {
    if (!tied_ || index != shape_.modelChunks() - 1) return {0, 0};
    return {tie_.head, tie_.count};
  }

  // Single's sum of squares over the whole model, element by element in
  // model order: each chunk's owner goes on from the chunk before's sum.
  double sumOfSquaresInModelOrder(float mean) {
    const int chunks = shape_.modelChunks();
    std::vector<double> partial{0.0};
    for (int index = 0; index < chunks; ++index) {
      if (shape_.owner(index) != mesh_.ppRank) continue;
      if (index > 0 && shape_.owner(index - 1) != mesh_.ppRank) ppComm_.recv(std::span(partial), shape_.owner(index - 1));
      Chunk<T>& chunk = chunkAt(index);
      const auto [skip, count] = uncounted(index);
      const auto grads = chunk.reduced();
      partial[0] = chunk.update.sumOfSquares(grads.first(skip), mean, partial[0]);
      partial[0] = chunk.update.sumOfSquares(grads.subspan(skip + count), mean, partial[0]);
      if (index + 1 < chunks && shape_.owner(index + 1) != mesh_.ppRank) {
        ppComm_.send(std::span(partial), shape_.owner(index + 1));
      }
    }
    ppComm_.broadcast(std::span(partial), shape_.owner(chunks - 1));
    return partial[0];
  }

  // A chunk's state components over its optimizer's part (all of the
  // chunk's share without ZeRO-1).
  std::vector<std::span<float>> components(Chunk<T>& chunk) {
    return chunk.update.components(chunk.params.span().subspan(chunk.shard.first, chunk.shard.count));
  }
  // Under ZeRO-1, every replica's part of one component into the whole
  // share (collective over the replicas); else the part, which is the share.
  std::vector<float> gatherParts(const Chunk<T>& chunk, std::span<const float> part) {
    if (!zero1()) return {part.begin(), part.end()};
    std::vector<float> mine(chunk.shard.stride), all(chunk.shard.stride * static_cast<size_t>(mesh_.dp));
    std::copy(part.begin(), part.end(), mine.begin());
    dpComm_.allGather(std::span<const float>(mine), std::span(all));
    all.resize(chunk.params.size());
    return all;
  }
  // Every tensor rank's share of the chunk into the dense layout (collective
  // over the tensor group).
  std::vector<float> gatherShares(const Chunk<T>& chunk, std::span<const float> share) {
    if (mesh_.tp == 1) return {share.begin(), share.end()};
    size_t most = 0;
    for (int r = 0; r < mesh_.tp; ++r) most = std::max(most, chunk.layout().shareCount(r));
    std::vector<float> mine(most), all(most * static_cast<size_t>(mesh_.tp)), dense(chunk.layout().twinCount());
    std::copy(share.begin(), share.end(), mine.begin());
    tpComm_.allGather(std::span<const float>(mine), std::span(all));
    for (int r = 0; r < mesh_.tp; ++r) {
      chunk.layout().toTwin(r, std::span<const float>(all).subspan(static_cast<size_t>(r) * most, chunk.layout().shareCount(r)),
                            dense);
    }
    return dense;
  }
  bool zero1() const { return config_.dataParallel == Mode::Zero1 && mesh_.dp > 1; }
  static constexpr bool mixed() { return std::is_same_v<T, bf16>; }  // bf16 parameters, float32 layers

  // bf16: hooks that widen each layer of the stash into the window before
  // it runs (and narrow its gradients after its backward), around `inner`.
  Sequence::Hooks windowed(Chunk<T>& chunk, Stash& stash, const Sequence::Hooks* inner, Bf16Window::Pass pass) {
    if constexpr (mixed()) return window_.around(stash.layers, chunk.homes, inner, pass);
    return {};
  }

  // The gradients this rank's optimizer steps: the chunk's, or its ZeRO-1 part.
  std::span<T> stepped(Chunk<T>& chunk) {
    return zero1() ? ownPart(chunk).first(chunk.shard.count) : chunk.reduced();
  }
  // ZeRO-1: this replica's part of the padded chunk.
  std::span<T> ownPart(Chunk<T>& chunk) {
    return chunk.padded.span().subspan(static_cast<size_t>(mesh_.dpRank) * chunk.shard.stride, chunk.shard.stride);
  }

  // The replicas' sum of bucket `b` of the chunk's gradients, on their
  // stream: all-reduced, or under ZeRO-1 (Rajbhandari et al. 2020) into the
  // parts of the padded chunk whose owners step them, a reduce to the owner
  // of each part the bucket touches (the sums a reduce-scatter of the whole
  // chunk makes, in rank order when deterministic).
  void reduceReplicas(Chunk<T>& chunk, const Unit& b) {
    if (!dpLaunch_) dpLaunch_ = monotonicSeconds();
    const auto grads = chunk.reduced();
    bytes_.dp += b.count * sizeof(T);
    if (!zero1()) return dpComm_.allReduce(grads.subspan(b.offset, b.count), loomSum, &dpStream_);
    const size_t stride = chunk.shard.stride;
    for (size_t at = b.offset, end = b.offset + b.count; at < end;) {
      const size_t owner = at / stride, upTo = std::min(end, (owner + 1) * stride);
      dpComm_.reduce(std::span<const T>(grads.subspan(at, upTo - at)), chunk.padded.span().subspan(at, upTo - at),
                     static_cast<int>(owner), loomSum, &dpStream_);
      at = upTo;
    }
  }
  // Whether bucket `b` of `chunk` holds a tied copy (the embedding or the head).
  bool holdsTie(const Chunk<T>& chunk, const Unit& b) const {
    if (!tied_) return false;
    return (chunk.index == 0 && b.firstLayer == 0) ||
           (chunk.index == shape_.modelChunks() - 1 && b.lastLayer + 1 == chunk.layout().layers());
  }
  void allGather(Chunk<T>& chunk) {
    const auto mine = ownPart(chunk);
    std::copy_n(chunk.params.data() + chunk.shard.first, chunk.shard.count, mine.data());
    dpComm_.allGather(std::span<const T>(mine), chunk.padded.span());
    std::copy_n(chunk.padded.data(), chunk.params.size(), chunk.params.data());
    bytes_.dp += mine.size_bytes();
  }

  // With tensor shares or ZeRO-1 parts: each parameter counted once, shares
  // by their holders and replicated ones by tensor rank 0, parts by their
  // data-parallel rank (without ZeRO-1, the first replica's).
  double sumOfSquaresOverTheMesh(float mean) {
    std::vector<double> sum{0.0};
    if (zero1() || mesh_.dpRank == 0) {
      for (auto& chunk : chunks_) {
        const auto grads = stepped(*chunk);
        const size_t first = chunk->shard.first;
        const auto [skip, count] = uncounted(chunk->index);
        for (size_t i = 0; i < grads.size(); ++i) {
          if (chunk->replicated[first + i] != 0 && mesh_.tpRank != 0) continue;
          if (first + i >= skip && first + i < skip + count) continue;
          const float s = toFloat(grads[i]) * mean;
          sum[0] += static_cast<double>(s) * static_cast<double>(s);
        }
      }
    }
    comm_.allReduce(std::span(sum));
    return sum[0];
  }

  Model& model_;
  const Dataset& data_;
  TrainConfig config_;
  const loom::Comm& comm_;  // the whole job: the step's loss and norm
  Mesh mesh_;
  loom::Comm tpComm_, ppComm_, dpComm_;
  loom::Comm gradComm_;  // the pipeline's gradients
  loom::Comm tieComm_;   // the first and the last stage, when the head is tied to the embedding
  bool tied_ = false;
  struct {
    size_t head = 0;   // where the head's copy starts in the last chunk (the embedding's: 0 in the first)
    size_t count = 0;  // this tensor rank's share
  } tie_;
  TensorGroup tensor_;
  PipelineShape shape_;
  WorkSplit split_;
  BatchPlan plan_;
  std::vector<Action> actions_;
  std::vector<LayerRange> ranges_;
  std::vector<std::unique_ptr<Chunk<T>>> chunks_;
  Bf16Window window_;  // bf16: the layer being run, widened
  Tracked<float> scratch_;  // the last chunk's samples, read for their labels
  // What the streams send: a copy of each message, kept for the next step's
  // send in the same place. Declared before them, so that it is freed
  // after they finish (a step that threw may have left sends queued).
  std::deque<Tracked<float>> outbox_;
  size_t outboxUsed_ = 0;
  loom::Stream activationStream_;
  loom::Stream gradientStream_;
  loom::Stream dpStream_;          // the replicas' all-reduces, launched during the last backward
  loom::Stream tpStream_;          // the tensor group's started all-reduces (TensorGroup::startAllReduce)
  double tpSeconds_ = 0;           // this step's time waiting on the tensor group's collectives
  std::optional<double> dpLaunch_;  // this step's first all-reduce on dpStream_
  std::vector<size_t> batch_;
  double lossSum_ = 0;
  StepReport::AxisBytes bytes_;
  std::vector<TimelineEvent> events_;
};

}  // namespace

std::unique_ptr<Trainer> makeMesh(Model& model, const Dataset& data, const TrainConfig& config,
                                  const loom::Comm& comm, MemoryAccount& account, const ModelRecipe& recipe) {
  if (model.precision() == Precision::Bf16) return std::make_unique<MeshTrainer<bf16>>(model, data, config, comm, account, recipe);
  return std::make_unique<MeshTrainer<float>>(model, data, config, comm, account, recipe);
}

}  // namespace loom::train
