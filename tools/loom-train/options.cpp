#include "tools/loom-train/options.hpp"

#include <charconv>
#include <stdexcept>
#include <string_view>

namespace loom::train::cli {
namespace {

template <class T>
T number(std::string_view flag, std::string_view text, T min, T max) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    throw std::invalid_argument(std::string(flag) + " " + std::string(text) + ": expected a number from " +
                                std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

}  // namespace

const char* usage() {
  return "usage: loom-train --model mlp|gpt --mode single|ddp|zero1|zero2|zero3|pp|tp|3d [-N ranks] [--steps S]\n"
         "                  [--batch B]\n"
         "                  [--micro-batches M] [--layers L] [--dim D] [--heads H] [--seq T] [--lr X]\n"
         "                  [--min-lr X] [--warmup W]\n"
         "                  [--optimizer adamw|sgd] [--weight-decay X] [--clip X] [--seed S]\n"
         "                  [--data-limit K] [--data FILE [--data-val FILE] [--vocab V] [--tokenizer FILE]] [--eval 0|1] [--eval-every N]\n"
         "                  [--sample N [--sample-seed S]]\n"
         "                  [--blas-threads T] [--bucket-kb K]\n"
         "                  [--first-bucket-kb K] [--checkpoint DIR [--checkpoint-every K]] [--resume 1 | --resume-from DIR]\n"
         "                  [--stop-after K] [--precision fp32|bf16] [--json FILE]\n"
         "                  [--schedule gpipe|1f1b|interleaved|zb-h1] [--chunks V] [--stages L,L,... | --balance params|time]\n"
         "                  [--timeline FILE]\n"
         "                  [--dp D --pp P --tp T] [--data-parallel ddp|zero1] [--sequence-parallel 0|1]\n"
         "                  [--tie 0|1] [--recompute 0|1]\n"
         "       loom-train --plot FILE.png RUN.json [RUN.json ...]\n"
         "  --model     mlp: the Fashion-MNIST classifier (Debian's dataset-fashion-mnist);\n"
         "              gpt: a character-level tiny GPT on The Devil's Dictionary (Debian's dict-devil)\n"
         "  --data      gpt: train on an llm.c token file instead (GPT-2's uint16 or LLaMA 3's uint32 tokens,\n"
         "              e.g. tinyshakespeare_train.bin), held out: --data-val FILE, else its last tenth;\n"
         "              --vocab V: the vocabulary (default: the largest id + 1; llm.c pads GPT-2's to 50304);\n"
         "              --tokenizer FILE: llm.c's gpt2_tokenizer.bin, so that --sample writes text, not ids\n"
         "  --mode      single: one process, --micro-batches accumulated in order;\n"
         "              ddp: data parallel over the ranks, gradient buckets reduced during backward;\n"
         "              zero1, zero2, zero3: ZeRO's stages (optimizer state, + gradients, + parameters sharded);\n"
         "              pp: pipeline parallel, one stage per rank; tp: tensor parallel, every layer split over the\n"
         "              ranks (gpt); 3d: --dp D replicas of --pp P stages of --tp T tensor ranks\n"
         "  --schedule  pp: gpipe, 1f1b (default), interleaved (--chunks V model chunks per rank, V >= 2,\n"
         "              --micro-batches a multiple of the ranks) or zb-h1 (zero bubble: backward split into\n"
         "              dL/dx and the weights' gradients, which fill 1F1B's drain; 1F1B's peak memory)\n"
         "  --stages    pp: top-level layers per model chunk, in order (default: balanced, --balance params\n"
         "              by parameter count or time by each layer's measured forward and backward)\n"
         "  --data-parallel  3d: ddp (default; the replicas all-reduce their gradients) or zero1 (they\n"
         "              reduce-scatter them, each steps its part of the optimizer, and all-gather)\n"
         "  --sequence-parallel  tp, 3d: 1 splits the rows outside the tensor-parallel regions over the\n"
         "              tensor ranks (reduce-scatter and all-gather instead of all-reduce)\n"
         "  --timeline  pp, tp, 3d, zero1-3: a Chrome trace of every step, one track per rank (chrome://tracing,\n"
         "              Perfetto); ZeRO's shows when each unit's parameter gather was launched and waited for\n"
         "  -N          ranks to start on this machine when not under a launcher (default: 2 but for single)\n"
         "  --batch     samples per step across all ranks (default 64); --micro-batches splits it\n"
         "              (default: one per rank; pp and 3d: one per stage of each replica; tp: one)\n"
         "  --layers/--dim  mlp: hidden layers and their width (default 1 x 256);\n"
         "              gpt: blocks and channels (default 4 x 128), --heads (4), --seq context (64),\n"
         "              --tie 1: the head's weight is the token embedding (GPT-2's tying; not with zero1-3),\n"
         "              --recompute 1: each block's activations are recomputed in backward (less memory,\n"
         "              the same bits, about a third more compute)\n"
         "  --lr, --min-lr, --warmup  AdamW's (or SGD's) rate: warm-up, then cosine to --min-lr\n"
         "  --clip      global gradient norm (0: none)\n"
         "  --precision fp32 (default), or bf16: bf16 parameters and gradients (communicated in bf16),\n"
         "              fp32 master weights and moments in the optimizer (2 + 2 + 12 bytes a parameter)\n"
         "  --bucket-kb, --first-bucket-kb  ddp's buckets, zero1/zero2's units and the 3d replicas' buckets\n"
         "              (default 25600, 1024)\n"
         "  --data-limit  train on the first K samples only (0: all 60000)\n"
         "  --eval      1 (default): report the test set's accuracy (gpt: the held-out loss) at the end\n"
         "  --eval-every  the held-out loss every N steps (gpt: 32 windows that do not overlap; mlp: the\n"
         "              test set), printed and in --json\n"
         "  --sample    gpt: 64 characters (a token file's: ids) generated every N steps and at the end, greedily or, with\n"
         "              --sample-seed S, drawn from the softmax; printed and in --json\n"
         "  --checkpoint  the training state, in the dense model's order, into DIR every --checkpoint-every\n"
         "              steps and at the end (each rank writes its part; the newest two are kept)\n"
         "  --resume    1: continue from --checkpoint DIR's newest checkpoint, written under any mode and\n"
         "              rank count (bit for bit under the same); --resume-from DIR: from DIR's, and with\n"
         "              nothing left to run, write it again into --checkpoint in this run's layout\n"
         "  --stop-after  leave after step K (a preemptible job; --steps still sets the schedule)\n"
         "  --json      the configuration, one record per step and a final record (params_sha256,\n"
         "              peak bytes per category, parameter count, accuracy)\n"
         "  --plot      loss against step of one or more --json records, side by side (matplotlib)\n";
}

Options parseOptions(int argc, char** argv) {
  Options o;
  bool microGiven = false;
  bool resume = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") throw std::invalid_argument("help");
    if (i + 1 >= argc) throw std::invalid_argument(std::string(flag) + ": missing its value");
    const std::string_view value = argv[++i];
    if (flag == "--model") {
      if (value != "mlp" && value != "gpt") throw std::invalid_argument("--model " + std::string(value) + ": not a model (mlp, gpt)");
      o.model = value;
    } else if (flag == "--mode") {
      o.train.mode = parseMode(std::string(value));
    } else if (flag == "--precision") {
      o.precision = parsePrecision(std::string(value));
    } else if (flag == "-N") {
      o.ranks = number<int>(flag, value, 1, 1024);
    } else if (flag == "--steps") {
      o.train.steps = number<uint64_t>(flag, value, 1, 100'000'000);
    } else if (flag == "--batch") {
      o.train.batch = number<size_t>(flag, value, 1, 1 << 20);
    } else if (flag == "--micro-batches") {
      o.train.microBatches = number<size_t>(flag, value, 1, 1 << 20);
      microGiven = true;
    } else if (flag == "--layers") {
      o.layers = number<size_t>(flag, value, 1, 64);
    } else if (flag == "--dim") {
      o.hidden = number<size_t>(flag, value, 1, 1 << 16);
    } else if (flag == "--heads") {
      o.heads = number<size_t>(flag, value, 1, 1024);
    } else if (flag == "--tie") {
      o.tie = number<int>(flag, value, 0, 1) == 1;
    } else if (flag == "--recompute") {
      o.recompute = number<int>(flag, value, 0, 1) == 1;
    } else if (flag == "--seq") {
      o.context = number<size_t>(flag, value, 1, 1 << 16);
    } else if (flag == "--lr") {
      o.train.lr = number<float>(flag, value, 0.0f, 10.0f);
    } else if (flag == "--min-lr") {
      o.train.minLr = number<float>(flag, value, 0.0f, 10.0f);
    } else if (flag == "--warmup") {
      o.train.warmup = number<uint64_t>(flag, value, 0, 100'000'000);
    } else if (flag == "--optimizer") {
      if (value != "adamw" && value != "sgd") {
        throw std::invalid_argument("--optimizer " + std::string(value) + ": not an optimizer (adamw, sgd)");
      }
      o.train.optimizer = value == "adamw" ? OptimizerKind::AdamW : OptimizerKind::Sgd;
    } else if (flag == "--weight-decay") {
      o.train.adamw.weightDecay = o.train.sgd.weightDecay = number<float>(flag, value, 0.0f, 1.0f);
    } else if (flag == "--clip") {
      o.train.clip = number<double>(flag, value, 0.0, 1e9);
    } else if (flag == "--seed") {
      o.train.seed = number<uint64_t>(flag, value, 0, UINT64_MAX);
    } else if (flag == "--data") {
      if (value.empty()) throw std::invalid_argument("--data: an empty file name");
      o.data = value;
    } else if (flag == "--data-val") {
      if (value.empty()) throw std::invalid_argument("--data-val: an empty file name");
      o.dataVal = value;
    } else if (flag == "--tokenizer") {
      if (value.empty()) throw std::invalid_argument("--tokenizer: an empty file name");
      o.tokenizer = value;
    } else if (flag == "--vocab") {
      o.vocab = number<size_t>(flag, value, 1, 1 << 24);
    } else if (flag == "--data-limit") {
      o.dataLimit = number<size_t>(flag, value, 0, 60000);
    } else if (flag == "--eval") {
      o.evaluate = number<int>(flag, value, 0, 1) == 1;
    } else if (flag == "--eval-every") {
      o.evalEvery = number<uint64_t>(flag, value, 0, 100'000'000);
    } else if (flag == "--sample") {
      o.sampleEvery = number<uint64_t>(flag, value, 0, 100'000'000);
    } else if (flag == "--sample-seed") {
      o.sampleSeed = number<uint64_t>(flag, value, 0, UINT64_MAX);
    } else if (flag == "--blas-threads") {
      o.blasThreads = number<int>(flag, value, 1, 256);
    } else if (flag == "--bucket-kb") {
      o.train.bucketBytes = number<size_t>(flag, value, 1, 1 << 22) << 10;
    } else if (flag == "--first-bucket-kb") {
      o.train.firstBucketBytes = number<size_t>(flag, value, 1, 1 << 22) << 10;
    } else if (flag == "--checkpoint") {
      o.checkpoint = value;
    } else if (flag == "--checkpoint-every") {
      o.checkpointEvery = number<uint64_t>(flag, value, 0, 100'000'000);
    } else if (flag == "--resume") {
      resume = number<int>(flag, value, 0, 1) == 1;
    } else if (flag == "--resume-from") {
      if (value.empty()) throw std::invalid_argument("--resume-from: an empty directory name");
      o.resumeFrom = value;
    } else if (flag == "--stop-after") {
      o.stopAfter = number<uint64_t>(flag, value, 1, 100'000'000);
    } else if (flag == "--schedule") {
      o.train.schedule = parseSchedule(std::string(value));
    } else if (flag == "--chunks") {
      o.train.chunks = number<int>(flag, value, 1, 64);
    } else if (flag == "--balance") {
      if (value != "params" && value != "time") throw std::invalid_argument("--balance " + std::string(value) + ": params or time");
      o.train.balanceByTime = value == "time";
    } else if (flag == "--stages") {
      o.train.stages = value;
    } else if (flag == "--dp") {
      o.train.dp = number<int>(flag, value, 1, 1024);
    } else if (flag == "--pp") {
      o.train.pp = number<int>(flag, value, 1, 1024);
    } else if (flag == "--tp") {
      o.train.tp = number<int>(flag, value, 1, 1024);
    } else if (flag == "--data-parallel") {
      o.train.dataParallel = parseMode(std::string(value));
    } else if (flag == "--sequence-parallel") {
      o.train.sequenceParallel = number<int>(flag, value, 0, 1) == 1;
    } else if (flag == "--timeline") {
      o.timeline = value;
    } else if (flag == "--json") {
      o.json = value;
    } else {
      throw std::invalid_argument(std::string(flag) + ": unknown flag");
    }
  }
  const Mode mode = o.train.mode;
  const bool mesh = mode == Mode::Pp || mode == Mode::Tp || mode == Mode::ThreeD;
  if (mode == Mode::ThreeD) {
    if (o.train.dp == 0 || o.train.pp == 0 || o.train.tp == 0) {
      throw std::invalid_argument("--mode 3d: give the mesh as --dp D --pp P --tp T");
    }
    const int product = o.train.dp * o.train.pp * o.train.tp;
    if (o.ranks != 0 && o.ranks != product) {
      throw std::invalid_argument("-N " + std::to_string(o.ranks) + ": --dp x --pp x --tp is " + std::to_string(product));
    }
    o.ranks = product;
  } else if (o.train.dp != 0 || o.train.pp != 0 || o.train.tp != 0) {
    throw std::invalid_argument(std::string(o.train.dp != 0 ? "--dp" : o.train.pp != 0 ? "--pp" : "--tp") +
                                ": only with --mode 3d");
  }
  if (o.ranks == 0) o.ranks = mode == Mode::Single ? 1 : 2;
  if (o.train.mode == Mode::Single && o.ranks != 1) {
    throw std::invalid_argument("-N " + std::to_string(o.ranks) + ": --mode single runs one rank");
  }
  if (o.train.dataParallel != Mode::Ddp && mode != Mode::ThreeD) {
    throw std::invalid_argument(std::string("--data-parallel ") + modeName(o.train.dataParallel) + ": only with --mode 3d");
  }
  if (o.train.sequenceParallel && mode != Mode::Tp && mode != Mode::ThreeD) {
    throw std::invalid_argument("--sequence-parallel 1: only with --mode tp or 3d");
  }
  const bool zero = mode == Mode::Zero1 || mode == Mode::Zero2 || mode == Mode::Zero3;
  if (!mesh && !zero && !o.timeline.empty()) throw std::invalid_argument("--timeline: only with --mode pp, tp, 3d or zero1-3");
  if (!mesh && (o.train.chunks != 1 || !o.train.stages.empty())) {
    throw std::invalid_argument(std::string(o.train.chunks != 1 ? "--chunks" : "--stages") +
                                ": only with --mode pp, tp or 3d");
  }
  if (o.tie && o.model != "gpt") throw std::invalid_argument("--tie 1: only the gpt model has an embedding to tie");
  if (o.recompute && o.model != "gpt") throw std::invalid_argument("--recompute 1: only the gpt model has blocks to recompute");
  if (o.sampleEvery != 0 && o.model != "gpt") throw std::invalid_argument("--sample: only the gpt model writes text");
  if (!o.data.empty() && o.model != "gpt") throw std::invalid_argument("--data: token files are for the gpt model");
  if (!o.dataVal.empty() && o.data.empty()) throw std::invalid_argument("--data-val: the held-out tokens of which --data?");
  if (o.vocab != 0 && o.data.empty()) throw std::invalid_argument("--vocab: only with --data (a character model's vocabulary is its text's)");
  if (!o.tokenizer.empty() && o.data.empty()) throw std::invalid_argument("--tokenizer: only with --data (a character model writes its characters)");
  if (resume && o.checkpoint.empty()) throw std::invalid_argument("--resume 1: which checkpoint? (--checkpoint DIR)");
  if (resume && !o.resumeFrom.empty()) {
    throw std::invalid_argument("--resume 1 and --resume-from " + o.resumeFrom + ": give one of them");
  }
  if (resume) o.resumeFrom = o.checkpoint;
  o.microBatchesGiven = microGiven;
  if (!microGiven) o.train.microBatches = static_cast<size_t>(o.ranks);  // single: as ddp on that many
  return o;
}

}  // namespace loom::train::cli
