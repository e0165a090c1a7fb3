#include "base/device/ipc.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace loom::cuda {

struct OpenedIpc::View {
  View(DeviceRuntime& rt, std::byte* opened) : runtime(rt), base(opened) {}
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  ~View() { runtime.closeIpc(base); }

  DeviceRuntime& runtime;  // the one that opened it closes it
  std::byte* base;
};

namespace {

// The process's open views, by runtime and handle (a handle names one
// allocation for its whole life). Closing and opening happen under the
// lock, so that a view being closed is never opened again beside it.
struct Views {
  std::mutex mutex;
  std::map<std::pair<DeviceRuntime*, IpcHandle>, std::weak_ptr<OpenedIpc::View>> open;
};

Views& views() {
  static auto* all = new Views();  // never freed: views may close after static destruction began
  return *all;
}

}  // namespace

std::optional<IpcExport> exportIpc(const void* p) {
  DeviceRuntime& rt = runtime();
  return rt.deviceCount() == 0 ? std::nullopt : rt.exportIpc(p);
}

OpenedIpc::OpenedIpc(const IpcHandle& handle) {
  DeviceRuntime& rt = runtime();
  Views& all = views();
  std::lock_guard lock(all.mutex);
  std::weak_ptr<View>& slot = all.open[{&rt, handle}];
  view_ = slot.lock();
  if (view_ == nullptr) {
    // Made in place: a View closes its base when it goes, so none may be copied.
    view_ = std::shared_ptr<View>(new View(rt, static_cast<std::byte*>(rt.openIpc(handle))));
    slot = view_;
  }
}

OpenedIpc::~OpenedIpc() {
  Views& all = views();
  std::lock_guard lock(all.mutex);
  view_.reset();  // the last owner closes the view here, under the lock
  std::erase_if(all.open, [](const auto& entry) { return entry.second.expired(); });
}

const std::byte* OpenedIpc::base() const { return view_->base; }

}  // namespace loom::cuda
