// loomCommWindowRegister / loomCommWindowDeregister / loomWinGetUserPtr:
// symmetric windows (comm/symmetric_windows.hpp).
#include <loom/loom.h>

#include "api/api_call.hpp"
#include "base/error.hpp"
#include "comm/communicator.hpp"

using loom::api::call;
using loom::api::ready;
using loom::api::requireNonNull;

namespace {

const loom::SymmetricWindows::Window& windowOf(loomComm& c, loomWindow_t win) {
  requireNonNull(win, "win");
  const auto* window = reinterpret_cast<const loom::SymmetricWindows::Window*>(win);
  if (!c.windows.holds(window)) {
    throw loom::Error(loomInvalidArgument, "win: not a window of this communicator (or deregistered)");
  }
  return *window;
}

}  // namespace

extern "C" {

loomResult_t loomCommWindowRegister(loomComm_t comm, void* buff, size_t size, loomWindow_t* win, int flags) {
  return call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    requireNonNull(win, "win");
    *win = nullptr;
    requireNonNull(buff, "buff");
    if (size == 0) throw loom::Error(loomInvalidArgument, "size: a window holds at least one byte");
    if ((flags & ~LOOM_WIN_COLL_SYMMETRIC) != 0) {
      throw loom::Error(loomInvalidArgument, "flags=" + std::to_string(flags) +
                                                 ": LOOM_WIN_DEFAULT (0) or LOOM_WIN_COLL_SYMMETRIC (1)");
    }
    *win = reinterpret_cast<loomWindow_t>(c.windows.add(c.bootstrap(), buff, size, flags));
  });
}

loomResult_t loomCommWindowDeregister(loomComm_t comm, loomWindow_t win) {
  return call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    c.windows.remove(c.bootstrap(), &windowOf(c, win));
  });
}

loomResult_t loomWinGetUserPtr(loomComm_t comm, loomWindow_t win, void** ptr) {
  return call(__func__, comm, [&] {
    loomComm& c = ready(comm);
    requireNonNull(ptr, "ptr");
    *ptr = windowOf(c, win).base;
  });
}

}  // extern "C"
