// ZeRO (Rajbhandari et al. 2020), stages 1 to 3, over the flat buffers. The
// model is cut into units (units.hpp: the DDP buckets for stages 1 and 2,
// with the first layers in a small unit of their own for the forward that
// waits on their gather first; one layer each for stage 3, as FSDP's
// units), and each unit is sharded
// over the N ranks on its own: rank r owns its r-th ceil(count/N) elements,
// the last shard padded with zeros. A rank's shards of every unit, one after
// another, are its slice of the optimizer: fp32 master parameters, their
// gradients and the optimizer's state, nothing else of them.
//
//   stage 1  full parameters and gradients on every rank; a rank with
//            several micro-batches sums them (as ddp does), and as the last
//            one's backward finishes a unit, its gradients are
//            reduce-scattered (sum) on a Loom stream into the own shard:
//            once a step.
//   stage 2  a unit's gradients are written into a staging buffer that is
//            freed once reduce-scattered: only the own shard of the
//            gradients stays. Each micro-batch is reduce-scattered, the
//            next one's compute overlapping it; its shard is added in
//            order once the stream has it.
//   stage 3  parameters too live only as shards: a unit is all-gathered
//            into a staging buffer before its forward, freed after it,
//            gathered again before its backward (the forward's last unit
//            is kept instead) and freed after its gradients are
//            reduce-scattered. Gathers run on a second
//            communicator (a split of the first) and stream, one unit ahead
//            of the compute.
//
// Then every stage scales the gradient shard by 1/M, clips by the global
// norm (an all-reduce of the shards' sums of squares), steps the optimizer
// on the shard, and (stages 1, 2) launches the all-gathers of the new
// parameters, unit by unit in the order the next forward needs them, each
// with an event the forward waits for just before the unit's first layer
// (Megatron's overlap_param_gather): the gathers run under the next step's
// data loading and forward instead of ending this step.
//
// In bf16 everything above moves bf16 (parameters, gradients, the
// collectives); the fp32 master weights live beside the optimizer's moments
// (update.hpp), so a rank holds 2 + 2 + 12 bytes per parameter of what it
// keeps. Stages 1 and 2 gather from a bf16 copy of the own shards, which is
// communication memory (DeepSpeed gathers from a view of the full bf16
// buffer instead).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "training/clock.hpp"
#include "training/parallel/micro_batch.hpp"
#include "training/parallel/timeline.hpp"
#include "training/parallel/trainer.hpp"
#include "training/parallel/units.hpp"
#include "training/parallel/update.hpp"

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;
using Event = TimelineEvent::Kind;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// acc = acc + more, element-wise (bf16: in float32, rounded once).
void addInto(std::span<float> acc, std::span<const float> more) {
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += more[i];
}
void addInto(std::span<bf16> acc, std::span<const bf16> more) {
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = narrow(widen(acc[i]) + widen(more[i]));
}

template <class T>
class Zero final : public Trainer {
 public:
  Zero(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm& comm, MemoryAccount& account,
       int stage)
      : model_(model),
        data_(data),
        config_(config),
        comm_(comm),
        stage_(stage),
        ranks_(comm.size()),
        rank_(comm.rank()),
        split_(splitWork(config, model, data, ranks_)),
        plan_(data.size(), config.batch, config.seed),
        micro_(account),
        // fp32: the shards are the master weights; bf16: what is gathered from.
        shardParams_(account, stage == 3                       ? Category::Parameters
                              : std::is_same_v<T, float> ? Category::OptimizerState
                                                         : Category::Communication),
        shardGrads_(account, Category::Gradients),
        partial_(account, Category::Gradients),
        sum_(account, Category::Gradients) {
    const bool perLayer = stage == 3;
    units_ = planUnits(model.slices(), perLayer ? 0 : config.firstBucketBytes, perLayer ? 0 : config.bucketBytes,
                       sizeof(T), SmallEnds::Both);
    unitOf_ = unitOfLayer(units_, model.layers());
    size_t at = 0;
    for (const Unit& u : units_) {
      const size_t shard = (u.count + static_cast<size_t>(ranks_) - 1) / static_cast<size_t>(ranks_);
      shards_.push_back({at, shard});
      at += shard;
      // Stage 3's gathered units are the parameters in use; stages 1-2 land
      // a padded unit's gather here before copying it into place.
      paramStage_.emplace_back(account, stage == 3 ? Category::Parameters : Category::Communication);
      gradStage_.emplace_back(account, stage == 1 ? Category::Communication : Category::Gradients);
    }
    shardParams_.resize(at);
    shardGrads_.resize(at);
    if (split_.perRank > 1 && stage == 1) sum_.resize(model.paramCount());
    if (split_.perRank > 1 && stage != 1) partial_.resize(at);
    gathered_.resize(units_.size());
    gatherLaunched_.assign(units_.size(), 0.0);
    update_.emplace(account, at, config);
    comm_.broadcast(model.params<T>(), 0);  // every rank starts from rank 0's parameters
    for (size_t u = 0; u < units_.size(); ++u) {
      const auto own = ownPiece(u);
      std::copy(own.begin(), own.end(), shardParams_.data() + shards_[u].offset);
    }
    update_->load(shardParams_.span());
    if (stage_ == 2) model_.releaseGradients();  // each unit's land in a staging buffer instead
    // Parameter gathers run on a communicator of their own (a split), so
    // that those still in flight after a step never interleave with the
    // collectives the caller makes on `comm` meanwhile.
    gathers_.emplace(comm_.split(0, rank_));
    gatherStream_.emplace();
    if (stage_ == 3) model_.release();  // from here on, only shards and the units being used
  }

  StepReport step(uint64_t step) override {
    const auto start = Clock::now();
    const std::vector<size_t> batch = plan_.step(step);
    double lossSum = 0;
    exposed_ = 0;
    firstLaunch_.reset();
    events_.clear();
    // Gathers launched after the last step are this step's communication from its start.
    if (std::any_of(gatherLaunched_.begin(), gatherLaunched_.end(), [](double t) { return t != 0; })) launched();
    for (size_t j = 0; j < split_.perRank; ++j) {
      const size_t micro = static_cast<size_t>(rank_) * split_.perRank + j;
      const auto samples = std::span(batch).subspan(micro * split_.microSize, split_.microSize);
      const bool last = j + 1 == split_.perRank;
      // Stage 1 reduces once a step, the micro-batches' sum; 2 and 3 each micro-batch.
      Tracked<T>& into = stage_ == 1 || j == 0 ? shardGrads_ : partial_;
      double backwardFrom = 0;
      Model::Hooks hooks;
      hooks.beforeForward = [&](size_t layer) { enter(layer, true); };
      if (stage_ == 3) hooks.afterForward = [&](size_t layer) { leaveForward(layer); };
      hooks.beforeBackward = [&](size_t layer) {
        if (backwardFrom == 0) backwardFrom = monotonicSeconds();
        enterBackward(layer);
      };
      hooks.afterBackward = [&](size_t layer) { layerDone(layer, j, last, into); };
      const double forwardFrom = monotonicSeconds();
      lossSum += micro_.run(model_, data_, samples, &hooks);
      events_.push_back({Event::Forward, static_cast<int>(j), -1, forwardFrom, backwardFrom});
      events_.push_back({Event::Backward, static_cast<int>(j), -1, backwardFrom, monotonicSeconds()});
      if (j > 0 && stage_ != 1) partialPending_ = true;  // added once the stream has it (settlePartial)
    }
    settlePartial();
    StepReport report;
    report.samples = config_.batch;
    const float mean = 1.0f / static_cast<float>(config_.microBatches);
    std::vector<double> sums{lossSum, update_->sumOfSquares(shardGrads_.span(), mean)};  // pads are zero
    comm_.allReduce(std::span(sums));
    report.gradNorm = std::sqrt(sums[1]);
    const float lr = learningRate(step, config_.warmup, config_.steps, config_.lr, config_.minLr);
    const double optimizerFrom = monotonicSeconds();
    update_->step(shardParams_.span(), shardGrads_.span(), mean, clipScale(sums[1], config_.clip), lr);
    events_.push_back({Event::Optimizer, -1, -1, optimizerFrom, monotonicSeconds()});
    if (stage_ != 3) prefetchAll();
    report.loss = sums[0] / static_cast<double>(config_.microBatches);
    report.exposedSeconds = exposed_;
    report.commSeconds = firstLaunch_ ? seconds(Clock::now() - *firstLaunch_) : 0.0;
    report.seconds = seconds(Clock::now() - start);
    report.events = events_;
    return report;
  }

  // The own shard of every unit, where it sits in the dense model.
  std::vector<StateRun> save() override {
    settleGathers();
    return runsOf(placements(), update_->components(shardParams_.span()));
  }
  void load(const CheckpointReader& from) override {
    settleGathers();  // nothing may still write the parameters
    from.readInto(placements(), update_->components(shardParams_.span()));  // the pads stay zero
    update_->optimizer().setSteps(from.info().optimizerSteps);
    update_->restored(shardParams_.span());
    if (stage_ != 3) gatherAll(model_.params<T>());
  }
  Optimizer& optimizer() override { return update_->optimizer(); }

  void materialize() override {
    if (stage_ != 3) return settleGathers();
    model_.allocate();
    gatherAll(model_.params<T>());
  }
  std::vector<float> denseParams() override {
    if (stage_ != 3) {
      settleGathers();
      return model_.paramsAsFloat();
    }
    std::vector<T> full(model_.paramCount());  // working memory for the call, not training's
    gatherAll(full);
    std::vector<float> out(full.size());
    for (size_t i = 0; i < full.size(); ++i) out[i] = toFloat(full[i]);
    return out;
  }

 private:
  struct Shard {
    size_t offset;  // in this rank's shard buffers
    size_t count;   // ceil(unit / N): every rank's, the pads included
  };

  // Where this rank's elements of unit u sit in the dense model and in its
  // shard buffers (the last rank's may be short or empty).
  Placement placement(size_t u) const {
    const Unit& unit = units_[u];
    const size_t begin = std::min(unit.count, static_cast<size_t>(rank_) * shards_[u].count);
    const size_t end = std::min(unit.count, begin + shards_[u].count);
    return {unit.offset + begin, shards_[u].offset, end - begin};
  }
  std::vector<Placement> placements() const {
    std::vector<Placement> out;
    for (size_t u = 0; u < units_.size(); ++u) out.push_back(placement(u));
    return out;
  }
  // This rank's elements of unit u in a full flat buffer.
  std::span<T> ownPiece(size_t u, std::span<T> full) const {
    const Placement p = placement(u);
    return full.subspan(p.dense, p.count);
  }
  std::span<T> ownPiece(size_t u) { return ownPiece(u, model_.params<T>()); }
  std::span<T> shardOf(Tracked<T>& buffer, size_t u) {
    return buffer.span().subspan(shards_[u].offset, shards_[u].count);
  }
  size_t padded(size_t u) const { return shards_[u].count * static_cast<size_t>(ranks_); }

  void wait(loom::Stream& stream) {
    const auto from = Clock::now();
    stream.synchronize();
    exposed_ += seconds(Clock::now() - from);
  }
  void launched() {
    if (!firstLaunch_) firstLaunch_ = Clock::now();
  }

  // Stage 3: unit u's parameters all-gathered into its staging buffer, on the gather stream.
  void gather(size_t u) {
    paramStage_[u].resize(padded(u));
    launched();
    gathers_->allGather(std::span<const T>(shardOf(shardParams_, u)), paramStage_[u].span(), &*gatherStream_);
    gatherLaunched_[u] = monotonicSeconds();
  }
  // The unit after u in the pass (forward: lower unit index; backward: higher), if any.
  std::optional<size_t> next(size_t u, bool forward) const {
    if (forward) return u == 0 ? std::nullopt : std::optional<size_t>(u - 1);
    return u + 1 < units_.size() ? std::optional<size_t>(u + 1) : std::nullopt;
  }

  // Entering a unit's first layer of a pass. Stage 3: its gather (issued a
  // unit ahead, or now for the first) is waited for, the next unit's is
  // issued, and the unit's layers are bound to the gathered parameters.
  // Stages 1-2, in forward: the unit's gather launched after the last step
  // is waited for.
  void enter(size_t layer, bool forward) {
    const long u = unitOf_[layer];
    if (u < 0) return;
    const Unit& unit = units_[static_cast<size_t>(u)];
    if (layer != (forward ? unit.firstLayer : unit.lastLayer)) return;
    const auto uu = static_cast<size_t>(u);
    if (stage_ != 3) return awaitGather(uu);  // stages 1-2: the parameters gathered after the last step
    if (paramStage_[uu].size() == 0) gather(uu);
    wait(*gatherStream_);
    if (gatherLaunched_[uu] != 0) {  // the timeline's span of its gather, launch to landing
      events_.push_back({Event::Gather, -1, static_cast<int>(uu), gatherLaunched_[uu], monotonicSeconds()});
      gatherLaunched_[uu] = 0;
    }
    if (auto n = next(uu, forward); n && paramStage_[*n].size() == 0) gather(*n);
    const auto params = paramStage_[uu].span().first(unit.count);
    if (forward) {  // a forward reads parameters only: no gradient buffer yet
      model_.bindLayers(unit.firstLayer, unit.lastLayer, params, params);
    } else {
      stageGradients(uu);
      model_.bindLayers(unit.firstLayer, unit.lastLayer, params, gradStage_[uu].span().first(unit.count));
    }
  }

  // A gradient staging buffer for unit u. At most two are in flight (their
  // reduce-scatters queued on the stream): the third waits for the stream
  // and frees them, so the gradients never all exist at once (DeepSpeed's
  // bucketed reduction). So does a unit whose last micro-batch's
  // reduce-scatter may still read its buffer.
  void stageGradients(size_t u) {
    if (inFlight_.size() >= 2 || std::find(inFlight_.begin(), inFlight_.end(), u) != inFlight_.end()) {
      wait(stream_);
      for (size_t v : inFlight_) gradStage_[v].release();
      inFlight_.clear();
    }
    gradStage_[u].resize(padded(u));
  }
  // Stage 3: a unit's parameters are freed after its forward, but for the
  // forward's last unit (unit 0), where the backward starts at once: kept
  // for it, as FSDP keeps its last unit, instead of gathered again with
  // nothing to hide the gather under.
  void leaveForward(size_t layer) {
    const long u = unitOf_[layer];
    if (u <= 0 || layer != units_[static_cast<size_t>(u)].lastLayer) return;
    paramStage_[static_cast<size_t>(u)].release();  // free after use
  }

  void enterBackward(size_t layer) {
    if (stage_ == 3) return enter(layer, false);
    const long u = unitOf_[layer];
    if (stage_ != 2 || u < 0) return;
    const auto uu = static_cast<size_t>(u);
    const Unit& unit = units_[uu];
    if (layer != unit.lastLayer) return;
    stageGradients(uu);  // the unit's gradients land here, not in a full buffer
    model_.bindLayers(unit.firstLayer, unit.lastLayer, model_.params<T>().subspan(unit.offset, unit.count),
                      gradStage_[uu].span().first(unit.count));
  }

  // A layer's gradients of micro-batch j are written. Stage 1 adds them to
  // the step's sum when a rank runs several micro-batches and reduces the
  // last one's; stages 2 and 3 reduce every micro-batch's.
  void layerDone(size_t layer, size_t j, bool last, Tracked<T>& into) {
    if (stage_ == 1 && split_.perRank > 1) {
      const auto& slice = model_.slices()[layer];
      sumMicroBatch(model_.grads<T>().subspan(slice.offset, slice.count), sum_.span().subspan(slice.offset, slice.count),
                    j == 0, last);
    }
    if (stage_ != 1 || last) unitDone(layer, into);
  }

  // A unit's gradients are complete: reduce-scatter them into the shard.
  void unitDone(size_t layer, Tracked<T>& into) {
    const long u = unitOf_[layer];
    if (u < 0) return;
    const auto uu = static_cast<size_t>(u);
    const Unit& unit = units_[uu];
    if (layer != unit.firstLayer) return;
    // The micro-batch before's shard must be in shardGrads_ before `into` is written again.
    if (partialPending_) settlePartial();
    std::span<const T> source;
    if (stage_ == 1) {
      const auto grads = reducedGrads().subspan(unit.offset, unit.count);
      if (padded(uu) == unit.count) {
        source = grads;
      } else {  // a padded copy: reduce-scatter takes N equal blocks
        stageGradients(uu);
        std::copy(grads.begin(), grads.end(), gradStage_[uu].data());
        source = gradStage_[uu].span();
      }
    } else {
      source = gradStage_[uu].span();
    }
    launched();
    comm_.reduceScatter(source, shardOf(into, uu), loomSum, &stream_);
    if (gradStage_[uu].size() != 0) inFlight_.push_back(uu);
    if (stage_ == 3) paramStage_[uu].release();
  }

  // Stage 1's gradients to reduce: the micro-batches' float32 sum when a
  // rank runs several (bf16: rounded into the gradients once), else the gradients.
  std::span<T> reducedGrads() {
    if constexpr (std::is_same_v<T, float>) {
      if (split_.perRank > 1) return sum_.span();
    }
    return model_.grads<T>();
  }

  // Every reduce-scatter queued so far has run: the staging is freed, and a
  // later micro-batch's shard waiting in partial_ is added, in order.
  void settlePartial() {
    wait(stream_);
    for (auto& g : gradStage_) g.release();
    inFlight_.clear();
    if (!partialPending_) return;
    addInto(shardGrads_.span(), partial_.span());
    partialPending_ = false;
  }

  // Every unit's parameters from every rank's shard into `full`, launched
  // in the order a forward reaches them (the last unit holds the first
  // layers), each marked by an event; a unit whose count does not split
  // in N goes through its padded paramStage_, copied into place when landed.
  void launchGathers(std::span<T> full) {
    for (size_t u = units_.size(); u-- > 0;) {
      launched();
      const std::span<const T> own = shardOf(shardParams_, u);
      if (padded(u) == units_[u].count) {  // straight into place
        gathers_->allGather(own, full.subspan(units_[u].offset, units_[u].count), &*gatherStream_);
      } else {
        paramStage_[u].resize(padded(u));
        gathers_->allGather(own, paramStage_[u].span(), &*gatherStream_);
      }
      gathered_[u].record(*gatherStream_);
      gatherLaunched_[u] = monotonicSeconds();
    }
  }
  // Waits for unit u's gather, if one is pending, and puts it in place in `full`.
  void landGather(size_t u, std::span<T> full) {
    if (gatherLaunched_[u] == 0) return;
    const auto from = Clock::now();
    gathered_[u].synchronize();
    exposed_ += seconds(Clock::now() - from);
    if (paramStage_[u].size() != 0) {
      std::copy_n(paramStage_[u].data(), units_[u].count, full.data() + units_[u].offset);
      paramStage_[u].release();
    }
    events_.push_back({Event::Gather, -1, static_cast<int>(u), gatherLaunched_[u], monotonicSeconds()});
    gatherLaunched_[u] = 0;
  }
  // Stages 1 and 2 after the step: the next step's parameters, launched now
  // and landed unit by unit as its forward reaches them (awaitGather).
  void prefetchAll() { launchGathers(model_.params<T>()); }
  void awaitGather(size_t u) { landGather(u, model_.params<T>()); }
  // restored() and ZeRO-3's materialize(): every parameter into `full`, now.
  void gatherAll(std::span<T> full) {
    launchGathers(full);
    for (size_t u = 0; u < units_.size(); ++u) landGather(u, full);
  }
  void settleGathers() {
    for (size_t u = 0; u < units_.size(); ++u) awaitGather(u);
  }

  Model& model_;
  const Dataset& data_;
  TrainConfig config_;
  const loom::Comm& comm_;
  int stage_;
  int ranks_;
  int rank_;
  WorkSplit split_;
  BatchPlan plan_;
  MicroBatch micro_;
  std::vector<Unit> units_;
  std::vector<long> unitOf_;
  std::vector<Shard> shards_;
  Tracked<T> shardParams_;  // this rank's shard of every unit: fp32 master parameters, or bf16 ones
  Tracked<T> shardGrads_;   // and their gradients
  Tracked<T> partial_;      // a later micro-batch's shard, before it is added
  std::vector<Tracked<T>> paramStage_;  // per unit: gathered parameters (padded)
  std::vector<Tracked<T>> gradStage_;   // per unit: gradients to reduce-scatter (padded)
  std::optional<Update<T>> update_;     // the optimizer (and bf16's master weights) over the shards
  loom::Stream stream_;  // reduce-scatters
  std::optional<loom::Comm> gathers_;  // parameter gathers: a second communicator, so they keep their own order
  std::optional<loom::Stream> gatherStream_;
  double exposed_ = 0;
  std::optional<Clock::time_point> firstLaunch_;
  std::vector<size_t> inFlight_;  // units whose gradient staging a queued reduce-scatter still reads
  Tracked<float> sum_;            // stage 1, several micro-batches a rank: their gradients' float32 sum
  bool partialPending_ = false;   // stages 2-3: partial_ holds a shard that is not yet added
  std::vector<loom::Event> gathered_;     // per unit: its last parameter gather
  std::vector<double> gatherLaunched_;    // per unit: when that gather was launched (0: none pending)
  std::vector<TimelineEvent> events_;     // this step's, for --timeline
};

}  // namespace

std::unique_ptr<Trainer> makeZero(Model& model, const Dataset& data, const TrainConfig& config,
                                  const loom::Comm& comm, MemoryAccount& account, int stage) {
  if (model.precision() == Precision::Bf16) return std::make_unique<Zero<bf16>>(model, data, config, comm, account, stage);
  return std::make_unique<Zero<float>>(model, data, config, comm, account, stage);
}

}  // namespace loom::train
