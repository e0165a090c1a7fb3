// Shared-memory reduce among the ranks of one node: shmAllReduce's steps,
// except that only the root takes the result. When reducesWhole(), the root
// reduces every slot straight into its output (and stages nothing itself); otherwise
// every rank reduces its slice into the result slot and the root copies the
// finished piece out once all have. Rank order, one pass, as in all-reduce.
// Reducing whole, the others only stage, so they do not wait for the root
// (NodeArea::depart): a small reduce's others stream their pieces to it.
//
// When the message takes more than one step, the ranks reduce by slices, and
// every rank's input is reachable here (loomMemAlloc'd, or ranks that are
// threads of one process), the first step's arrive tells each rank where the
// others' inputs are, and from the second step on nothing is staged: the same
// reductions read every input in place. A last synchronization keeps each
// input alive until all have read it. When the root reduces whole (two
// ranks) it stays staged: the other rank's copy pulls its input into the
// cache beside the root's reduction, which was faster than the root reading
// it in place alone (1.2-1.3x at 1-64 MiB on the 2-core VM; with 3 ranks in
// place was 1.3-1.4x faster).
//
// Device buffers (CUDA) on one GPU are read in place by the root's kernel,
// which reduces every rank's input whole into its output in one pass (rank
// order still), two ranks' too; a rank with device buffers stages nothing at
// the first step, and if they are not all read in place every rank starts
// over on the staged path (shm_allreduce.cpp says more). Every rank must
// know whether the first step is an offer, and none knows where its peers'
// buffers are, so every call of more than one step offers, two ranks' on the
// host too, though these still read nothing in place.
#include <optional>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/shm_steps.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {

namespace {

// The steps through the segment, from the first piece; `first`: whether this call
// offers the inputs at its first step (every rank alike). If a rank with
// device buffers offered there, it staged nothing, and every rank starts over.
void reduceSteps(const Plan& plan, shm::NodeArea& node, const Pieces& pieces, FirstStep first) {
  const bool offer = first == FirstStep::Offer;
  const int n = node.localSize();
  const int me = node.localRank();
  const int root = plan.c.root;  // one node: communicator ranks are local ranks
  const size_t typeSize = plan.c.typeSize;
  const std::span<const void*> sources = node.sources();
  if (offer) node.offerBuffers(plan.c.send, plan.c.blockBytes(), nullptr, 0);

  const shm::PeerBuffers* inPlace = nullptr;  // known after the first step
  for (size_t i = 0; i < pieces.count(); ++i) {
    const Piece piece = pieces[i];
    const std::byte* in = plan.c.send + piece.offset;
    const bool whole = reducesWhole(n, piece.bytes);
    // Reducing whole, the others only stage (they read nothing: they depart,
    // NodeArea::depart) and the root only reads; a rank that stages nothing
    // or only in its arrival line may run ahead (nextLineStep).
    const bool departs = whole && me != root && !offer;
    const bool inLine = whole && !offer && (me == root || piece.bytes <= shm::kArrivalBytes);
    const uint64_t step = inLine ? node.nextLineStep() : node.nextStep();
    if (inPlace == nullptr && (!whole || me != root)) plan.copy(node.stage(me, step, piece.bytes), in, piece.bytes);
    if (departs) {
      node.depart(step, plan.what);
      continue;
    }
    node.arrive(step, plan.what);
    if (i == 0 && offer && node.deviceOffered()) {
      reduceSteps(plan, node, pieces, FirstStep::Stage);
      return;
    }
    const auto input = [&](int q) -> const std::byte* {
      if (q == me) return in;
      if (inPlace != nullptr) return inPlace->send[static_cast<size_t>(q)] + piece.offset;
      return node.stage(q, step, piece.bytes);
    };

    const Slice mine = whole ? Slice{0, me == root ? piece.bytes : 0} : sliceOf(piece.bytes, typeSize, n, me);
    std::byte* dst = whole ? plan.c.recv + piece.offset : node.result(step) + mine.offset;
    for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = input(q) + mine.offset;
    if (mine.bytes != 0) {
      std::optional<shm::PeerReads> reading;
      if (inPlace != nullptr) reading.emplace(node, plan.what);
      cpu::reduce(plan.c.type, plan.c.reduction.op, sources, dst, elementsIn(mine.bytes, typeSize));
    }
    if (i == 0 && offer && !whole) inPlace = node.peerBuffers();
    if (whole) continue;
    node.post(shm::Counter::Reduced, step);
    if (me == root) {
      node.waitAll(shm::Counter::Reduced, step, plan.what);
      plan.copy(plan.c.recv + piece.offset, node.result(step), piece.bytes);
    }
  }
  if (inPlace != nullptr) node.sync(plan.what);  // no rank reuses its input while another still reads it
}

}  // namespace

void shmReduce(const Plan& plan) {
  shm::NodeArea& node = startOnNode(plan);
  const int n = node.localSize();
  const Pieces pieces(plan.c.blockBytes(), wholeElements(node.slotBytes(), plan.c.typeSize));
  const FirstStep first = firstStepFor(pieces);
  const bool isRoot = node.localRank() == plan.c.root;
  // The device path is for a rank that offers device memory (its input, or
  // the root's output): a rank that offers host memory takes the host's
  // steps, any other device buffer of its staged around them.
  const bool offersDevice = plan.c.sendKind == memory::MemoryKind::CudaDevice ||
                            (isRoot && plan.c.recvKind == memory::MemoryKind::CudaDevice);
  if (!offersDevice) {
    onHostBuffers(plan, [&](const Plan& p) { reduceSteps(p, node, pieces, first); });
    return;
  }
  // Device buffers on one GPU: the root's kernel reduces every rank's input
  // whole into its output, in one pass; the others wait until it has read them.
  const auto rootReads = [&](const shm::PeerBuffers& peers, LocalWork& work) {
    if (isRoot) {
      const shm::PeerReads reading(node, plan.what);
      const std::span<const void*> sources = node.sources();
      for (int q = 0; q < n; ++q) sources[static_cast<size_t>(q)] = peers.send[static_cast<size_t>(q)];
      work.reduce(plan.c.type, plan.c.reduction.op, sources, plan.c.recv,
                  elementsIn(plan.c.blockBytes(), plan.c.typeSize));
      work.finish();
    }
    node.sync(plan.what);  // no rank reuses its input while the root still reads it
  };
  if (first == FirstStep::Offer && readDeviceInPlace(plan, node, plan.c.send, plan.c.blockBytes(), isRoot ? plan.c.recv : nullptr,
                                 isRoot ? plan.c.blockBytes() : 0, rootReads)) {
    return;
  }
  onHostBuffers(plan, [&](const Plan& p) { reduceSteps(p, node, pieces, FirstStep::Stage); });
}

// Per slot-sized piece: arrive, then the result slice; the buffer staged once.
extern const AlgorithmEntry kShmReduce{
    .name = "shm",
    .kind = CollectiveKind::Reduce,
    .run = shmReduce,
    .costUs = [](const CostModel& m, size_t bytes) {
      [[maybe_unused]] const double s = static_cast<double>(bytes);
      return m.onSharedNode(2, s);
    },
    .needs = Needs::NodeSegment,
    .foldsInRankOrder = true,
    .readsDevice = true};

}  // namespace loom::coll
