#include "transport/ibverbs/verbs.hpp"

#include <atomic>

namespace loom::transport::ibverbs {
namespace {

std::atomic<Verbs*> gInstalled{nullptr};

}  // namespace

const char* wcStatusName(WcStatus status) {
  switch (status) {
    case WcStatus::Success: return "success";
    case WcStatus::LocalProtection: return "local protection error";
    case WcStatus::RemoteAccess: return "remote access error";
    case WcStatus::RetryExceeded: return "transport retry counter exceeded (the peer stopped answering)";
    case WcStatus::RnrRetryExceeded: return "receiver-not-ready retry counter exceeded";
    case WcStatus::Flushed: return "flushed (the queue pair is in the error state)";
    case WcStatus::Other: break;
  }
  return "error";
}

Verbs* currentVerbs() {
  if (Verbs* installed = gInstalled.load(std::memory_order_acquire)) return installed;
  return realVerbs();
}

ScopedVerbs::ScopedVerbs(Verbs& verbs) : previous_(gInstalled.exchange(&verbs, std::memory_order_acq_rel)) {}

ScopedVerbs::~ScopedVerbs() { gInstalled.store(previous_, std::memory_order_release); }

#if !LOOM_HAVE_IBVERBS
Verbs* realVerbs() { return nullptr; }
#endif

}  // namespace loom::transport::ibverbs
