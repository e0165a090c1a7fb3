#include "base/device/fake_device.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/backoff.hpp"
#include "base/device/cuda.hpp"
#include "base/error.hpp"

namespace loom::cuda {
namespace {

std::atomic<bool> fakeOn{false};
std::atomic<int> fakeGpus{1};
std::atomic<bool> fakePeers{true};
std::atomic<bool> refuseIpc{false};
std::atomic<bool> pooled{false};
std::atomic<size_t> streamMemoryBytes{0};  // fakeStreamMemoryBytes: 0, no limit
std::atomic<StreamHandle> captured{nullptr};
std::atomic<uint64_t> staged{0};
std::atomic<uint64_t> copied{0};
std::atomic<uint64_t> streamAllocations{0};
std::atomic<uint64_t> memopBatches{0};
thread_local int fakeCurrent = 0;

// The fake device's allocations, by start: each a memfd mapped shared, so
// that peer processes can map it as CUDA IPC would let them.
struct Block {
  size_t bytes;
  int fd;
  uint64_t serial;
  int gpu;
  bool pool;  // from allocOnStream, as cudaMallocAsync's memory comes from a pool
};

class Allocations {
 public:
  void* allocate(size_t bytes, int gpu, bool pool) {
    const size_t size = bytes == 0 ? 1 : bytes;
    const int fd = ::memfd_create("loom-fake-device", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    void* p = ::ftruncate(fd, static_cast<off_t>(size)) == 0
                  ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      ::close(fd);
      return nullptr;
    }
    std::lock_guard lock(mutex_);
    blocks_[static_cast<const std::byte*>(p)] = {size, fd, ++serials_, gpu, pool};
    return p;
  }
  void free(void* p) {
    if (p == nullptr) return;
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(static_cast<const std::byte*>(p));
    if (it == blocks_.end()) return;
    ::munmap(p, it->second.bytes);
    ::close(it->second.fd);
    blocks_.erase(it);
  }
  // The block holding p, and p's offset into it.
  std::optional<std::pair<Block, size_t>> find(const void* p) {
    const auto* b = static_cast<const std::byte*>(p);
    std::lock_guard lock(mutex_);
    auto it = blocks_.upper_bound(b);
    if (it == blocks_.begin()) return std::nullopt;
    --it;
    if (b >= it->first + it->second.bytes) return std::nullopt;
    return std::pair{it->second, static_cast<size_t>(b - it->first)};
  }

 private:
  std::mutex mutex_;
  uint64_t serials_ = 0;
  std::map<const std::byte*, Block> blocks_;
};

// A stream's queue, run in order by its worker thread. Shared with the
// events recorded on it, which may outlive the stream.
struct Queue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> work;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  bool closing = false;
  std::string error;  // the first failure, sticky as a CUDA stream's
  int device = 0;

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return !work.empty() || closing; });
      if (work.empty()) return;  // closing, and every queued piece done
      std::function<void()> next = std::move(work.front());
      work.pop_front();
      lock.unlock();
      std::string failure;
      try {
        next();
      } catch (const std::exception& e) {
        failure = e.what();
      }
      lock.lock();
      if (!failure.empty() && error.empty()) error = failure;
      ++completed;
      changed.notify_all();
    }
  }
  void throwIfFailed() {
    if (!error.empty()) throw Error(loomUnhandledCudaError, "the fake device's stream failed: " + error);
  }
};

// A stream: a queue and the thread that runs it. Destroying it waits for
// what was queued (a CUDA stream's work also finishes after its destroy).
class Stream {
 public:
  explicit Stream(int device) : queue_(std::make_shared<Queue>()) {
    queue_->device = device;
    worker_ = std::thread([q = queue_] { q->run(); });
  }
  ~Stream() {
    {
      std::lock_guard lock(queue_->mutex);
      queue_->closing = true;
    }
    queue_->changed.notify_all();
    worker_.join();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void submit(std::function<void()> piece) {
    {
      std::lock_guard lock(queue_->mutex);
      queue_->throwIfFailed();
      queue_->work.push_back(std::move(piece));
      ++queue_->submitted;
    }
    queue_->changed.notify_all();
  }
  const std::shared_ptr<Queue>& queue() const { return queue_; }

 private:
  std::shared_ptr<Queue> queue_;
  std::thread worker_;
};

struct Event {
  std::shared_ptr<Queue> queue;
  uint64_t target = 0;  // reached once the queue has completed this many
};

// Polls `word` until it holds at least `value`, as a stream memory wait does.
void waitForWord(const uint64_t* word, uint64_t value) {
  pollUntil([=] { return __atomic_load_n(word, __ATOMIC_ACQUIRE) >= value; });
}

// An export: the allocation's memfd in its owner, which a peer opens through /proc.
struct FakeIpc {
  char magic[8] = {'l', 'o', 'o', 'm', 'f', 'a', 'k', 'e'};
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t serial = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(FakeIpc) <= kIpcHandleBytes);

class FakeRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "fake"; }

  int deviceCount() override { return fakeGpuCount(); }
  int currentDevice() override { return fakeCurrent; }
  void setCurrentDevice(int device) override {
    if (device >= 0 && device < fakeGpuCount()) fakeCurrent = device;
  }
  std::string busId(int) override { return ""; }
  // Odd, as no real GPU's is, and 1 for GPU 0.
  uint64_t deviceId(int device) override { return 1 + 4 * static_cast<uint64_t>(device); }
  PointerKind pointerKind(const void* p) override {
    return allocations_.find(p) ? PointerKind::Device : PointerKind::Host;
  }
  bool hostReadsDeviceMemory() const override { return true; }
  int deviceOf(const void* p) override {
    const auto found = allocations_.find(p);
    return found ? found->first.gpu : -1;
  }
  bool fromMemoryPool(const void* p) override {
    const auto found = allocations_.find(p);
    return found && (found->first.pool || pooled.load(std::memory_order_acquire));
  }
  bool enablePeerAccess(int from, int to) override { return from == to || fakePeers.load(); }

  void* allocDevice(size_t bytes) override {
    void* p = allocations_.allocate(bytes, fakeCurrent, false);
    if (p == nullptr) throw Error(loomSystemError, "out of memory for a fake device buffer");
    return p;
  }
  bool hasMemoryPools(int) override { return true; }
  void* allocOnStream(size_t bytes, StreamHandle handle) override {
    if (const size_t most = streamMemoryBytes.load(std::memory_order_acquire); most != 0 && bytes > most) {
      throw Error(loomUnhandledCudaError, "cudaMallocAsync of " + std::to_string(bytes) + " bytes: out of memory (fake)");
    }
    void* p = allocations_.allocate(bytes, stream(handle).queue()->device, true);
    if (p == nullptr) throw Error(loomSystemError, "out of memory for a fake device buffer");
    streamAllocations.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  void freeOnStream(void* p, StreamHandle handle) noexcept override {
    if (p == nullptr) return;
    try {
      stream(handle).submit([this, p] { allocations_.free(p); });
    } catch (...) {
      // A failed stream takes no more work: the block stays mapped to the
      // process's end, as a peer's stream may still be reading it.
    }
  }
  void freeDevice(void* p) noexcept override {
    if (p == nullptr) return;
    synchronizeDevice("cudaFree");
    allocations_.free(p);
  }
  void* allocPinned(size_t bytes) override {
    void* p = ::operator new(bytes == 0 ? 1 : bytes);
    std::lock_guard lock(mutex_);
    pinned_[static_cast<const std::byte*>(p)] = bytes == 0 ? 1 : bytes;
    return p;
  }
  void freePinned(void* p) noexcept override {
    if (p == nullptr) return;
    synchronizeDevice("cudaFreeHost");
    {
      std::lock_guard lock(mutex_);
      pinned_.erase(static_cast<const std::byte*>(p));
    }
    ::operator delete(p);
  }

  StreamHandle createStream() override {
    auto stream = std::make_unique<Stream>(fakeCurrent);
    std::lock_guard lock(mutex_);
    Stream* handle = stream.get();
    streams_.emplace(handle, std::move(stream));
    return handle;
  }
  void destroyStream(StreamHandle handle) noexcept override {
    std::unique_ptr<Stream> gone;
    {
      std::lock_guard lock(mutex_);
      auto it = streams_.find(static_cast<Stream*>(handle));
      if (it == streams_.end()) return;
      gone = std::move(it->second);
      streams_.erase(it);
    }
  }
  void checkStream(StreamHandle handle) override { (void)stream(handle); }
  int streamDevice(StreamHandle handle) override { return stream(handle).queue()->device; }
  bool capturing(StreamHandle handle) override {
    (void)stream(handle);
    return handle != nullptr && handle == captured.load(std::memory_order_acquire);
  }

  void copy(void* dst, const void* src, size_t bytes, StreamHandle handle) override {
    if (bytes == 0 || dst == src) return;
    std::atomic<uint64_t>& counter = isPinned(dst) || isPinned(src) ? staged : copied;
    stream(handle).submit([=, &counter] {
      std::memcpy(dst, src, bytes);
      counter.fetch_add(bytes, std::memory_order_relaxed);
    });
  }
  void copyFromPlace(void* dst, PlaceView place, uint64_t sequence, bool result, size_t block, size_t at, size_t bytes,
                     StreamHandle handle) override {
    if (bytes == 0) return;
    stream(handle).submit([=] {
      const std::byte* src = placeOnHost(place, sequence, result, block, at);
      if (src != nullptr && src != dst) std::memcpy(dst, src, bytes);
    });
  }
  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes, size_t rows,
                StreamHandle handle) override {
    for (size_t i = 0; i < rows; ++i) {
      copy(static_cast<std::byte*>(dst) + i * dstPitch, static_cast<const std::byte*>(src) + i * srcPitch,
           rowBytes, handle);
    }
  }
  void copyNow(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  bool idle(StreamHandle handle) override {
    const auto& q = stream(handle).queue();
    std::lock_guard lock(q->mutex);
    q->throwIfFailed();
    return q->completed == q->submitted;
  }
  void hostFunction(StreamHandle handle, std::function<void()> fn) override { stream(handle).submit(std::move(fn)); }

  EventHandle record(StreamHandle handle) override {
    const auto& q = stream(handle).queue();
    std::lock_guard lock(q->mutex);
    return new Event{q, q->submitted};
  }
  bool reached(EventHandle handle) override {
    auto* event = static_cast<Event*>(handle);
    std::lock_guard lock(event->queue->mutex);
    event->queue->throwIfFailed();
    return event->queue->completed >= event->target;
  }
  void destroyEvent(EventHandle handle) noexcept override { delete static_cast<Event*>(handle); }
  void waitEvent(StreamHandle handle, EventHandle eventHandle) override {
    const auto* event = static_cast<const Event*>(eventHandle);
    stream(handle).submit([queue = event->queue, target = event->target] {
      std::unique_lock lock(queue->mutex);
      queue->changed.wait(lock, [&] { return queue->completed >= target; });
    });
  }

  bool hasMemops(int) override { return true; }
  void waitValue(StreamHandle handle, const uint64_t* word, uint64_t value) override {
    stream(handle).submit([=] { waitForWord(word, value); });
  }
  void writeValue(StreamHandle handle, uint64_t* word, uint64_t value) override {
    stream(handle).submit([=] { __atomic_store_n(word, value, __ATOMIC_RELEASE); });
  }
  void memops(StreamHandle handle, std::span<const MemOp> ops) override {
    if (ops.empty()) return;
    stream(handle).submit([all = std::vector<MemOp>(ops.begin(), ops.end())] {
      for (const MemOp& op : all) {
        if (op.write) {
          __atomic_store_n(op.word, op.value, __ATOMIC_RELEASE);
        } else {
          waitForWord(op.word, op.value);
        }
      }
    });
    memopBatches.fetch_add(1, std::memory_order_relaxed);
  }
  void storeValue(uint64_t* word, uint64_t value) override { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
  uint64_t loadValue(const uint64_t* word) override { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
  void holdKernel(StreamHandle handle, const uint64_t* word, uint64_t value) override {
    waitValue(handle, word, value);
  }
  void loadKernels() override {}

  std::optional<IpcExport> exportIpc(const void* p) override {
    const auto found = allocations_.find(p);
    if (!found) return std::nullopt;
    const FakeIpc ipc{.pid = static_cast<int32_t>(::getpid()),
                      .fd = found->first.fd,
                      .serial = found->first.serial,
                      .bytes = found->first.bytes};
    IpcExport out;
    std::memcpy(out.handle.data(), &ipc, sizeof ipc);
    out.offset = found->second;
    return out;
  }

  void* openIpc(const IpcHandle& handle) override {
    FakeIpc ipc;
    std::memcpy(&ipc, handle.data(), sizeof ipc);
    if (refuseIpc.load()) {
      throw Error(loomUnhandledCudaError, "the fake device refuses to map the buffer of pid " +
                                              std::to_string(ipc.pid) + ", as CUDA IPC may");
    }
    {
      // CUDA maps an allocation once per process: a second open of it fails
      // (cudaErrorAlreadyMapped) until the first is closed.
      std::lock_guard lock(mutex_);
      for (const auto& [base, open] : opened_) {
        if (open.pid == ipc.pid && open.serial == ipc.serial) {
          throw Error(loomUnhandledCudaError, "the fake device buffer of pid " + std::to_string(ipc.pid) +
                                                  " is open in this process already: resource already mapped, as CUDA says");
        }
      }
    }
    // The owner holds the fd open for as long as the allocation lives.
    const std::string path = "/proc/" + std::to_string(ipc.pid) + "/fd/" + std::to_string(ipc.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      throw Error(loomUnhandledCudaError, "cannot open the fake device buffer of pid " + std::to_string(ipc.pid) +
                                              " (" + path + "): " + std::strerror(errno));
    }
    void* p = ::mmap(nullptr, ipc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      throw Error(loomUnhandledCudaError, "mmap of the fake device buffer of pid " + std::to_string(ipc.pid) +
                                              ": " + std::strerror(e));
    }
    std::lock_guard lock(mutex_);
    opened_[p] = {.pid = ipc.pid, .serial = ipc.serial, .bytes = ipc.bytes};
    return p;
  }
  void closeIpc(void* base) noexcept override {
    synchronizeDevice("cudaIpcCloseMemHandle");
    std::lock_guard lock(mutex_);
    auto it = opened_.find(base);
    if (it == opened_.end()) return;
    ::munmap(base, it->second.bytes);
    opened_.erase(it);
  }

  Allocations& allocations() { return allocations_; }

  // Every stream of the current GPU (and the legacy stream, GPU 0's) done
  // within `limit`.
  bool synchronizeGpu(std::chrono::milliseconds limit) {
    std::vector<std::shared_ptr<Queue>> queues;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [handle, stream] : streams_) {
        if (stream->queue()->device == fakeCurrent) queues.push_back(stream->queue());
      }
      if (legacy_ && fakeCurrent == 0) queues.push_back(legacy_->queue());
    }
    // What was queued before the call, as CUDA's waits for.
    std::vector<uint64_t> targets;
    for (const auto& q : queues) {
      std::lock_guard lock(q->mutex);
      targets.push_back(q->submitted);
    }
    const auto end = std::chrono::steady_clock::now() + limit;
    for (size_t i = 0; i < queues.size(); ++i) {
      Queue& q = *queues[i];
      std::unique_lock lock(q.mutex);
      if (!q.changed.wait_until(lock, end, [&] { return q.completed >= targets[i]; })) return false;
    }
    return true;
  }

 private:
  // What CUDA does in the calls that synchronize the device implicitly
  // (cudaFree, cudaFreeHost, cudaIpcCloseMemHandle): wait for every stream
  // to finish what it has queued. A stream that a gate holds until this very
  // thread's task ends never does, on a GPU as here; the fake names the call
  // and ends the process rather than hang with it.
  void synchronizeDevice(const char* call) noexcept {
    std::vector<std::shared_ptr<Queue>> queues;
    {
      std::lock_guard lock(mutex_);
      for (const auto& [handle, stream] : streams_) queues.push_back(stream->queue());
      if (legacy_) queues.push_back(legacy_->queue());
    }
    const auto end = std::chrono::steady_clock::now() + kImplicitSyncLimit;
    for (const auto& q : queues) {
      std::unique_lock lock(q->mutex);
      if (!q->changed.wait_until(lock, end, [&] { return q->completed == q->submitted; })) {
        std::fprintf(stderr,
                     "loom fake device: %s synchronizes the device, and a stream still had work queued after %lld "
                     "s: on a GPU this call would wait forever (a stream held for the calling thread?)\n",
                     call, static_cast<long long>(kImplicitSyncLimit.count()));
        std::abort();
      }
    }
  }
  static constexpr std::chrono::seconds kImplicitSyncLimit{30};

  bool isPinned(const void* p) {
    const auto* b = static_cast<const std::byte*>(p);
    std::lock_guard lock(mutex_);
    auto it = pinned_.upper_bound(b);
    if (it == pinned_.begin()) return false;
    --it;
    return b < it->first + it->second;
  }

  // The stream behind a handle; nullptr is the legacy default stream.
  Stream& stream(StreamHandle handle) {
    std::lock_guard lock(mutex_);
    if (handle == nullptr) {
      if (!legacy_) legacy_ = std::make_unique<Stream>(0);
      return *legacy_;
    }
    auto it = streams_.find(static_cast<Stream*>(handle));
    if (it == streams_.end()) {
      throw Error(loomInvalidArgument, "stream is not a live stream of the fake device");
    }
    return *it->second;
  }

  Allocations allocations_;
  std::mutex mutex_;
  std::map<Stream*, std::unique_ptr<Stream>> streams_;
  std::unique_ptr<Stream> legacy_;
  struct Opened {
    int32_t pid = 0;  // the owner's
    uint64_t serial = 0;
    uint64_t bytes = 0;
  };
  std::map<void*, Opened> opened_;  // openIpc's views, by start
  std::map<const std::byte*, size_t> pinned_;  // allocPinned's, by start
};

FakeRuntime& fake() {
  static auto* rt = new FakeRuntime();  // never freed: stream workers may outlive a test's statics
  return *rt;
}

}  // namespace

DeviceRuntime& fakeRuntime() { return fake(); }

void useFakeDevice(bool on) {
  fakeOn.store(on, std::memory_order_release);
  detail::anyDevice.store(on ? 1 : -1, std::memory_order_release);  // the fake has GPUs; off, the real runtime is asked again
}
bool fakeDevice() { return fakeOn.load(std::memory_order_acquire); }

void* fakeDeviceAlloc(size_t bytes) { return fake().allocations().allocate(bytes, fakeCurrent, false); }
void fakeDeviceFree(void* p) { fake().allocations().free(p); }

void fakeDeviceGpus(int count, bool peerAccess) {
  fakeGpus.store(count < 1 ? 1 : count, std::memory_order_release);
  fakePeers.store(peerAccess, std::memory_order_release);
}
int fakeGpuCount() { return fakeGpus.load(std::memory_order_acquire); }

void fakeRefuseIpc(bool on) { refuseIpc.store(on, std::memory_order_release); }

void fakeMemoryPools(bool on) { pooled.store(on, std::memory_order_release); }

void fakeStreamMemoryBytes(size_t most) { streamMemoryBytes.store(most, std::memory_order_release); }

void fakeCapture(StreamHandle stream) { captured.store(stream, std::memory_order_release); }

bool fakeSynchronizeDevice(std::chrono::milliseconds limit) { return fake().synchronizeGpu(limit); }

uint64_t fakeBytesStaged() { return staged.load(std::memory_order_relaxed); }
uint64_t fakeBytesCopied() { return copied.load(std::memory_order_relaxed); }

uint64_t fakeStreamAllocations() { return streamAllocations.load(std::memory_order_relaxed); }

uint64_t fakeMemopBatches() { return memopBatches.load(std::memory_order_relaxed); }

}  // namespace loom::cuda
