// single and ddp (trainer.hpp). ddp's buckets are the units of units.hpp;
// each is all-reduced (sum) on a Loom stream as soon as the last
// micro-batch's backward has written its layers, overlapping the rest of
// the backward, and the step waits once, before the optimizer.
#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "training/parallel/micro_batch.hpp"
#include "training/parallel/trainer.hpp"
#include "training/parallel/units.hpp"

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

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
        sum_(account, Category::Gradients) {
    const size_t count = model.paramCount();
    optimizer_ = config.optimizer == OptimizerKind::AdamW ? makeAdamW(account, count, config.adamw)
                                                          : makeSgd(account, count, config.sgd);
    if (split_.perRank > 1) sum_.resize(count);
    if (comm_ != nullptr) {
      comm_->broadcast(model.params(), 0);  // every rank starts from rank 0's parameters
      buckets_ = planUnits(model.slices(), config.firstBucketBytes, config.bucketBytes);
      stream_.emplace();
    }
  }

  StepReport step(uint64_t step) override {
    const auto start = Clock::now();
    const std::vector<size_t> batch = plan_.step(step);
    const std::span<float> grads = model_.grads();
    // Where the micro-batches' sum ends: the gradients themselves when this
    // rank runs one micro-batch, else a separate sum.
    const std::span<float> sum = split_.perRank > 1 ? sum_.span() : grads;
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
          float* s = sum.data() + slice.offset;
          const float* g = grads.data() + slice.offset;
          if (j == 0) {
            std::copy(g, g + slice.count, s);
          } else {
            for (size_t i = 0; i < slice.count; ++i) s[i] += g[i];
          }
        }
        // The last micro-batch's layers complete buckets: reduce each at once.
        while (last && comm_ != nullptr && nextBucket < buckets_.size() && buckets_[nextBucket].firstLayer >= layer) {
          const Unit& b = buckets_[nextBucket++];
          if (!firstLaunch) firstLaunch = Clock::now();
          comm_->allReduce(sum.subspan(b.offset, b.count), loomSum, &*stream_);
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
    // The mean over every micro-batch of the step: the same scaling everywhere.
    const float scale = 1.0f / static_cast<float>(config_.microBatches);
    for (float& g : sum) g *= scale;
    report.gradNorm = clipToNorm(sum, sumOfSquares(sum), config_.clip);
    const float lr = learningRate(step, config_.warmup, config_.steps, config_.lr, config_.minLr);
    optimizer_->step(model_.params(), sum, lr);
    report.loss = lossSum / static_cast<double>(config_.microBatches);
    report.seconds = seconds(Clock::now() - start);
    return report;
  }

  std::vector<std::span<float>> state() override { return {model_.params(), optimizer_->state()}; }
  Optimizer& optimizer() override { return *optimizer_; }

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
  std::unique_ptr<Optimizer> optimizer_;
  Tracked<float> sum_;  // the micro-batches' gradient sum, when a rank runs more than one
  std::vector<Unit> buckets_;
  std::optional<loom::Stream> stream_;
};

}  // namespace

std::unique_ptr<Trainer> makeDataParallel(Model& model, const Dataset& data, const TrainConfig& config,
                                          const loom::Comm* comm, MemoryAccount& account) {
  return std::make_unique<DataParallel>(model, data, config, comm, account);
}

}  // namespace loom::train
