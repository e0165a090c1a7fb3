#include "training/models/mlp.hpp"

#include "training/layers/gelu.hpp"
#include "training/layers/linear.hpp"

namespace loom::train {

void buildMlp(Model& model, size_t inputs, size_t hidden, size_t layers, size_t classes, bool allocate) {
  size_t width = inputs;
  for (size_t l = 0; l < layers; ++l) {
    model.add(std::make_unique<Linear>(width, hidden));
    model.add(std::make_unique<Gelu>(hidden, model.account()));
    width = hidden;
  }
  model.add(std::make_unique<Linear>(width, classes));
  model.build(allocate);
}

}  // namespace loom::train
