// A data connection's receiving end, as the listener sees one: a 64-byte
// Hello, then slots (a 40-byte SlotTag and its payload each, slot i on lane
// i mod N). The Hello is decoded and handed to its transport's accept, with
// the job's secret put in (the listener has checked it by then); for the
// socket transport, the rest of the bytes then arrive through a real socket
// at the SocketRecvConnection, which is progressed and drained until the
// stream ends; for the verbs transport (on its fake), they are the sender's
// half of the queue-pair handshake that accept decodes. The properties:
// every defect is a loom::Error, and every slot handed out fits the FIFO's
// slot size.
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/error.hpp"
#include "transport/handshake.hpp"
#include "transport/ibverbs/fake_verbs.hpp"
#include "transport/ibverbs/ib_transport.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/socket/socket_transport.hpp"

namespace {

using namespace loom;
using namespace loom::transport;

constexpr int kSelf = 1;

// Progresses `connection` until the sender's side has ended (checkAlive
// throws) or nothing moves any more; checks each slot on the way.
void drain(RecvConnection& connection, const FifoShape& shape) {
  for (int idle = 0; idle < 3;) {
    const bool moved = connection.progress();
    while (auto slot = connection.peek()) {
      if (slot->data.size() > shape.slotBytes) std::abort();
      connection.release();
    }
    connection.checkAlive();
    idle = moved ? 0 : idle + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  if (bytes.size() < Hello::kBytes) return 0;
  Hello hello;
  try {
    hello = Hello::decode(bytes.first(Hello::kBytes));
  } catch (const Error&) {
    return 0;
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  net::Socket ours(fds[0], "rank " + std::to_string(hello.from)), theirs(fds[1], "fuzzer");

  Context context;
  context.self.rank = kSelf;
  context.timeout = std::chrono::seconds(1);
  hello.secret = context.secret;
  std::unique_ptr<RecvConnection> connection;
  try {
    if (hello.transport == sock::SocketTransport::kWireId) {
      connection = sock::SocketTransport().accept(ours, hello, context);
    } else if (hello.transport == shm::ShmTransport::kWireId) {
      shm::ShmTransport().accept(ours, hello, context);
      return 0;  // its slots come through shared memory, not this socket
    } else if (hello.transport == ibverbs::IbTransport::kWireId) {
      static ibverbs::FakeVerbs fake;
      static ibverbs::ScopedVerbs installed(fake);
      // What fits in the socket's buffer now: accept reads its handshake from it.
      theirs.sendSome({}, bytes.subspan(Hello::kBytes).first(std::min<size_t>(bytes.size() - Hello::kBytes, 4096)));
      ::shutdown(theirs.fd(), SHUT_WR);  // and then the end: a short frame fails at once, not at the deadline
      ibverbs::IbTransport().accept(ours, hello, context);
      return 0;  // its slots come by RDMA writes, not this socket
    }
  } catch (const Error&) {
    return 0;
  }
  if (!connection) return 0;  // the Hello announced more sockets than this one

  const auto deadline = Deadline::after(std::chrono::seconds(5));
  try {
    theirs.sendAll(bytes.subspan(Hello::kBytes), deadline, nullptr);
  } catch (const Error&) {
    // the receiver already refused the stream
  }
  theirs.close();
  try {
    drain(*connection, hello.fifo);
  } catch (const Error&) {
    // a corrupt slot, or the sender's side ended
  }
  return 0;
}
