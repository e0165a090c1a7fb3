// loom-train: trains a sample model through the training layer, alone or
// data parallel over Loom, and reports loss, speed, communication and memory
// per step. Under a launcher (loomrun, torchrun, Slurm, mpirun) each process
// is a rank; started by hand with --mode ddp it starts -N local ranks itself.
#include <loom/loom.hpp>
#include <malloc.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/launch/local_job.hpp"
#include "tools/loom-train/options.hpp"
#include "tools/loom-train/plot.hpp"
#include "tools/loom-train/report.hpp"
#include "training/checkpoint.hpp"
#include "training/data/char_text.hpp"
#include "training/data/fashion_mnist.hpp"
#include "training/data/token_file.hpp"
#include "training/data/tokenizer.hpp"
#include "training/layers/cross_entropy.hpp"
#include "training/math/gemm.hpp"
#include "training/flops.hpp"
#include "training/models/generate.hpp"
#include "training/models/gpt.hpp"
#include "training/models/mlp.hpp"
#include "training/sha256.hpp"

namespace {

using namespace loom::train;

struct Evaluation {
  double accuracy;  // of the rows' largest logits
  double loss;      // mean cross-entropy per row
};

// Forward only, over `samples` of `held`, in chunks.
Evaluation evaluate(Model& model, const Dataset& held, std::span<const size_t> samples) {
  const size_t chunk = std::max<size_t>(1, 1000 / held.rowsPerSample());
  std::vector<float> x, dlogits;
  std::vector<int32_t> labels;
  size_t hits = 0;
  double loss = 0;
  for (size_t first = 0; first < samples.size(); first += chunk) {
    const auto some = samples.subspan(first, std::min(chunk, samples.size() - first));
    const size_t rows = some.size() * held.rowsPerSample();
    x.resize(some.size() * held.features());
    labels.resize(rows);
    gather(held, some, x, labels);
    const auto logits = model.forward(x, rows);
    dlogits.resize(logits.size());
    loss += crossEntropy(logits, labels, rows, held.classes(), dlogits) * static_cast<double>(rows);
    hits += correct(logits, labels, rows, held.classes());
  }
  const auto rows = static_cast<double>(samples.size() * held.rowsPerSample());
  return {static_cast<double>(hits) / rows, loss / rows};
}

// The held-out set: every sample of a test set, or for text the first
// `windows` windows that do not overlap (one every `stride` bytes), the
// same on every call.
std::vector<size_t> heldOutSamples(const Dataset& held, size_t windows, size_t stride) {
  const size_t count = windows == 0 ? held.size() : std::min(windows, (held.size() + stride - 1) / stride);
  std::vector<size_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = i * stride;
  return out;
}

std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// The run's configuration in this job: the mesh's axes from the mode and the
// rank count, and by default one micro-batch per rank (ddp, zero), per stage
// of each replica (pp, 3d), one for a tensor group.
TrainConfig configFor(const cli::Options& o, const loom::Comm* comm) {
  TrainConfig config = o.train;
  if (comm == nullptr) return config;
  const int n = comm->size();
  if (config.mode == Mode::Pp) config.dp = 1, config.pp = n, config.tp = 1;
  if (config.mode == Mode::Tp) config.dp = 1, config.pp = 1, config.tp = n;
  if (!o.microBatchesGiven) {
    config.microBatches = static_cast<size_t>(config.mode == Mode::Tp       ? 1
                                              : config.mode == Mode::ThreeD ? config.dp * config.pp
                                                                            : n);
  }
  return config;
}

// What a checkpoint must agree with to continue: the model, the data, the
// learning rate's schedule and the optimizer.
Settings requiredSettings(const cli::Options& o, const TrainConfig& config) {
  Settings required{{"--model", o.model},
                    {"--steps", std::to_string(config.steps)},
                    {"--batch", std::to_string(config.batch)},
                    {"--layers", std::to_string(o.layers)},
                    {"--dim", std::to_string(o.hidden)},
                    {"--heads", std::to_string(o.heads)},
                    {"--seq", std::to_string(o.context)},
                    {"--tie", o.tie ? "1" : "0"},
                    {"--data-limit", std::to_string(o.dataLimit)},
                    {"--seed", std::to_string(config.seed)},
                    {"--lr", number(static_cast<double>(config.lr))},
                    {"--min-lr", number(static_cast<double>(config.minLr))},
                    {"--warmup", std::to_string(config.warmup)},
                    {"--clip", number(config.clip)},
                    {"--optimizer", config.optimizer == OptimizerKind::AdamW ? "adamw" : "sgd"},
                    {"--weight-decay", number(static_cast<double>(config.adamw.weightDecay))}};
  // A token file's run names it (a run on The Devil's Dictionary names none, as before there were token files).
  if (!o.data.empty()) {
    required.insert({"--data", o.data});
    required.insert({"--data-val", o.dataVal});
    required.insert({"--vocab", std::to_string(o.vocab)});
  }
  return required;
}

// What a checkpoint records and a resume may change: how the state was laid
// out over the ranks (checkpoint.hpp keeps it in the dense model's order).
Settings recordedSettings(const cli::Options& o, const TrainConfig& config, int ranks, const std::string& layout) {
  return {{"--mode", modeName(config.mode)},
          {"--precision", precisionName(o.precision)},
          {"-N", std::to_string(ranks)},
          {"--micro-batches", std::to_string(config.microBatches)},
          {"--bucket-kb", std::to_string(config.bucketBytes >> 10)},
          {"--first-bucket-kb", std::to_string(config.firstBucketBytes >> 10)},
          {"--schedule", scheduleName(config.schedule)},
          {"--chunks", std::to_string(config.chunks)},
          {"--stages", config.stages},
          {"--balance", config.balanceByTime ? "time" : "params"},
          {"layout", layout},
          {"--dp", std::to_string(config.dp)},
          {"--pp", std::to_string(config.pp)},
          {"--tp", std::to_string(config.tp)},
          {"--sequence-parallel", config.sequenceParallel ? "1" : "0"},
          {"--recompute", o.recompute ? "1" : "0"},
          {"--data-parallel", modeName(config.dataParallel)}};
}

// A step's record. In the mesh modes every rank's idle share, bytes handed
// to Loom per axis and activation peak so far, gathered from every rank
// (collective).
// sampleFlops: the model's FLOPs a sample (flops.hpp); peak: the job's FLOP/s.
cli::StepRecord recordStep(uint64_t step, const StepReport& r, loom::Comm* meshComm, const MemoryAccount& account,
                           double sampleFlops, double peak) {
  const double flops = sampleFlops * static_cast<double>(r.samples) / r.seconds;
  cli::StepRecord record{.step = step + 1,
                         .loss = r.loss,
                         .gradNorm = r.gradNorm,
                         .seconds = r.seconds,
                         .commSeconds = r.commSeconds,
                         .exposedCommSeconds = r.exposedSeconds,
                         .samples = r.samples,
                         .flopsPerSecond = flops,
                         .mfu = peak > 0 ? flops / peak : 0.0};
  if (meshComm == nullptr) return record;
  constexpr size_t kPerRank = 5;
  const std::vector<double> mine{r.idleShare, static_cast<double>(r.bytes.dp), static_cast<double>(r.bytes.pp),
                                 static_cast<double>(r.bytes.tp),
                                 static_cast<double>(account.peak(Category::Activations))};
  std::vector<double> all(kPerRank * static_cast<size_t>(meshComm->size()));
  meshComm->allGather(std::span<const double>(mine), std::span(all));
  std::vector<double>* columns[kPerRank] = {&record.rankIdle, &record.rankSentDp, &record.rankSentPp,
                                            &record.rankSentTp, &record.rankActivationPeak};
  for (size_t at = 0; at < all.size(); ++at) columns[at % kPerRank]->push_back(all[at]);
  return record;
}

// The lead's line for a step.
void printStep(const cli::StepRecord& r, bool mesh) {
  std::printf("step %4llu  loss %.6f  norm %.4f  %8.0f samples/s  step %7.2f ms  mfu %4.1f%%",
              static_cast<unsigned long long>(r.step), r.loss, r.gradNorm,
              static_cast<double>(r.samples) / r.seconds, r.seconds * 1e3, r.mfu * 100);
  // Communication: from the first collective's launch to the last one's end,
  // and the share of it the rank did not wait for (the lead's figures).
  const double hidden = r.commSeconds > 0 ? 1.0 - r.exposedCommSeconds / r.commSeconds : 0.0;
  std::printf("  comm %6.2f ms (%3.0f%% hidden)", r.commSeconds * 1e3, hidden * 100);
  if (mesh) {
    const auto total = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
    const auto ranks = static_cast<double>(r.rankIdle.size());
    std::printf("  bubble %3.0f%%  sent dp %.2f pp %.2f tp %.2f MB  activations <= %.2f MB",
                total(r.rankIdle) / ranks * 100, total(r.rankSentDp) / 1e6, total(r.rankSentPp) / 1e6,
                total(r.rankSentTp) / 1e6,
                *std::max_element(r.rankActivationPeak.begin(), r.rankActivationPeak.end()) / 1e6);
  }
  std::printf("\n");
  std::fflush(stdout);  // progress, also through a pipe
}

// The median step after the first fifth (at most 5 steps), which warms
// caches and connections up.
double medianStepSeconds(const std::vector<cli::StepRecord>& records) {
  const size_t skip = std::min<size_t>(5, records.size() / 5);
  std::vector<double> kept;
  for (size_t i = skip; i < records.size(); ++i) kept.push_back(records[i].seconds);
  std::nth_element(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(kept.size() / 2), kept.end());
  return kept[kept.size() / 2];
}

// --timeline: every rank's events, gathered, written by the lead as a Chrome trace (collective).
void writeTimeline(loom::Comm& comm, const std::vector<TimelineEvent>& events, const std::string& path) {
  const int ranks = comm.size();
  const std::vector<double> count{static_cast<double>(events.size())};
  std::vector<double> counts(static_cast<size_t>(ranks));
  comm.allGather(std::span<const double>(count), std::span(counts));
  const auto most = static_cast<size_t>(*std::max_element(counts.begin(), counts.end()));
  std::vector<double> packed = packEvents(events);
  packed.resize(most * kPackedEventDoubles, -1.0);  // padding: kind -1
  std::vector<double> all(packed.size() * static_cast<size_t>(ranks));
  comm.allGather(std::span<const double>(packed), std::span(all));
  if (comm.rank() != 0) return;
  std::vector<std::vector<TimelineEvent>> tracks;
  for (int r = 0; r < ranks; ++r) {
    tracks.push_back(
        unpackEvents(std::span<const double>(all).subspan(static_cast<size_t>(r) * packed.size(), packed.size())));
  }
  writeChromeTrace(path, tracks);
  std::printf("timeline: %s\n", path.c_str());
}

// The parameters' SHA-256, once tied copies are found equal and every rank's
// digest equal to this one's (collective); else the error.
std::string paramsDigest(const Model& model, loom::Comm* comm, int rank, std::string& error) {
  const std::vector<float> params = model.paramsAsFloat();  // bf16: widened
  for (const Model::Tie& t : model.ties()) {
    if (!std::equal(params.begin() + static_cast<std::ptrdiff_t>(t.a),
                    params.begin() + static_cast<std::ptrdiff_t>(t.a + t.count),
                    params.begin() + static_cast<std::ptrdiff_t>(t.b))) {
      error = "rank " + std::to_string(rank) + ": the tied head and embedding drifted apart";
      return "";
    }
  }
  Sha256 sha;
  sha.update(std::as_bytes(std::span<const float>(params)));
  const std::string digest = sha.hex();
  if (comm == nullptr) return digest;
  const auto ranks = static_cast<size_t>(comm->size());
  std::vector<uint8_t> mine(digest.begin(), digest.end()), all(mine.size() * ranks);
  comm->allGather(std::span<const uint8_t>(mine), std::span(all));
  for (size_t r = 0; r < ranks; ++r) {
    if (!std::equal(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()))) {
      error = "rank " + std::to_string(r) + "'s parameters differ from rank " + std::to_string(rank) + "'s";
      return "";
    }
  }
  return digest;
}

// Printable text: bytes outside ASCII's printable range as \n or \xNN.
std::string escaped(const std::string& bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\\') {
      out += "\\\\";
    } else if (b < 0x20 || b >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

// --eval-every and --sample between steps: the lead keeps a dense fp32 copy
// of the model, with memory of its own (not training's account), filled
// from the trainer's dense parameters (collective), and measures the
// held-out loss or generates text on it.
class Probe {
 public:
  // held: the held-out set (with --eval-every or --sample); decode: a
  // token as a sample's text (--sample): a character, a token file's id, or
  // its bytes by --tokenizer; empty for the mlp.
  Probe(const cli::Options& o, const ModelRecipe& recipe, const Dataset* held,
        std::function<std::string(int32_t)> decode, bool lead)
      : o_(o), held_(held), decode_(std::move(decode)), lead_(lead), copy_(scratch_) {
    if (!lead || (o.evalEvery == 0 && o.sampleEvery == 0)) return;  // the copy is the lead's alone
    recipe(copy_, nullptr);
    copy_.allocate();
    samples_ = heldOutSamples(*held, decode_ ? 32 : 0, decode_ ? o.context : 1);
  }

  void after(uint64_t done, bool last, Trainer& trainer, cli::StepRecord& record) {
    const bool measure = o_.evalEvery != 0 && (done % o_.evalEvery == 0 || last);
    const bool write = o_.sampleEvery != 0 && (done % o_.sampleEvery == 0 || last);
    if (!measure && !write) return;
    const std::vector<float> dense = trainer.denseParams();
    if (!lead_) return;
    std::copy(dense.begin(), dense.end(), copy_.params().begin());
    if (measure) {
      record.heldOutLoss = evaluate(copy_, *held_, samples_).loss;
      std::printf("step %4llu  held-out loss %.6f\n", static_cast<unsigned long long>(done), record.heldOutLoss);
    }
    if (write) {
      // The prompt: the held-out text's first characters, up to half a window.
      std::vector<float> x(held_->features());
      std::vector<int32_t> labels(held_->rowsPerSample());
      held_->sample(0, x, labels);
      const std::vector<int32_t> prompt(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(std::max<size_t>(1, std::min<size_t>(16, o_.context / 2))));
      std::string text;
      for (int32_t id : prompt) text += decode_(id);
      text += " | ";
      for (int32_t id : generate(copy_, o_.context, prompt, 64, o_.sampleSeed == 0 ? 0 : o_.sampleSeed + done)) {
        text += decode_(id);
      }
      record.sample = escaped(text);
      std::printf("step %4llu  sample \"%s\"\n", static_cast<unsigned long long>(done), record.sample.c_str());
    }
    std::fflush(stdout);
  }

 private:
  const cli::Options& o_;
  const Dataset* held_;
  std::function<std::string(int32_t)> decode_;
  bool lead_;
  MemoryAccount scratch_;
  Model copy_;
  std::vector<size_t> samples_;
};

int run(const cli::Options& o) {
  setBlasThreads(o.blasThreads);
  std::optional<loom::Comm> comm;
  if (o.train.mode != Mode::Single) comm.emplace(loom::Comm::fromEnv());
  const TrainConfig config = configFor(o, comm ? &*comm : nullptr);
  const int rank = comm ? comm->rank() : 0;
  const int ranks = comm ? comm->size() : 1;
  const bool lead = rank == 0;

  // The data, the model and its trainer.
  const bool gpt = o.model == "gpt";
  const bool mesh = config.mode == Mode::Pp || config.mode == Mode::Tp || config.mode == Mode::ThreeD;
  std::unique_ptr<Dataset> train, held;
  MemoryAccount account;
  Model model(account, o.precision);
  std::function<std::string(int32_t)> decode;  // a sample's tokens as text
  if (gpt && !o.data.empty()) {
    if (o.dataVal.empty()) {
      train = std::make_unique<TokenFile>(o.data, TokenFile::Split::Train, o.context, o.vocab);
      held = std::make_unique<TokenFile>(o.data, TokenFile::Split::Validation, o.context, o.vocab);
    } else {
      train = std::make_unique<TokenFile>(o.data, TokenFile::Split::Whole, o.context, o.vocab);
      held = std::make_unique<TokenFile>(o.dataVal, TokenFile::Split::Whole, o.context, train->classes());
    }
    if (o.tokenizer.empty()) {
      decode = [](int32_t id) { return std::to_string(id) + " "; };  // no tokenizer: a sample is its ids
    } else {
      decode = [tokenizer = std::make_shared<const Tokenizer>(o.tokenizer)](int32_t id) { return tokenizer->decode(id); };
    }
  } else if (gpt) {
    auto text = std::make_unique<CharText>(kDevilsDictionary, CharText::Split::Train, o.context);
    held = std::make_unique<CharText>(kDevilsDictionary, CharText::Split::Validation, o.context);
    decode = [vocabulary = text->vocabulary()](int32_t id) {
      return std::string(1, static_cast<char>(vocabulary[static_cast<size_t>(id)]));
    };
    train = std::move(text);
  } else {
    train = std::make_unique<FashionMnist>(kFashionMnistDir, FashionMnist::Split::Train, o.dataLimit);
    if (o.evaluate || o.evalEvery != 0) held = std::make_unique<FashionMnist>(kFashionMnistDir, FashionMnist::Split::Test);
  }
  const GptShape shape{.vocab = train->classes(),
                       .context = o.context,
                       .dim = o.hidden == 0 ? 128 : o.hidden,
                       .heads = o.heads,
                       .layers = o.layers == 0 ? 4 : o.layers,
                       .tied = o.tie,
                       .recompute = o.recompute};
  const ModelRecipe recipe = [&](Model& m, const TensorGroup* tensor) {
    if (gpt) return buildGpt(m, shape, false, tensor);
    if (tensor != nullptr) throw std::invalid_argument("--model mlp: tensor parallelism is for the gpt model");
    buildMlp(m, train->features(), o.hidden == 0 ? 256 : o.hidden, o.layers == 0 ? 1 : o.layers, train->classes(),
             false);
  };
  recipe(model, nullptr);
  model.allocate();
  model.init(config.seed);
  const auto trainer = makeTrainer(model, *train, config, comm ? &*comm : nullptr, account, recipe);
  Probe probe(o, recipe, held.get(), decode, lead);

  // MFU's two sides: the model's FLOPs a sample, and the job's peak, every
  // rank's sgemm measured at once (sharing the cores as training does), summed.
  const double sampleFlops = flopsPerSample(model, gpt ? &shape : nullptr);
  if (comm) comm->barrier();
  std::vector<double> peak{measurePeakFlops()};
  if (comm) comm->allReduce(std::span(peak));

  // Checkpoints, in the dense model's order: written under any mode and
  // rank count, resumed under any other.
  const Settings required = requiredSettings(o, config);
  uint64_t first = 0;
  if (!o.resumeFrom.empty()) {
    const CheckpointReader reader(o.resumeFrom, required);
    if (reader.info().params != model.paramCount() ||
        reader.info().components != 1 + trainer->optimizer().components()) {
      throw std::invalid_argument("--resume: the checkpoint in " + o.resumeFrom + " holds " +
                                  std::to_string(reader.info().components) + " x " +
                                  std::to_string(reader.info().params) + " values, not this model's " +
                                  std::to_string(1 + trainer->optimizer().components()) + " x " +
                                  std::to_string(model.paramCount()));
    }
    first = reader.info().step;
    trainer->load(reader);
    if (lead) {
      const auto from = [&](const char* key) {
        const auto it = reader.settings().find(key);
        return it == reader.settings().end() ? std::string("?") : it->second;
      };
      std::printf("# resumed from %s after step %llu (written by --mode %s on %s rank%s)\n", o.resumeFrom.c_str(),
                  static_cast<unsigned long long>(first), from("--mode").c_str(), from("-N").c_str(),
                  from("-N") == "1" ? "" : "s");
    }
  }
  const auto checkpoint = [&](uint64_t done) {
    const CheckpointInfo info{.step = done,
                              .optimizerSteps = trainer->optimizer().steps(),
                              .params = model.paramCount(),
                              .components = 1 + trainer->optimizer().components()};
    const std::vector<StateRun> runs = trainer->save();
    writePart(o.checkpoint, info, rank, ranks, runs);
    if (comm) comm->barrier();  // every rank's part is whole before the manifest names the step
    if (lead) {
      Settings all = recordedSettings(o, config, ranks, trainer->layout());
      all.insert(required.begin(), required.end());
      publishCheckpoint(o.checkpoint, info, ranks, all);
    }
    if (comm) comm->barrier();
  };
  account.resetPeaks();  // report what training holds, not what setting it up took
  if (lead) {
    std::printf("# loom-train: %s, %s in %s on %d rank%s, batch %zu in %zu micro-batches, %llu steps\n# model: %s\n",
                o.model.c_str(), modeName(config.mode), precisionName(o.precision), ranks, ranks == 1 ? "" : "s",
                config.batch, config.microBatches, static_cast<unsigned long long>(config.steps),
                model.describe().c_str());
    if (!trainer->layout().empty()) std::printf("# layout: %s\n", trainer->layout().c_str());
    std::printf("# %.3g FLOPs a sample; peak %.1f GFLOP/s (sgemm on every rank at once)\n", sampleFlops, peak[0] / 1e9);
  }

  // Training.
  cli::RunRecord report{.model = o.model,
                        .mode = modeName(config.mode),
                        .precision = precisionName(o.precision),
                        .ranks = ranks,
                        .batch = config.batch,
                        .microBatches = config.microBatches,
                        .layers = o.layers,
                        .dim = o.hidden,
                        .steps = config.steps,
                        .seed = config.seed,
                        .lr = static_cast<double>(config.lr),
                        .peakFlops = peak[0],
                        .mesh = mesh,
                        .schedule = scheduleName(config.schedule),
                        .chunks = config.chunks,
                        .dp = config.dp,
                        .pp = config.pp,
                        .tp = config.tp};
  std::vector<TimelineEvent> events;  // --timeline: this rank's, every step
  const uint64_t last = o.stopAfter != 0 ? std::min(o.stopAfter, config.steps) : config.steps;
  for (uint64_t step = first; step < last; ++step) {
    const StepReport r = trainer->step(step);
    if (!o.timeline.empty()) events.insert(events.end(), r.events.begin(), r.events.end());
    report.records.push_back(recordStep(step, r, mesh ? &*comm : nullptr, account, sampleFlops, peak[0]));
    if (lead) printStep(report.records.back(), mesh);
    probe.after(step + 1, step + 1 == last, *trainer, report.records.back());
    const bool due = o.checkpointEvery != 0 && (step + 1) % o.checkpointEvery == 0;
    if (!o.checkpoint.empty() && (due || step + 1 == last)) checkpoint(step + 1);
  }
  // A resume with nothing left to run writes the checkpoint again, in this
  // run's layout, where it was asked to (resharding it for a later job).
  if (first == last && !o.checkpoint.empty() && o.checkpoint != o.resumeFrom) checkpoint(first);

  // What training held and did.
  if (!report.records.empty()) report.sample = report.records.back().sample;  // --sample: the last text
  if (lead && !report.records.empty()) {
    const double median = medianStepSeconds(report.records);
    const double perStep = static_cast<double>(config.batch * (gpt ? o.context : 1));
    const double mfu = sampleFlops * static_cast<double>(config.batch) / median / peak[0];
    std::printf("median step %.3f ms, %.0f %s/s, mfu %.1f%%\n", median * 1e3, perStep / median,
                gpt ? "tokens" : "samples", mfu * 100);
  }
  std::array<size_t, kCategories> peaks{};  // training's, before materialize() gathers everything
  for (size_t c = 0; c < kCategories; ++c) {
    peaks[c] = account.peak(static_cast<Category>(c));
    report.peakBytes.emplace_back(categoryName(static_cast<Category>(c)), peaks[c]);
  }
  if (mesh) {  // each rank's activation peak
    const std::vector<double> mine{static_cast<double>(peaks[static_cast<size_t>(Category::Activations)])};
    report.rankActivationPeak.resize(static_cast<size_t>(ranks));
    comm->allGather(std::span<const double>(mine), std::span(report.rankActivationPeak));
    if (lead) {
      std::printf("activation peak bytes per rank:");
      for (double b : report.rankActivationPeak) std::printf(" %.0f", b);
      std::printf("\n");
    }
  }
  if (!o.timeline.empty()) writeTimeline(*comm, events, o.timeline);

  // The parameters every rank ends with, and how good they are.
  trainer->materialize();  // ZeRO-3: every rank gathers every parameter
  std::string error;
  report.paramsSha256 = paramsDigest(model, comm ? &*comm : nullptr, rank, error);
  if (!error.empty()) {
    std::fprintf(stderr, "loom-train: %s\n", error.c_str());
    return 1;
  }
  report.psi = model.paramCount();
  std::printf("rank %d params_sha256 %s\n", rank, report.paramsSha256.c_str());
  if (o.evaluate && lead) {
    if (gpt) {
      const Evaluation e = evaluate(model, *held, heldOutSamples(*held, 32, o.context));
      report.heldOutLoss = e.loss;
      std::printf("held-out loss %.4f (32 windows of %zu tokens)\n", e.loss, o.context);
    } else {
      report.testAccuracy = evaluate(model, *held, heldOutSamples(*held, 0, 1)).accuracy;
      std::printf("test accuracy %.4f (%zu samples)\n", report.testAccuracy, held->size());
    }
  }
  if (lead) {
    std::printf("peak bytes per rank:");
    for (const auto& [category, bytes] : report.peakBytes) std::printf(" %s %zu", category.c_str(), bytes);
    std::printf("\n");
  }
  if (lead && !o.json.empty()) cli::writeJson(o.json, report);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Training frees and allocates large buffers again every step (recomputed
  // activations, ZeRO-3's gathered units): glibc would map and unmap each,
  // and fault in every page of it anew (--recompute ran 3.6x slower, not the
  // 1.35x its extra forward costs). Keep them in the heap, which keeps them
  // mapped; the memory account still counts them freed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  if (argc >= 2 && std::strcmp(argv[1], "--plot") == 0) {  // drawing, not training
    if (argc < 3) {
      std::fprintf(stderr, "loom-train: --plot: missing the PNG's name\n%s", cli::usage());
      return 2;
    }
    return cli::plotLoss(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  cli::Options options;
  try {
    options = cli::parseOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    if (std::strcmp(e.what(), "help") != 0) std::fprintf(stderr, "loom-train: %s\n", e.what());
    std::fprintf(stderr, "%s", cli::usage());
    return std::strcmp(e.what(), "help") == 0 ? 0 : 2;
  }
  if (options.train.mode != Mode::Single && !loom::launch::launchedAsRank()) {
    return loom::launch::relaunchAsLocalJob(options.ranks, argc, argv);
  }
  try {
    return run(options);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "loom-train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-train: %s\n", e.what());
    return 1;
  }
}
