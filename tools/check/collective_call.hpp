// The <loom/loom.h> call that a check::Case names, so that the tests and
// loom-perf issue every collective the same way.
#pragma once

#include <loom/loom.h>

#include "tools/check/collective_check.hpp"

namespace loom::check {

// Issues c's collective on `comm`. SendRecv is a send to rank + 1 and a
// receive from rank - 1, not grouped here: the caller groups them (alone,
// or with other ranks' calls). `op` is ignored by collectives that do not
// reduce. Returns the first call's failure.
loomResult_t callCollective(const Case& c, const void* send, void* recv, loomRedOp_t op, loomComm_t comm,
                            loomStream_t stream);

}  // namespace loom::check
