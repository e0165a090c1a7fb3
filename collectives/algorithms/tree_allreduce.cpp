// Double binary tree all-reduce (Sanders, Speck and Träff's two-tree
// algorithm; NCCL's tree): two binary trees over the ring's positions, in
// which (for even n) every rank that is inner in one tree is a leaf in the
// other (topology/placement.hpp). Each tree carries half of the buffer,
// chunk by chunk:
//
//   up    each rank receives its children's partial sums, adds its own and
//         sends the sum to its parent; the root adds the last and keeps the
//         total;
//   down  the total flows back from the root, each rank storing it and
//         forwarding it to its children.
//
// The two trees' chunks alternate, so both halves are in flight at once and
// no rank forwards everything. A result crosses 2 log2(n) hops instead of the
// ring's 2(n-1), which is what wins for medium messages across nodes. In-order
// trees over ring positions keep every subtree on a contiguous run of the
// ring, so mostly within one host.
#include "collectives/algorithms/algorithms.hpp"
#include "collectives/algorithms/registry.hpp"
#include "collectives/algorithms/slices.hpp"

namespace loom::coll {
namespace {

// One tree's part of the work at one rank, in ranks.
struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};

TreeLinks linksIn(const topo::Tree& tree, const Ring& ring, int position) {
  TreeLinks out;
  const int parent = tree.parent[static_cast<size_t>(position)];
  if (parent >= 0) out.parent = ring.at(parent);
  for (int child : tree.children[static_cast<size_t>(position)]) out.children.push_back(ring.at(child));
  return out;
}

// Up: in (+) the children's sums, to the parent; at the root, into out.
void up(const Plan& plan, Links& links, const TreeLinks& t, const std::byte* in, std::byte* out, size_t bytes) {
  if (t.children.empty()) {
    plan.primitives(links, -1, t.parent)->send(in, bytes);
    return;
  }
  const std::byte* partial = in;
  for (size_t i = 0; i + 1 < t.children.size(); ++i) {  // all but the last child: accumulate in out
    plan.primitives(links, t.children[i], -1)->recvReduceCopy(partial, out, bytes);
    partial = out;
  }
  const auto last = plan.primitives(links, t.children.back(), t.parent);
  if (t.parent >= 0) last->recvReduceSend(partial, bytes);
  else last->recvReduceCopy(partial, out, bytes);
}

// Down: the total from the parent (already in out at the root), to every child.
void down(const Plan& plan, Links& links, const TreeLinks& t, std::byte* out, size_t bytes) {
  size_t first = 0;
  if (t.parent >= 0) {
    const int next = t.children.empty() ? -1 : t.children.front();
    const auto fromParent = plan.primitives(links, t.parent, next);
    if (next >= 0) fromParent->recvCopySend(out, bytes);
    else fromParent->recv(out, bytes);
    first = 1;
  }
  for (size_t i = first; i < t.children.size(); ++i) plan.primitives(links, -1, t.children[i])->send(out, bytes);
}

}  // namespace

void treeAllReduce(const Plan& plan) {
  const Ring& ring = *plan.ring;
  const int position = ring.position(plan.rank);
  const std::array<TreeLinks, 2> trees{linksIn((*plan.trees)[0], ring, position),
                                       linksIn((*plan.trees)[1], ring, position)};
  // Half h of the buffer goes on tree h, in `chunks` pieces.
  const size_t total = plan.c.blockBytes();
  const std::array<Slice, 2> halves{sliceOf(total, plan.c.typeSize, 2, 0), sliceOf(total, plan.c.typeSize, 2, 1)};
  const size_t chunks = std::max<size_t>(1, (halves[0].bytes + plan.chunkBytes - 1) / plan.chunkBytes);
  auto piece = [&](int h, size_t k) {
    const Slice s = sliceOf(halves[static_cast<size_t>(h)].bytes, plan.c.typeSize, static_cast<int>(chunks),
                            static_cast<int>(k));
    return Slice{halves[static_cast<size_t>(h)].offset + s.offset, s.bytes};
  };
  Links links = plan.links();

  for (size_t k = 0; k < chunks; ++k) {
    for (int h = 0; h < 2; ++h) {
      const Slice s = piece(h, k);
      up(plan, links, trees[static_cast<size_t>(h)], plan.c.send + s.offset, plan.c.recv + s.offset, s.bytes);
    }
  }
  for (size_t k = 0; k < chunks; ++k) {
    for (int h = 0; h < 2; ++h) {
      const Slice s = piece(h, k);
      down(plan, links, trees[static_cast<size_t>(h)], plan.c.recv + s.offset, s.bytes);
    }
  }
  links.flush();
}

namespace {

// Up and down a tree of depth log2(n); a rank inner in one tree takes in
// (and sends on) about the whole buffer in each direction.
double treeAllReduceCost(const CostModel& m, size_t bytes) {
  return m.overLinks(2 * CostModel::log2Ceil(m.layout.nranks), 2 * static_cast<double>(bytes));
}

}  // namespace

extern const AlgorithmEntry kTreeAllReduce{
    .name = "tree", .kind = CollectiveKind::AllReduce, .run = treeAllReduce, .costUs = treeAllReduceCost};

}  // namespace loom::coll
