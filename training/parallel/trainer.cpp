#include "training/parallel/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "training/layers/cross_entropy.hpp"

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Mode parseMode(const std::string& name) {
  if (name == "single") return Mode::Single;
  if (name == "ddp") return Mode::Ddp;
  throw std::invalid_argument("--mode " + name + ": not a mode (single, ddp)");
}

const char* modeName(Mode mode) { return mode == Mode::Single ? "single" : "ddp"; }

Trainer::Trainer(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm* comm,
                 MemoryAccount& account)
    : model_(model),
      data_(data),
      config_(config),
      comm_(config.mode == Mode::Single ? nullptr : comm),
      plan_(data.size(), config.batch, config.seed),
      sum_(account, Category::Gradients),
      x_(account, Category::Activations),
      dlogits_(account, Category::Activations) {
  if (config.mode != Mode::Single && comm == nullptr) throw std::invalid_argument("--mode ddp needs a communicator");
  if (comm_ != nullptr) {
    ranks_ = comm_->size();
    rank_ = comm_->rank();
  }
  const auto n = static_cast<size_t>(ranks_);
  if (config.microBatches == 0 || config.microBatches % n != 0) {
    throw std::invalid_argument("--micro-batches " + std::to_string(config.microBatches) +
                                " does not split over " + std::to_string(n) + " ranks");
  }
  if (config.batch % config.microBatches != 0) {
    throw std::invalid_argument("--batch " + std::to_string(config.batch) + " does not split into " +
                                std::to_string(config.microBatches) + " micro-batches");
  }
  if (data.features() != data.rowsPerSample() * model.inFeatures() || data.classes() != model.outFeatures()) {
    throw std::invalid_argument("the model takes " + std::to_string(model.inFeatures()) + " inputs per row to " +
                                std::to_string(model.outFeatures()) + " classes, the data has " +
                                std::to_string(data.features()) + " per " + std::to_string(data.rowsPerSample()) +
                                " rows and " + std::to_string(data.classes()) + " classes");
  }
  perRank_ = config.microBatches / n;
  microSize_ = config.batch / config.microBatches;
  const size_t count = model.paramCount();
  optimizer_ = config.optimizer == OptimizerKind::AdamW ? makeAdamW(account, count, config.adamw)
                                                        : makeSgd(account, count, config.sgd);
  if (perRank_ > 1) sum_.resize(count);
  if (comm_ != nullptr) {
    comm_->broadcast(model.params(), 0);  // every rank starts from rank 0's parameters
    planBuckets();
    stream_.emplace();
  }
}

Trainer::~Trainer() = default;

void Trainer::planBuckets() {
  // Whole layers, last first, as the backward produces them; a bucket
  // closes once it holds its cap (PyTorch's 1 MiB first, 25 MiB after).
  const auto& slices = model_.slices();
  size_t cap = config_.firstBucketBytes;
  for (size_t i = slices.size(); i-- > 0;) {
    if (slices[i].count == 0) continue;
    if (buckets_.empty() || buckets_.back().count * sizeof(float) >= cap) {
      if (!buckets_.empty()) cap = config_.bucketBytes;
      buckets_.push_back({i, i, slices[i].offset, 0});
    }
    Bucket& b = buckets_.back();
    b.firstLayer = i;
    b.offset = slices[i].offset;
    b.count += slices[i].count;
  }
}

std::vector<std::pair<size_t, size_t>> Trainer::buckets() const {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& b : buckets_) out.emplace_back(b.firstLayer, b.lastLayer);
  return out;
}

double Trainer::microBatch(std::span<const size_t> samples, const Model::LayerDone& done) {
  const size_t rows = samples.size() * data_.rowsPerSample();
  x_.resize(samples.size() * data_.features());
  labels_.resize(rows);
  gather(data_, samples, x_.span(), labels_);
  const auto logits = model_.forward(x_.span(), rows);
  dlogits_.resize(logits.size());
  const double loss = crossEntropy(logits, labels_, rows, model_.outFeatures(), dlogits_.span());
  model_.backward(dlogits_.span(), rows, done);
  return loss;
}

StepReport Trainer::step(uint64_t step) {
  const auto start = Clock::now();
  const std::vector<size_t> batch = plan_.step(step);
  const std::span<float> grads = model_.grads();
  // The buffer the micro-batches' sum ends in: the gradients themselves when
  // this rank runs one micro-batch, else a separate sum.
  const std::span<float> sum = perRank_ > 1 ? sum_.span() : grads;
  double lossSum = 0;
  size_t nextBucket = 0;
  std::optional<Clock::time_point> firstLaunch;
  for (size_t j = 0; j < perRank_; ++j) {
    const size_t micro = static_cast<size_t>(rank_) * perRank_ + j;
    const auto samples = std::span(batch).subspan(micro * microSize_, microSize_);
    const bool last = j + 1 == perRank_;
    const Model::LayerDone done = [&](size_t layer) {
      const auto& slice = model_.slices()[layer];
      if (perRank_ > 1) {
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
        const Bucket& b = buckets_[nextBucket++];
        if (!firstLaunch) firstLaunch = Clock::now();
        comm_->allReduce(sum.subspan(b.offset, b.count), loomSum, &*stream_);
      }
    };
    lossSum += microBatch(samples, done);
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

}  // namespace loom::train
