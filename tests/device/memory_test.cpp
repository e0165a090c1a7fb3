// Memory kinds and registrations: what a buffer is, the handle a peer
// reaches it by, and the importer's refusals.
#include <loom/loom.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/device/cuda.hpp"
#include "base/device/fake_device.hpp"
#include "base/error.hpp"
#include "memory/memory_kind.hpp"
#include "memory/registration.hpp"

namespace loom::memory {
namespace {

TEST(MemoryKind, LoomMemAllocIsSharedAndTheHeapIsNot) {
  void* shared = nullptr;
  ASSERT_EQ(loomMemAlloc(&shared, 1 << 16), loomSuccess);
  std::vector<std::byte> heap(1 << 16);
  const auto* base = static_cast<std::byte*>(shared);
  EXPECT_EQ(kindOf(shared, 1 << 16), MemoryKind::HostShared);
  EXPECT_EQ(kindOf(base + 100, 1000), MemoryKind::HostShared);  // a range inside it
  EXPECT_EQ(kindOf(base + 100, 1 << 16), MemoryKind::Host);     // one that runs past its end
  EXPECT_EQ(kindOf(heap.data(), heap.size()), MemoryKind::Host);
  EXPECT_TRUE(hostReachable(MemoryKind::Host));
  EXPECT_TRUE(hostReachable(MemoryKind::HostShared));
  EXPECT_FALSE(hostReachable(MemoryKind::CudaDevice));
  ASSERT_EQ(loomMemFree(shared), loomSuccess);
  EXPECT_EQ(kindOf(shared, 1 << 16), MemoryKind::Host);  // freed: no longer registered
}

TEST(Registration, AHandleNamesItsAllocationAndSurvivesSerialisation) {
  void* shared = nullptr;
  ASSERT_EQ(loomMemAlloc(&shared, 4096), loomSuccess);
  const Handle h = handleOf(static_cast<std::byte*>(shared) + 64, 128);
  EXPECT_EQ(h.kind, MemoryKind::HostShared);
  EXPECT_TRUE(h.reachableByPeers());
  EXPECT_EQ(h.pid, ::getpid());
  EXPECT_GE(h.fd, 0);
  EXPECT_EQ(h.mapBytes, 4096u);
  EXPECT_EQ(h.offset, 64u);
  ByteWriter w;
  h.serialize(w);
  ByteReader r(w.bytes(), "handle");
  const Handle back = Handle::deserialize(r);
  EXPECT_EQ(back.kind, h.kind);
  EXPECT_EQ(back.fd, h.fd);
  EXPECT_EQ(back.serial, h.serial);
  EXPECT_EQ(back.offset, h.offset);
  EXPECT_EQ(back.address, h.address);
  Mappings mappings;
  EXPECT_EQ(mappings.map(h), static_cast<const std::byte*>(shared) + 64);  // its own process: the address
  ASSERT_EQ(loomMemFree(shared), loomSuccess);

  std::vector<std::byte> bad(w.bytes().begin(), w.bytes().end());
  bad[0] = std::byte{9};  // no such kind
  ByteReader badReader(bad, "handle");
  EXPECT_THROW(Handle::deserialize(badReader), Error);
}

TEST(Registration, HeapMemoryOfAnotherProcessIsRefusedByKind) {
  std::vector<std::byte> heap(64);
  Handle h = handleOf(heap.data(), heap.size());
  EXPECT_EQ(h.kind, MemoryKind::Host);
  EXPECT_FALSE(h.reachableByPeers());
  h.pid = ::getpid() + 1;  // as another process would publish it
  Mappings mappings;
  try {
    mappings.map(h);
    ADD_FAILURE() << "mapped another process's heap";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), loomInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("host memory of pid"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(handleOf(heap.data(), 0).empty());
}

// The fake device's memory stands where a GPU's would: a CudaDevice handle that
// peers reach (the fake's IPC export names its memfd), on one "GPU", surviving
// serialisation; and a peer process opens it, as resolveBuffers would.
TEST(Registration, FakeDeviceMemoryIsReachableByPeersAsOneGpu) {
  if (cuda::deviceCount() > 0) GTEST_SKIP() << "a CUDA device is visible: the fake device stays off";
  cuda::useFakeDevice(true);
  void* device = cuda::fakeDeviceAlloc(1 << 16);
  ASSERT_NE(device, nullptr);
  const Handle h = handleOf(static_cast<std::byte*>(device) + 256, 1024);
  EXPECT_EQ(h.kind, MemoryKind::CudaDevice);
  EXPECT_TRUE(h.reachableByPeers());
  EXPECT_EQ(h.offset, 256u);
  EXPECT_EQ(h.device, 1u);
  EXPECT_TRUE(h.hasIpc);
  ByteWriter w;
  h.serialize(w);
  ByteReader r(w.bytes(), "handle");
  const Handle back = Handle::deserialize(r);
  EXPECT_EQ(back.kind, MemoryKind::CudaDevice);
  EXPECT_EQ(back.device, h.device);
  EXPECT_EQ(back.offset, h.offset);
  EXPECT_TRUE(back.hasIpc);
  EXPECT_EQ(back.ipc, h.ipc);

  static_cast<std::byte*>(device)[256] = std::byte{42};
  const pid_t child = ::fork();
  if (child == 0) {
    // Another process: it opens the allocation through the owner's memfd.
    Handle theirs = h;
    theirs.pid = ::getppid();
    Mappings mappings;
    const std::byte* p = mappings.map(theirs);
    ::_exit(p != static_cast<const std::byte*>(device) + 256 && *p == std::byte{42} ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not read the fake device's memory";
  cuda::fakeDeviceFree(device);
  cuda::useFakeDevice(false);
}

// loomMemAllocDevice: the device's memory, or a named refusal where no
// device is visible; loomMemFree takes it back, once. Without a device the
// kinds are known to be host memory at once (cuda::anyDevice), until the
// fake device is switched on: its memory is then device memory.
TEST(MemoryKind, LoomMemAllocDeviceGivesDeviceMemoryOrSaysThereIsNone) {
  void* p = nullptr;
  std::vector<std::byte> heap(64);
  if (cuda::deviceCount() == 0) {
    EXPECT_EQ(kindOf(heap.data(), heap.size()), MemoryKind::Host);  // no device: asked once, answered "none"
    EXPECT_EQ(loomMemAllocDevice(&p, 4096), loomInvalidUsage);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find("no CUDA device"), std::string::npos)
        << loomGetLastError(nullptr);
    EXPECT_EQ(p, nullptr);
    cuda::useFakeDevice(true);
  }
  EXPECT_EQ(loomMemAllocDevice(nullptr, 16), loomInvalidArgument);
  EXPECT_EQ(loomMemAllocDevice(&p, 0), loomInvalidArgument);
  ASSERT_EQ(loomMemAllocDevice(&p, 1 << 16), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(kindOf(p, 1 << 16), MemoryKind::CudaDevice);
  EXPECT_TRUE(handleOf(p, 1 << 16).reachableByPeers());
  EXPECT_EQ(loomMemFree(p), loomSuccess);
  EXPECT_EQ(loomMemFree(p), loomInvalidArgument);  // freed already
  EXPECT_EQ(kindOf(heap.data(), heap.size()), MemoryKind::Host);
  cuda::useFakeDevice(false);
  EXPECT_EQ(kindOf(heap.data(), heap.size()), MemoryKind::Host);
}

}  // namespace
}  // namespace loom::memory
