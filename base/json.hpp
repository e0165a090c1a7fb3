// A small JSON writer for Loom's dumps and reports: objects and arrays
// nest, commas and indentation are placed for the caller, strings are
// escaped, doubles written as the shortest text that reads back as the
// same double. Arrays opened OneLine stay on one line (lists of numbers).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom {

class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  // An array's elements each on a line of their own, or all on one.
  enum class Layout { Indented, OneLine };
  JsonWriter& beginArray(Layout layout = Layout::Indented);
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(double number);
  JsonWriter& value(long long number);
  JsonWriter& value(int number) { return value(static_cast<long long>(number)); }
  JsonWriter& value(bool flag);
  JsonWriter& null();

  // key(name).value(v) in one call.
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }

  // The document so far, with a final newline once the outer value is closed.
  const std::string& str() const { return out_; }

 private:
  struct Level {
    bool empty = true;
    bool inlineArray = false;
  };
  void beforeValue();
  void open(char bracket, Layout layout);
  void close(char bracket);

  std::string out_;
  std::vector<Level> levels_;
  bool afterKey_ = false;
};

}  // namespace loom
