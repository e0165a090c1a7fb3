// single and ddp (trainer.hpp). ddp's buckets are the units of units.hpp;
// each is all-reduced (sum) on a Loom stream as soon as the last
// micro-batch's backward has written its layers, overlapping the rest of
// the backward, and the step waits once, before the optimizer. In bf16 the
// gradients are all-reduced in bf16 (Loom accumulates them in float32 and
// rounds once), and a rank that runs several micro-batches sums them in
// float32 and rounds once, so that single with N micro-batches and ddp on N
// ranks round the same sums the same way.
#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "training/layers/tensor_group.hpp"
#include "training/parallel/micro_batch.hpp"
#include "training/parallel/trainer.hpp"
#include "training/parallel/units.hpp"
#include "training/parallel/update.hpp"

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

template <class T>
class DataParallel final : public Trainer {
 public:
  DataParallel(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm* comm,
               MemoryAccount& account)
      : model_(model),
        data_(data),
        config_(config),
        comm_(comm),
        ranks_(comm != nullptr ? comm->size() : 1),
        rank_(comm != nullptr ? comm->rank() : 0),
        split_(splitWork(config, model, data, ranks_)),
        plan_(data.size(), config.batch, config.seed),
        micro_(account),
        sum_(account, Category::Gradients),
        update_(account, model.paramCount(), config) {
    if (split_.perRank > 1) sum_.resize(model.paramCount());
    if (comm_ != nullptr) {
      comm_->broadcast(model.params<T>(), 0);  // every rank starts from rank 0's parameters
      buckets_ = planUnits(model.slices(), config.firstBucketBytes, config.bucketBytes, sizeof(T));
      stream_.emplace();
    }
    update_.load(model.params<T>());
  }

  StepReport step(uint64_t step) override {
    const auto start = Clock::now();
    const std::vector<size_t> batch = plan_.step(step);
    const std::span<T> grads = model_.grads<T>();
    // Where the micro-batches' sum ends: the gradients themselves when this
    // rank runs one micro-batch, else a float32 sum (fp32: which is then
    // what is reduced; bf16: rounded into the gradients once complete).
    const std::span<T> reduced = [&] {
      if constexpr (std::is_same_v<T, float>) return split_.perRank > 1 ? sum_.span() : grads;
      else return grads;
    }();
    double lossSum = 0;
    size_t nextBucket = 0;
    std::optional<Clock::time_point> firstLaunch;
    for (size_t j = 0; j < split_.perRank; ++j) {
      const size_t micro = static_cast<size_t>(rank_) * split_.perRank + j;
      const auto samples = std::span(batch).subspan(micro * split_.microSize, split_.microSize);
      const bool last = j + 1 == split_.perRank;
      Model::Hooks hooks;
      hooks.afterBackward = [&](size_t layer) {
        const auto& slice = model_.slices()[layer];
        if (split_.perRank > 1) {
          sumMicroBatch(model_.grads<T>().subspan(slice.offset, slice.count), sum_.span().subspan(slice.offset, slice.count),
                        j == 0, last);
        }
        // The last micro-batch's layers complete buckets: reduce each at once.
        while (last && comm_ != nullptr && nextBucket < buckets_.size() && buckets_[nextBucket].firstLayer >= layer) {
          const Unit& b = buckets_[nextBucket++];
          if (!firstLaunch) firstLaunch = Clock::now();
          comm_->allReduce(reduced.subspan(b.offset, b.count), loomSum, &*stream_);
        }
      };
      lossSum += micro_.run(model_, data_, samples, &hooks);
    }
    StepReport report;
    report.samples = config_.batch;
    if (comm_ != nullptr) {
      const auto waitFrom = Clock::now();
      stream_->synchronize();
      const auto end = Clock::now();
      report.exposedSeconds = seconds(end - waitFrom);
      report.commSeconds = firstLaunch ? seconds(end - *firstLaunch) : 0.0;
      std::vector<double> loss{lossSum};
      comm_->allReduce(std::span(loss));
      lossSum = loss[0];
    }
    // Tied copies both get their sum; the norm counts each parameter once.
    sumTiedGradients(model_.ties(), reduced);
    // The mean over every micro-batch of the step: the same scaling everywhere.
    const float mean = 1.0f / static_cast<float>(config_.microBatches);
    double squares = 0;
    size_t from = 0;
    for (const Model::Tie& t : model_.ties()) {
      squares = update_.sumOfSquares(reduced.subspan(from, t.b - from), mean, squares);
      from = t.b + t.count;
    }
    squares = update_.sumOfSquares(reduced.subspan(from), mean, squares);
    report.gradNorm = std::sqrt(squares);
    const float lr = learningRate(step, config_.warmup, config_.steps, config_.lr, config_.minLr);
    update_.step(model_.params<T>(), reduced, mean, clipScale(squares, config_.clip), lr);
    report.loss = lossSum / static_cast<double>(config_.microBatches);
    report.seconds = seconds(Clock::now() - start);
    return report;
  }

  // Every rank holds the whole state: each writes its share of it, and reads all of it.
  std::vector<StateRun> save() override {
    const Share share = shareOf(model_.paramCount(), ranks_, rank_);
    const Placement mine{share.first, share.first, share.count};
    return runsOf(std::span(&mine, 1), update_.components(model_.params<T>()));
  }
  void load(const CheckpointReader& from) override {
    const Placement all{0, 0, model_.paramCount()};
    from.readInto(std::span(&all, 1), update_.components(model_.params<T>()));
    update_.optimizer().setSteps(from.info().optimizerSteps);
    update_.restored(model_.params<T>());
  }
  Optimizer& optimizer() override { return update_.optimizer(); }
  std::vector<float> denseParams() override { return model_.paramsAsFloat(); }

 private:
  Model& model_;
  const Dataset& data_;
  TrainConfig config_;
  const loom::Comm* comm_;
  int ranks_;
  int rank_;
  WorkSplit split_;
  BatchPlan plan_;
  MicroBatch micro_;
  Tracked<float> sum_;  // the micro-batches' gradient sum, when a rank runs more than one
  Update<T> update_;
  std::vector<Unit> buckets_;
  std::optional<loom::Stream> stream_;
};

}  // namespace

std::unique_ptr<Trainer> makeDataParallel(Model& model, const Dataset& data, const TrainConfig& config,
                                          const loom::Comm* comm, MemoryAccount& account) {
  if (model.precision() == Precision::Bf16) return std::make_unique<DataParallel<bf16>>(model, data, config, comm, account);
  return std::make_unique<DataParallel<float>>(model, data, config, comm, account);
}

}  // namespace loom::train
