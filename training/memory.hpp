// Every byte the trainer holds goes through one account, by category, so
// that loom-train can report each rank's peak per category and the tests
// can hold ZeRO's model-state formulas to the bytes really allocated.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace loom::train {

enum class Category { Parameters, Gradients, OptimizerState, Activations, Communication };
inline constexpr size_t kCategories = 5;
const char* categoryName(Category c);

class MemoryAccount {
 public:
  void allocated(Category c, size_t bytes);
  void freed(Category c, size_t bytes);
  size_t current(Category c) const { return current_[static_cast<size_t>(c)]; }
  size_t peak(Category c) const { return peak_[static_cast<size_t>(c)]; }
  // Parameters + gradients + optimizer state: ZeRO's "model states", now and at their peak.
  size_t modelStates() const;
  size_t peakModelStates() const { return peakModelStates_; }
  // Peaks from now on: what training holds, without what setting it up took.
  void resetPeaks();

 private:
  std::array<size_t, kCategories> current_{};
  std::array<size_t, kCategories> peak_{};
  size_t peakModelStates_ = 0;
};

// A buffer of T that the account sees: allocated, resized and freed through it.
template <class T>
class Tracked {
 public:
  Tracked(MemoryAccount& account, Category category, size_t count = 0) : account_(&account), category_(category) {
    resize(count);
  }
  ~Tracked() { release(); }
  Tracked(Tracked&& other) noexcept
      : account_(other.account_), category_(other.category_), data_(std::move(other.data_)) {
    other.data_.clear();
  }
  Tracked& operator=(Tracked&&) = delete;
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;

  // Zero-filled; the old contents are kept up to the new size.
  void resize(size_t count) {
    if (count == data_.size()) return;
    account_->freed(category_, data_.size() * sizeof(T));
    data_.resize(count);
    data_.shrink_to_fit();
    account_->allocated(category_, data_.size() * sizeof(T));
  }
  void release() { resize(0); }

  std::span<T> span() { return data_; }
  std::span<const T> span() const { return data_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  size_t size() const { return data_.size(); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  MemoryAccount* account_;
  Category category_;
  std::vector<T> data_;
};

}  // namespace loom::train
