#include "collectives/call_name.hpp"

#include <charconv>
#include <iterator>

namespace loom::coll {
namespace {

// "#129" -> "#130" in place; false where every digit was a 9 (they are all
// 0 now, and one more is needed).
bool countUp(std::string& name, size_t firstDigit) {
  for (size_t i = name.size(); i-- > firstDigit;) {
    if (name[i] != '9') {
      ++name[i];
      return true;
    }
    name[i] = '0';
  }
  return false;
}

}  // namespace

const std::string& CallName::name(CollectiveKind kind, uint32_t number) {
  if (kind_ == kind) {
    if (number == number_) return name_;  // another piece of the same call
    // number - 1, not number_ + 1: a number that wrapped to 0 is written out.
    if (number != 0 && number - 1 == number_ && countUp(name_, firstDigit_)) {
      number_ = number;
      return name_;
    }
  } else {
    name_.assign(collectiveName(kind)).append(" #");
    firstDigit_ = name_.size();
    kind_ = kind;
  }
  char digits[10];  // 2^32 - 1 has ten
  const auto written = std::to_chars(std::begin(digits), std::end(digits), number);
  number_ = number;
  return name_.replace(firstDigit_, std::string::npos, digits, static_cast<size_t>(written.ptr - digits));
}

}  // namespace loom::coll
