/*
 * Loom's C++ interface: <loom/loom.h> with ownership in the types and spans
 * for buffers. Header-only, over the C API alone, so that code above Loom
 * (the training layer, bindings, tools) links it as any user would.
 *
 *   auto comm = loom::Comm::fromEnv();            // loomrun, torchrun, Slurm, mpirun
 *   loom::Stream stream;                          // a host stream: calls return at once
 *   comm.allReduce(std::span(grads), loomAvg, &stream);
 *   stream.synchronize();                         // throws loom::CallError on failure
 *   loom::Window window(comm, std::span(buffer));  // a symmetric window, deregistered with the object
 *
 * Every failed call throws loom::CallError with the result and the message
 * loomGetLastError gives; a span of the wrong size throws std::invalid_argument
 * naming it. Destructors never throw.
 */
#ifndef LOOM_LOOM_HPP
#define LOOM_LOOM_HPP

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace loom {

// A failed call: what it returned and why.
class CallError : public std::runtime_error {
 public:
  CallError(loomResult_t result, const std::string& message) : std::runtime_error(message), result_(result) {}
  loomResult_t result() const noexcept { return result_; }

 private:
  loomResult_t result_;
};

// Throws CallError unless `result` is loomSuccess; the message is comm's last
// error (this thread's when comm is NULL).
inline void check(loomResult_t result, loomComm_t comm = nullptr) {
  if (result != loomSuccess) throw CallError(result, loomGetLastError(comm));
}

// Storage types for the 16-bit floats (C++20 has none): the bits as Loom reads them.
struct bfloat16 {
  uint16_t bits;
};
struct float16 {
  uint16_t bits;
};

// The loomDataType_t of an element type.
template <class T>
constexpr loomDataType_t dataType() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, int8_t> || std::is_same_v<U, char>) return loomInt8;
  else if constexpr (std::is_same_v<U, uint8_t>) return loomUint8;
  else if constexpr (std::is_same_v<U, int32_t>) return loomInt32;
  else if constexpr (std::is_same_v<U, uint32_t>) return loomUint32;
  else if constexpr (std::is_same_v<U, int64_t>) return loomInt64;
  else if constexpr (std::is_same_v<U, uint64_t>) return loomUint64;
  else if constexpr (std::is_same_v<U, float16>) return loomFloat16;
  else if constexpr (std::is_same_v<U, bfloat16>) return loomBfloat16;
  else if constexpr (std::is_same_v<U, float>) return loomFloat32;
  else if constexpr (std::is_same_v<U, double>) return loomFloat64;
  else static_assert(sizeof(T) == 0, "not an element type Loom reduces");
}

// An input buffer of T: a span of T or of const T converts, T is taken from the output.
template <class T>
using In = std::type_identity_t<std::span<const T>>;

class Event;

// A host stream: calls enqueued on it run in order, asynchronously to the caller.
class Stream {
 public:
  Stream() { check(loomStreamCreate(&stream_)); }
  ~Stream() {
    if (stream_ != nullptr) loomStreamDestroy(stream_);
  }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      if (stream_ != nullptr) loomStreamDestroy(stream_);
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Waits for everything enqueued so far; throws the first failure since the last synchronize.
  void synchronize() { check(loomStreamSynchronize(stream_)); }
  // This stream's later work waits for the event's point (loomStreamWaitEvent).
  void wait(const Event& event);
  loomStream_t get() const noexcept { return stream_; }

 private:
  loomStream_t stream_ = nullptr;
};

// An event on host streams (loomEventCreate): record() marks the point a
// stream has reached, done() asks whether its work up to there has run,
// synchronize() waits for it, and Stream::wait makes another stream wait.
class Event {
 public:
  Event() { check(loomEventCreate(&event_)); }
  ~Event() {
    if (event_ != nullptr) loomEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      if (event_ != nullptr) loomEventDestroy(event_);
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream) { check(loomEventRecord(event_, stream.get())); }
  bool done() const {
    const loomResult_t result = loomEventQuery(event_);
    if (result == loomInProgress) return false;
    check(result);
    return true;
  }
  void synchronize() const { check(loomEventSynchronize(event_)); }
  loomEvent_t get() const noexcept { return event_; }

 private:
  loomEvent_t event_ = nullptr;
};

inline void Stream::wait(const Event& event) { check(loomStreamWaitEvent(stream_, event.get())); }

// Calls between its construction and end() (or its destruction) form one
// group (loomGroupStart/End). end() throws the group's failure; a group left
// by an exception ends in the destructor, its result dropped.
class Group {
 public:
  Group() { check(loomGroupStart()); }
  ~Group() {
    if (!ended_) loomGroupEnd();
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  void end() {
    ended_ = true;
    check(loomGroupEnd());
  }

 private:
  bool ended_ = false;
};

// A communicator, destroyed with the object (loomCommDestroy: it finishes
// outstanding work first).
class Comm {
 public:
  Comm() = default;
  explicit Comm(loomComm_t comm) noexcept : comm_(comm) {}
  ~Comm() {
    if (comm_ != nullptr) loomCommDestroy(comm_);
  }
  Comm(Comm&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      if (comm_ != nullptr) loomCommDestroy(comm_);
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Rank, size and rendezvous from the launcher (loomCommInitFromEnv).
  static Comm fromEnv() {
    loomComm_t comm = nullptr;
    check(loomCommInitFromEnv(&comm, nullptr));
    return Comm(comm);
  }
  // n ranks as threads of this process (loomCommInitAll).
  static std::vector<Comm> all(int n) {
    std::vector<loomComm_t> raw(static_cast<size_t>(n > 0 ? n : 0));
    check(loomCommInitAll(raw.data(), n, nullptr));
    std::vector<Comm> comms;
    for (loomComm_t c : raw) comms.emplace_back(c);
    return comms;
  }
  // The ranks of this communicator that pass the same color, ordered by key
  // (loomCommSplit); an empty Comm for LOOM_SPLIT_NOCOLOR.
  Comm split(int color, int key) const {
    loomComm_t out = nullptr;
    check(loomCommSplit(comm_, color, key, &out, nullptr), comm_);
    return Comm(out);
  }

  int rank() const { return query(loomCommUserRank); }
  int size() const { return query(loomCommCount); }
  int localRank() const { return query(loomCommLocalRank); }
  int localSize() const { return query(loomCommLocalCount); }
  // The CUDA device this rank was created on (loomCommCuDevice); throws
  // CallError (loomInvalidUsage) where no CUDA device was visible there.
  int cudaDevice() const { return query(loomCommCuDevice); }
  void barrier() const { check(loomCommBarrier(comm_), comm_); }
  // loomCommGetAsyncError's answer.
  loomResult_t asyncError() const {
    loomResult_t error = loomSuccess;
    check(loomCommGetAsyncError(comm_, &error), comm_);
    return error;
  }
  loomComm_t get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != nullptr; }

  // Collectives. `stream` null: the call returns when done.
  template <class T>
  void allReduce(In<T> send, std::span<T> recv, loomRedOp_t op = loomSum, Stream* stream = nullptr) const {
    same(recv.size(), send.size(), "allReduce: recv");
    check(loomAllReduce(send.data(), recv.data(), send.size(), dataType<T>(), op, comm_, raw(stream)), comm_);
  }
  template <class T>
  void allReduce(std::span<T> data, loomRedOp_t op = loomSum, Stream* stream = nullptr) const {
    check(loomAllReduce(data.data(), data.data(), data.size(), dataType<T>(), op, comm_, raw(stream)), comm_);
  }
  template <class T>
  void broadcast(std::span<T> data, int root, Stream* stream = nullptr) const {
    check(loomBroadcast(data.data(), data.data(), data.size(), dataType<T>(), root, comm_, raw(stream)), comm_);
  }
  template <class T>
  void reduce(In<T> send, std::span<T> recv, int root, loomRedOp_t op = loomSum,
              Stream* stream = nullptr) const {
    if (rank() == root) same(recv.size(), send.size(), "reduce: recv");
    check(loomReduce(send.data(), recv.data(), send.size(), dataType<T>(), op, root, comm_, raw(stream)), comm_);
  }
  // recv: this rank's block, send: every rank's, size() x recv.size() elements.
  template <class T>
  void reduceScatter(In<T> send, std::span<T> recv, loomRedOp_t op = loomSum,
                     Stream* stream = nullptr) const {
    same(send.size(), recv.size() * static_cast<size_t>(size()), "reduceScatter: send (size() x recv)");
    check(loomReduceScatter(send.data(), recv.data(), recv.size(), dataType<T>(), op, comm_, raw(stream)), comm_);
  }
  // send: this rank's block, recv: every rank's, size() x send.size() elements.
  template <class T>
  void allGather(In<T> send, std::span<T> recv, Stream* stream = nullptr) const {
    same(recv.size(), send.size() * static_cast<size_t>(size()), "allGather: recv (size() x send)");
    check(loomAllGather(send.data(), recv.data(), send.size(), dataType<T>(), comm_, raw(stream)), comm_);
  }
  // send and recv: size() blocks of equal size, block r to and from rank r.
  template <class T>
  void allToAll(In<T> send, std::span<T> recv, Stream* stream = nullptr) const {
    same(recv.size(), send.size(), "allToAll: recv");
    const size_t n = static_cast<size_t>(size());
    if (send.size() % n != 0) throw std::invalid_argument("allToAll: send is not size() equal blocks");
    check(loomAlltoAll(send.data(), recv.data(), send.size() / n, dataType<T>(), comm_, raw(stream)), comm_);
  }
  template <class T>
  void send(std::span<T> data, int peer, Stream* stream = nullptr) const {
    check(loomSend(data.data(), data.size(), dataType<T>(), peer, comm_, raw(stream)), comm_);
  }
  template <class T>
  void recv(std::span<T> data, int peer, Stream* stream = nullptr) const {
    check(loomRecv(data.data(), data.size(), dataType<T>(), peer, comm_, raw(stream)), comm_);
  }

 private:
  static loomStream_t raw(Stream* stream) noexcept { return stream != nullptr ? stream->get() : nullptr; }
  static void same(size_t got, size_t want, const char* what) {
    if (got != want) {
      throw std::invalid_argument(std::string(what) + " has " + std::to_string(got) + " elements where " +
                                  std::to_string(want) + " are needed");
    }
  }
  int query(loomResult_t (*ask)(const loomComm_t, int*)) const {
    int value = -1;
    check(ask(comm_, &value), comm_);
    return value;
  }

  loomComm_t comm_ = nullptr;
};

// A symmetric window (loomCommWindowRegister) over a buffer, deregistered
// with the object. Both are collective: every rank registers a buffer of the
// same size and lets its Window go at the same point, once no call on the
// window is still queued. It must not outlive its communicator; deregister()
// ends it early and throws a failure the destructor would drop.
class Window {
 public:
  Window() = default;
  template <class T>
  Window(const Comm& comm, std::span<T> buffer, int flags = LOOM_WIN_COLL_SYMMETRIC) : comm_(comm.get()) {
    check(loomCommWindowRegister(comm_, static_cast<void*>(buffer.data()), buffer.size_bytes(), &win_, flags), comm_);
  }
  ~Window() {
    if (win_ != nullptr) loomCommWindowDeregister(comm_, win_);
  }
  Window(Window&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)), win_(std::exchange(other.win_, nullptr)) {}
  Window& operator=(Window&& other) noexcept {
    if (this != &other) {
      if (win_ != nullptr) loomCommWindowDeregister(comm_, win_);
      comm_ = std::exchange(other.comm_, nullptr);
      win_ = std::exchange(other.win_, nullptr);
    }
    return *this;
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  void deregister() {
    if (win_ == nullptr) return;
    check(loomCommWindowDeregister(comm_, std::exchange(win_, nullptr)), comm_);
  }
  // The buffer it was registered with (loomWinGetUserPtr).
  void* data() const {
    void* p = nullptr;
    check(loomWinGetUserPtr(comm_, win_, &p), comm_);
    return p;
  }
  loomWindow_t get() const noexcept { return win_; }
  explicit operator bool() const noexcept { return win_ != nullptr; }

 private:
  loomComm_t comm_ = nullptr;
  loomWindow_t win_ = nullptr;
};

}  // namespace loom

#endif /* LOOM_LOOM_HPP */
