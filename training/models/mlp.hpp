// The MLP classifier of the Fashion-MNIST sample: `layers` hidden layers of
// `hidden` GELU units, then `classes` logits.
#pragma once

#include "training/model.hpp"

namespace loom::train {

// allocate as buildGpt's.
void buildMlp(Model& model, size_t inputs, size_t hidden, size_t layers, size_t classes, bool allocate = true);

}  // namespace loom::train
