#include "tools/check/collective_call.hpp"

namespace loom::check {

loomResult_t callCollective(const Case& c, const void* send, void* recv, loomRedOp_t op, loomComm_t comm,
                            loomStream_t stream) {
  switch (c.coll) {
    case Coll::Broadcast: return loomBroadcast(send, recv, c.count, c.type, c.root, comm, stream);
    case Coll::Reduce: return loomReduce(send, recv, c.count, c.type, op, c.root, comm, stream);
    case Coll::AllReduce: return loomAllReduce(send, recv, c.count, c.type, op, comm, stream);
    case Coll::ReduceScatter: return loomReduceScatter(send, recv, c.count, c.type, op, comm, stream);
    case Coll::AllGather: return loomAllGather(send, recv, c.count, c.type, comm, stream);
    case Coll::AlltoAll: return loomAlltoAll(send, recv, c.count, c.type, comm, stream);
    case Coll::Gather: return loomGather(send, recv, c.count, c.type, c.root, comm, stream);
    case Coll::Scatter: return loomScatter(send, recv, c.count, c.type, c.root, comm, stream);
    case Coll::SendRecv: {
      const loomResult_t sent = loomSend(send, c.count, c.type, (c.rank + 1) % c.nranks, comm, stream);
      if (sent != loomSuccess) return sent;
      return loomRecv(recv, c.count, c.type, (c.rank + c.nranks - 1) % c.nranks, comm, stream);
    }
  }
  return loomInvalidArgument;
}

}  // namespace loom::check
