// Regular expressions over what the tests read back (output, JSON, logs):
// ECMAScript syntax, as std::regex. They are compiled here, in one file of
// the support library, because <regex> costs each test file that includes
// it seconds of build, three builds over.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace loom::test {

// One match: [0] is the whole of it, [i] the i-th group ("" where the group
// took no part; matched(i) tells the two apart).
struct Match {
  std::vector<std::string> groups;
  std::vector<bool> took_part;

  const std::string& operator[](std::size_t i) const { return groups.at(i); }
  bool matched(std::size_t i) const { return took_part.at(i); }
  const std::string& str() const { return groups.at(0); }
};

// Whether pattern matches somewhere in text.
bool contains(const std::string& text, const std::string& pattern);

// The first match in text, or nothing.
std::optional<Match> search(const std::string& text, const std::string& pattern);

// Every match in text, left to right, not overlapping.
std::vector<Match> searchAll(const std::string& text, const std::string& pattern);

}  // namespace loom::test
