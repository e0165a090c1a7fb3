// loomGetCounter: every counter of base/counters.hpp's table is named in
// loom.h, read by its name and moves by what was added; a bad name or a NULL
// is refused by name. Which calls count what, the device tests check
// (device_stream_test, device_in_place_test, device_test).
#include <gtest/gtest.h>
#include <loom/loom.h>

#include <string>

#include "base/counters.hpp"
#include "tests/support/files.hpp"

namespace {

uint64_t read(std::string_view name) {
  uint64_t value = 0;
  EXPECT_EQ(loomGetCounter(std::string(name).c_str(), &value), loomSuccess) << loomGetLastError(nullptr);
  return value;
}

}  // namespace

TEST(Counters, EveryCounterIsDocumentedAndReadByItsName) {
  const std::string header = loom::test::readFile(LOOM_SOURCE_DIR "/include/loom/loom.h");
  ASSERT_FALSE(header.empty());
  for (size_t i = 0; i < loom::counters::kCounterCount; ++i) {
    const std::string_view name = loom::counters::kCounterNames[i];
    EXPECT_NE(header.find(" " + std::string(name) + " "), std::string::npos) << name << " is not in loom.h";
    const auto counter = static_cast<loom::counters::Counter>(i);
    ASSERT_EQ(loom::counters::named(name), counter) << name;
    const uint64_t before = read(name);
    loom::counters::add(counter, 3);
    EXPECT_EQ(read(name) - before, 3u) << name;
  }
}

TEST(Counters, AnUnknownNameOrANullIsRefusedByName) {
  uint64_t value = 7;
  EXPECT_EQ(loomGetCounter("resident_call", &value), loomInvalidArgument);
  const std::string message = loomGetLastError(nullptr);
  EXPECT_NE(message.find("name=\"resident_call\" is no counter"), std::string::npos) << message;
  for (const std::string_view name : loom::counters::kCounterNames)
    EXPECT_NE(message.find(std::string(name)), std::string::npos) << message << " does not list " << name;
  EXPECT_EQ(value, 7u);
  EXPECT_EQ(loomGetCounter(nullptr, &value), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("name is NULL"), std::string::npos);
  EXPECT_EQ(loomGetCounter("resident_calls", nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("value is NULL"), std::string::npos);
}
