// A running collective's name for errors and traces ("allreduce #12"),
// kept in one string that each call rewrites as little as it can: a small
// collective's own work is a few thousand instructions, and building the
// name anew was a tenth of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "collectives/collective.hpp"

namespace loom::coll {

class CallName {
 public:
  // "<collective> #<number>". The next number of the same collective counts
  // the digits up in place; the same number again changes nothing.
  const std::string& name(CollectiveKind kind, uint32_t number);
  // The last name given.
  const std::string& last() const { return name_; }

 private:
  std::string name_;
  std::optional<CollectiveKind> kind_;  // whose "<collective> #" name_ begins with
  size_t firstDigit_ = 0;
  uint32_t number_ = 0;
};

}  // namespace loom::coll
