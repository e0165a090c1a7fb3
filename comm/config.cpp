#include "comm/config.hpp"

#include <string>

#include "base/env.hpp"
#include "base/error.hpp"

namespace loom {

Config Config::resolve(const loomConfig_t* config) {
  Config c;
  c.timeout = std::chrono::milliseconds(env::getInt("LOOM_TIMEOUT_MS", 1, 24LL * 3600 * 1000));
  c.deterministic = env::getInt("LOOM_DETERMINISTIC", 0, 1) == 1;
  if (config == nullptr) return c;
  if (config->magic != LOOM_CONFIG_MAGIC || config->size < sizeof(loomConfig_t)) {
    throw Error(loomInvalidArgument, "config was not initialized with LOOM_CONFIG_INITIALIZER");
  }
  if (config->blocking != LOOM_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1) {
      throw Error(loomInvalidArgument, "config->blocking must be 0 or 1, not " + std::to_string(config->blocking));
    }
    c.blocking = config->blocking == 1;
  }
  if (config->timeoutMs != LOOM_CONFIG_UNDEF_INT) {
    if (config->timeoutMs < 1) {
      throw Error(loomInvalidArgument, "config->timeoutMs must be at least 1, not " + std::to_string(config->timeoutMs));
    }
    c.timeout = std::chrono::milliseconds(config->timeoutMs);
  }
  if (config->deterministic != LOOM_CONFIG_UNDEF_INT) {
    if (config->deterministic != 0 && config->deterministic != 1) {
      throw Error(loomInvalidArgument,
                  "config->deterministic must be 0 or 1, not " + std::to_string(config->deterministic));
    }
    c.deterministic = config->deterministic == 1;
    c.deterministicBy = "config.deterministic = 1";
  }
  return c;
}

}  // namespace loom
