#include "tests/support/text_match.hpp"

#include <regex>

namespace loom::test {
namespace {

Match toMatch(const std::smatch& m) {
  Match out;
  for (const auto& group : m) {
    out.groups.push_back(group.str());
    out.took_part.push_back(group.matched);
  }
  return out;
}

}  // namespace

bool contains(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

std::optional<Match> search(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return std::nullopt;
  return toMatch(m);
}

std::vector<Match> searchAll(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<Match> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) out.push_back(toMatch(*it));
  return out;
}

}  // namespace loom::test
