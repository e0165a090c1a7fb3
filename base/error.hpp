// loom::Error: the one exception Loom's C++ core throws. It carries the
// loomResult_t that the C API returns and a message naming the culprit.
#pragma once

#include <loom/loom.h>

#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  Error(loomResult_t code, std::string message);
  loomResult_t code() const noexcept { return code_; }

 private:
  loomResult_t code_;
};

// Throws loomSystemError with strerror(errnum) appended to what.
[[noreturn]] void throwSystemError(const std::string& what, int errnum);

const char* resultName(loomResult_t result) noexcept;

}  // namespace loom
