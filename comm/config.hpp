// A communicator's settings: the loomConfig_t fields the user set, else the
// environment, else the documented defaults (base/env.cpp).
#pragma once

#include <loom/loom.h>

#include <chrono>

namespace loom {

struct Config {
  std::chrono::milliseconds timeout{300000};
  bool blocking = true;
  bool deterministic = false;  // reductions fold in rank order (LOOM_DETERMINISTIC)
  // Who asked for determinism, for messages: "LOOM_DETERMINISTIC=1" or "config.deterministic = 1".
  const char* deterministicBy = "LOOM_DETERMINISTIC=1";

  // Validates `config` (NULL allowed); bad fields are loomInvalidArgument naming the field.
  static Config resolve(const loomConfig_t* config);
};

}  // namespace loom
