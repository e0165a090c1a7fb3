#include "training/parallel/trainer.hpp"

#include <stdexcept>

namespace loom::train {

std::unique_ptr<Trainer> makeDataParallel(Model& model, const Dataset& data, const TrainConfig& config,
                                          const loom::Comm* comm, MemoryAccount& account);
std::unique_ptr<Trainer> makeZero(Model& model, const Dataset& data, const TrainConfig& config,
                                  const loom::Comm& comm, MemoryAccount& account, int stage);
std::unique_ptr<Trainer> makeMesh(Model& model, const Dataset& data, const TrainConfig& config,
                                      const loom::Comm& comm, MemoryAccount& account, const ModelRecipe& recipe);

namespace {

constexpr const char* kModes[] = {"single", "ddp", "zero1", "zero2", "zero3", "pp", "tp", "3d"};

}  // namespace

Mode parseMode(const std::string& name) {
  for (size_t i = 0; i < std::size(kModes); ++i) {
    if (name == kModes[i]) return static_cast<Mode>(i);
  }
  throw std::invalid_argument("--mode " + name + ": not a mode (single, ddp, zero1, zero2, zero3, pp, tp, 3d)");
}

const char* modeName(Mode mode) { return kModes[static_cast<size_t>(mode)]; }

std::unique_ptr<Trainer> makeTrainer(Model& model, const Dataset& data, const TrainConfig& config,
                                     const loom::Comm* comm, MemoryAccount& account, const ModelRecipe& recipe) {
  if (config.mode == Mode::Single) return makeDataParallel(model, data, config, nullptr, account);
  if (comm == nullptr) throw std::invalid_argument(std::string("--mode ") + modeName(config.mode) + " needs a communicator");
  if (config.mode == Mode::Ddp) return makeDataParallel(model, data, config, comm, account);
  if (!model.ties().empty() && config.mode >= Mode::Zero1 && config.mode <= Mode::Zero3) {
    throw std::invalid_argument(std::string("--tie 1: not with --mode ") + modeName(config.mode) + " yet");
  }
  if (config.mode == Mode::Pp || config.mode == Mode::Tp || config.mode == Mode::ThreeD) {
    if (!recipe) throw std::invalid_argument(std::string("--mode ") + modeName(config.mode) + " needs the model's recipe");
    return makeMesh(model, data, config, *comm, account, recipe);
  }
  return makeZero(model, data, config, *comm, account, static_cast<int>(config.mode) - static_cast<int>(Mode::Ddp));
}

}  // namespace loom::train
