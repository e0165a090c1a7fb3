// pp (trainer.hpp): pipeline parallelism. The model's top-level layers are
// cut into stages x v chunks (partition.hpp); rank s holds chunks s,
// s + stages, ... with their parameters, gradients and optimizer state, and
// runs its row of the schedule's table (schedule.hpp) over every
// micro-batch of the step's plan:
//
//   forward   on a stash of its own: a copy of the chunk's layers bound to
//             the chunk's parameters, keeping that micro-batch's
//             activations until its backward (so a stage holds as many
//             micro-batches as the schedule has in flight there, and the
//             activation account shows GPipe's m against 1F1B's stages - s);
//   backward  writes the chunk's gradients, which are summed over the
//             micro-batches in order as single sums them;
//   exchange  sends go out on a Loom stream per kind (the data copied first,
//             so the stash can move on), receives block until they arrive.
//
// The step then ends as single's does: the gradient norm is summed chunk by
// chunk in model order, each owner going on from the last one's partial
// sum (so it is single's double sum, bit for bit), and each rank steps its
// chunks' optimizer. Every parameter update is then single's: with the
// same micro-batches the parameters are bitwise the reference's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <stdexcept>
#include <string>

#include "training/layers/cross_entropy.hpp"
#include "training/parallel/micro_batch.hpp"
#include "training/parallel/partition.hpp"
#include "training/parallel/trainer.hpp"
#include "training/parallel/update.hpp"

namespace loom::train {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = Transfer::Kind;
using Event = TimelineEvent::Kind;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

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
};

// A model chunk this rank holds.
struct Chunk {
  Chunk(MemoryAccount& account, size_t count, const TrainConfig& config)
      : params(account, Category::Parameters, count), grads(account, Category::Gradients, count),
        sum(account, Category::Gradients), update(account, count, config) {}
  int index = 0;  // in the model
  LayerRange layers{};
  size_t offset = 0;  // in the model's flat buffers
  Tracked<float> params;
  Tracked<float> grads;
  Tracked<float> sum;  // the micro-batches' gradient sum, when there are several
  Update<float> update;
  std::vector<std::unique_ptr<Stash>> stashes;
  std::span<float> reduced() { return sum.size() > 0 ? sum.span() : grads.span(); }
};

class Pipeline final : public Trainer {
 public:
  Pipeline(Model& model, const Dataset& data, const TrainConfig& config, const loom::Comm& comm,
           MemoryAccount& account, const ModelRecipe& recipe)
      : model_(model),
        data_(data),
        config_(config),
        comm_(comm),
        rank_(comm.rank()),
        shape_{comm.size(), static_cast<int>(config.microBatches), config.chunks},
        split_(splitWork(config, model, data, 1)),
        plan_(data.size(), config.batch, config.seed),
        scratch_(account, Category::Activations) {
    if (model.precision() != Precision::Fp32) {
      throw std::invalid_argument("--precision bf16: --mode pp runs in fp32 only so far");
    }
    const Schedule schedule = makeSchedule(config.schedule, shape_);
    actions_ = schedule[static_cast<size_t>(rank_)];
    const size_t parts = static_cast<size_t>(shape_.modelChunks());
    std::vector<size_t> weights;
    for (const auto& slice : model.slices()) weights.push_back(slice.count);
    const std::vector<LayerRange> ranges =
        config.stages.empty() ? balanceLayers(weights, parts) : listedLayers(config.stages, model.layers(), parts);
    for (const LayerRange& r : ranges) ranges_.push_back(r);
    // Gradients travel on a communicator of their own (schedule.hpp).
    gradComm_ = comm.split(0, rank_);
    const std::vector<int> stashes = stashesNeeded(schedule, shape_, rank_);
    for (int c = 0; c < shape_.chunks; ++c) {
      const int index = c * shape_.stages + rank_;
      const LayerRange layers = ranges[static_cast<size_t>(index)];
      const size_t offset = model.slices()[layers.first].offset;
      const size_t end = model.slices()[layers.last].offset + model.slices()[layers.last].count;
      auto chunk = std::make_unique<Chunk>(account, end - offset, config);
      chunk->index = index;
      chunk->layers = layers;
      chunk->offset = offset;
      // Every rank initialized the whole model alike; each keeps its chunks.
      std::copy_n(model.params().data() + offset, end - offset, chunk->params.data());
      if (config.microBatches > 1) chunk->sum.resize(end - offset);
      for (int k = 0; k < stashes[static_cast<size_t>(c)]; ++k) {
        Model copy(account);
        recipe(copy);
        auto stash = std::make_unique<Stash>(copy.takeLayers(layers.first, layers.last), account);
        stash->layers.bind(chunk->params.span(), chunk->grads.span());
        chunk->stashes.push_back(std::move(stash));
      }
      chunks_.push_back(std::move(chunk));
    }
    model.release();  // the whole model comes back in materialize()
  }

  StepReport step(uint64_t step) override {
    const double start = now();
    events_.clear();
    bytes_ = 0;
    batch_ = plan_.step(step);
    lossSum_ = 0;
    for (const Action& a : actions_) {
      switch (a.op) {
        case Action::Op::Forward: forward(a.micro, chunkAt(a.chunk)); break;
        case Action::Op::Backward: backward(a.micro, chunkAt(a.chunk)); break;
        case Action::Op::Exchange: exchange(a.transfers); break;
      }
    }
    const double sendsFrom = now();
    activationStream_.synchronize();
    gradientStream_.synchronize();
    outbox_.clear();
    if (now() - sendsFrom > 1e-6) events_.push_back({Event::Send, -1, -1, sendsFrom, now()});

    StepReport report;
    report.samples = config_.batch;
    const int lastOwner = shape_.owner(shape_.modelChunks() - 1);
    std::vector<double> loss{rank_ == lastOwner ? lossSum_ : 0.0};
    comm_.allReduce(std::span(loss));  // x + 0 + ... = x exactly
    report.loss = loss[0] / static_cast<double>(config_.microBatches);

    const double optimizerFrom = now();
    const float mean = 1.0f / static_cast<float>(config_.microBatches);
    const double squares = sumOfSquares(mean);
    report.gradNorm = std::sqrt(squares);
    const float lr = learningRate(step, config_.warmup, config_.steps, config_.lr, config_.minLr);
    const float clip = clipScale(squares, config_.clip);
    for (auto& chunk : chunks_) chunk->update.step(chunk->params.span(), chunk->reduced(), mean, clip, lr);
    const double end = now();
    events_.push_back({Event::Optimizer, -1, -1, optimizerFrom, end});

    report.seconds = end - start;
    double busy = 0;
    for (const auto& e : events_) {
      if (e.kind == Event::Forward || e.kind == Event::Backward || e.kind == Event::Optimizer) busy += e.end - e.start;
    }
    report.idleShare = report.seconds > 0 ? std::max(0.0, 1.0 - busy / report.seconds) : 0.0;
    report.pipelineBytes = bytes_;
    report.events = events_;
    return report;
  }

  void materialize() override {
    model_.allocate();
    for (int index = 0; index < shape_.modelChunks(); ++index) {
      const LayerRange layers = ranges_[static_cast<size_t>(index)];
      const size_t offset = model_.slices()[layers.first].offset;
      const size_t end = model_.slices()[layers.last].offset + model_.slices()[layers.last].count;
      const auto part = model_.params().subspan(offset, end - offset);
      if (shape_.owner(index) == rank_) {
        const Chunk& chunk = chunkAt(index);
        std::copy(chunk.params.span().begin(), chunk.params.span().end(), part.begin());
      }
      comm_.broadcast(part, shape_.owner(index));
    }
  }

  std::vector<std::span<float>> state() override {
    std::vector<std::span<float>> out;
    for (auto& chunk : chunks_) {
      for (const auto s : chunk->update.state(chunk->params.span())) out.push_back(s);
    }
    return out;
  }
  // The first chunk's; restored() gives the others its step count.
  Optimizer& optimizer() override { return chunks_.front()->update.optimizer(); }
  void restored() override {
    for (auto& chunk : chunks_) chunk->update.optimizer().setSteps(optimizer().steps());
  }

 private:
  Chunk& chunkAt(int index) { return *chunks_[static_cast<size_t>(index / shape_.stages)]; }
  size_t rows() const { return split_.microSize * data_.rowsPerSample(); }
  std::span<const size_t> samples(int micro) const {
    return std::span(batch_).subspan(static_cast<size_t>(micro) * split_.microSize, split_.microSize);
  }

  // The stash holding `micro` on `chunk`, or a free one for it.
  Stash& stashFor(Chunk& chunk, int micro) {
    Stash* free = nullptr;
    for (auto& s : chunk.stashes) {
      if (s->micro == micro) return *s;
      if (s->micro < 0 && free == nullptr) free = s.get();
    }
    if (free == nullptr) throw std::logic_error("pipeline: no free activation stash (the schedule's count is wrong)");
    free->micro = micro;
    return *free;
  }

  void forward(int micro, Chunk& chunk) {
    const double from = now();
    Stash& stash = stashFor(chunk, micro);
    const bool first = chunk.index == 0, last = chunk.index == shape_.modelChunks() - 1;
    if (first || last) {
      // The first chunk reads the samples, the last their labels.
      Tracked<float>& x = first ? stash.input : scratch_;
      x.resize(split_.microSize * data_.features());
      stash.labels.resize(rows());
      gather(data_, samples(micro), x.span(), stash.labels);
    }
    stash.output = stash.layers.forward(stash.input.span(), rows());
    if (last) {
      stash.dy.resize(stash.output.size());
      lossSum_ += crossEntropy(stash.output, stash.labels, rows(), stash.layers.outFeatures(), stash.dy.span());
    }
    events_.push_back({Event::Forward, micro, chunk.index, from, now()});
  }

  void backward(int micro, Chunk& chunk) {
    const double from = now();
    Stash& stash = stashFor(chunk, micro);
    const bool several = chunk.sum.size() > 0;
    Sequence::Hooks hooks;
    hooks.afterBackward = [&](size_t layer) {
      if (!several) return;
      const auto& slice = stash.layers.slices()[layer];
      float* s = chunk.sum.data() + slice.offset;
      const float* g = chunk.grads.data() + slice.offset;
      for (size_t i = 0; i < slice.count; ++i) s[i] = micro == 0 ? g[i] : s[i] + g[i];
    };
    std::span<float> dx;
    if (chunk.index > 0) {
      stash.dx.resize(rows() * stash.layers.inFeatures());
      dx = stash.dx.span();
    }
    stash.layers.backward(stash.dy.span(), dx, rows(), &hooks);
    if (chunk.index == 0) stash.micro = -1;  // nothing of it is sent
    events_.push_back({Event::Backward, micro, chunk.index, from, now()});
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
      Chunk& chunk = chunkAt(t.send == activation ? t.edge : t.edge + 1);
      Stash& stash = stashFor(chunk, t.micro);
      const loom::Comm& comm = activation ? comm_ : gradComm_;
      if (t.send) {
        const double from = now();
        const std::span<const float> data = activation ? stash.output : std::span<const float>(stash.dx.span());
        outbox_.emplace_back(model_.account(), Category::Communication, data.size());
        std::copy(data.begin(), data.end(), outbox_.back().data());
        if (!activation) stash.micro = -1;  // its last use
        comm.send(outbox_.back().span(), t.peer, activation ? &activationStream_ : &gradientStream_);
        bytes_ += data.size_bytes();
        events_.push_back({Event::Send, t.micro, chunk.index, from, now()});
        continue;
      }
      Tracked<float>& into = activation ? stash.input : stash.dy;
      into.resize(rows() * (activation ? stash.layers.inFeatures() : stash.layers.outFeatures()));
      receives.push_back({into.span(), &t});
    }
    if (receives.empty()) return;
    const double from = now();
    loom::Group group;
    for (const Receive& r : receives) {
      (r.transfer->kind == Kind::Activation ? comm_ : gradComm_).recv(r.into, r.transfer->peer);
    }
    group.end();
    for (const Receive& r : receives) {
      const int into = r.transfer->kind == Kind::Activation ? r.transfer->edge + 1 : r.transfer->edge;
      events_.push_back({Event::Receive, r.transfer->micro, into, from, now()});
    }
  }

  // Single's sum of squares over the whole model, element by element in
  // model order: each chunk's owner goes on from the chunk before's sum.
  double sumOfSquares(float mean) {
    const int chunks = shape_.modelChunks();
    std::vector<double> partial{0.0};
    for (int index = 0; index < chunks; ++index) {
      const int owner = shape_.owner(index);
      if (owner != rank_) continue;
      if (index > 0 && shape_.owner(index - 1) != rank_) comm_.recv(std::span(partial), shape_.owner(index - 1));
      Chunk& chunk = chunkAt(index);
      partial[0] = chunk.update.sumOfSquares(chunk.reduced(), mean, partial[0]);
      if (index + 1 < chunks && shape_.owner(index + 1) != rank_) comm_.send(std::span(partial), shape_.owner(index + 1));
    }
    comm_.broadcast(std::span(partial), shape_.owner(chunks - 1));
    return partial[0];
  }

  Model& model_;
  const Dataset& data_;
  TrainConfig config_;
  const loom::Comm& comm_;  // activations, and the step's small messages
  loom::Comm gradComm_;     // gradients
  int rank_;
  PipelineShape shape_;
  WorkSplit split_;
  BatchPlan plan_;
  std::vector<Action> actions_;
  std::vector<LayerRange> ranges_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  Tracked<float> scratch_;  // the last chunk's samples, read for their labels
  loom::Stream activationStream_;
  loom::Stream gradientStream_;
  std::deque<Tracked<float>> outbox_;  // what the streams are sending
  std::vector<size_t> batch_;
  double lossSum_ = 0;
  uint64_t bytes_ = 0;
  std::vector<TimelineEvent> events_;
};

}  // namespace

std::unique_ptr<Trainer> makePipeline(Model& model, const Dataset& data, const TrainConfig& config,
                                      const loom::Comm& comm, MemoryAccount& account, const ModelRecipe& recipe) {
  return std::make_unique<Pipeline>(model, data, config, comm, account, recipe);
}

}  // namespace loom::train
