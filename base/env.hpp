// The one table of LOOM_* environment variables. Every variable Loom reads is
// declared here with its default and a one-line doc; docs/configuration.md's
// configuration section is generated from this table (loom-info --env-markdown)
// and a test keeps the two equal. Reading a name that is not in the table is
// a programming error (loomInternalError), so nothing undocumented can creep in.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loom::env {

struct Variable {
  std::string_view name;
  std::string_view defaultValue;  // empty: unset by default
  std::string_view doc;
};

std::span<const Variable> table();

// The variable's value, or its default when unset or empty.
std::string get(std::string_view name);
// The value only when the user set it (non-empty).
std::optional<std::string> getIfSet(std::string_view name);
// Parsed as an integer in [min, max]; a bad value is loomInvalidArgument naming the variable.
long long getInt(std::string_view name, long long min, long long max);

// Markdown table of every variable, as docs/configuration.md carries it.
std::string markdownTable();

}  // namespace loom::env
