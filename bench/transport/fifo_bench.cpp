// Shared-memory FIFO ping-pong: the latency floor of Loom's shm transport.
// Two threads, two real ShmSend/RecvConnections over segments (ping one
// way, pong the other); each iteration is one round trip of a message of
// Arg bytes (the Time column; one way is half of it), copied in and out of
// the slots. Both sides spin: two threads on two cores.
#include <benchmark/benchmark.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "transport/shm/shm_connection.hpp"

namespace {

using loom::transport::FifoShape;
using loom::transport::SlotTag;
using namespace loom::transport::shm;
using loom::shm::Segment;

struct Pipe {
  ShmSendConnection send;
  ShmRecvConnection recv;
};

// One direction: the receiver creates the segment, the sender maps it.
Pipe makePipe(const FifoShape& shape) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair");
  Segment created = Segment::create(FifoView::segmentBytes(shape));
  Segment opened = Segment::open(created.name(), FifoView::segmentBytes(shape));
  created.unlink();
  return {ShmSendConnection(std::move(opened), shape, loom::net::Socket(fds[0], "ping")),
          ShmRecvConnection(std::move(created), shape, loom::net::Socket(fds[1], "pong"))};
}

void send(ShmSendConnection& c, const std::byte* data, uint32_t bytes, uint64_t marker) {
  std::span<std::byte> slot;
  while ((slot = c.reserve()).empty()) {
  }
  std::memcpy(slot.data(), data, bytes);
  c.commit(SlotTag{.messageBytes = marker, .bytes = bytes, .sequence = 0, .message = 0, .index = 0});
}

// Waits for a slot, copies it out, releases it; returns its marker.
uint64_t receive(ShmRecvConnection& c, std::byte* out) {
  std::optional<loom::transport::RecvSlot> slot;
  while (!(slot = c.peek())) {
  }
  std::memcpy(out, slot->data.data(), slot->data.size());
  const uint64_t marker = slot->tag.messageBytes;
  c.release();
  return marker;
}

void ShmFifoRoundTrip(benchmark::State& state) {
  const auto bytes = static_cast<uint32_t>(state.range(0));
  const FifoShape shape{.slots = 8, .slotBytes = 512 * 1024};
  Pipe ping = makePipe(shape);
  Pipe pong = makePipe(shape);
  constexpr uint64_t kStop = ~0ull;
  std::thread echo([&] {
    std::vector<std::byte> buffer(bytes);
    for (;;) {
      const uint64_t marker = receive(ping.recv, buffer.data());
      if (marker == kStop) return;
      send(pong.send, buffer.data(), bytes, marker);
    }
  });
  std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
  for (auto _ : state) {
    send(ping.send, out.data(), bytes, 1);
    benchmark::DoNotOptimize(receive(pong.recv, in.data()));
  }
  send(ping.send, out.data(), 0, kStop);
  echo.join();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);
}
BENCHMARK(ShmFifoRoundTrip)->Arg(8)->Arg(4096)->Arg(65536)->Arg(512 * 1024)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
