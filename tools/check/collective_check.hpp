// Shared by the tests and loom-perf. nccl-tests' idea for checking collectives: every input element is a
// function of (rank, index) chosen so that any reduction order is exact
// (small integers; powers of two for products), so each rank computes the
// exact expected result itself and compares with zero tolerance (averages of
// floats: within 2 ulp, one rounding of the division).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <string>
#include <vector>

namespace loom::check {

// SendRecv: nccl-tests' sendrecv, each rank sending to rank+1 and receiving from rank-1.
enum class Coll { Broadcast, Reduce, AllReduce, ReduceScatter, AllGather, AlltoAll, Gather, Scatter, SendRecv };
// Sum, Prod, Min, Max, Avg, then PreMulSum (not a loomRedOp_t value of its own).
enum class Op { Sum, Prod, Min, Max, Avg, PreMulSum };

const char* collName(Coll c);
const char* opName(Op op);
const char* typeName(loomDataType_t type);
bool reduces(Coll c);

// The PreMulSum scalar of `rank` (1 or 2: exact in every type).
double preMulScalar(int rank);

// Element i of rank's input for (op, type).
double inputValue(Op op, loomDataType_t type, int rank, size_t i);

// Stores the exact small value v as element i of a `type` buffer (integers wrap).
void storeValue(loomDataType_t type, void* buffer, size_t i, double v);

// Writes `count` input elements of `rank`, starting at element `first`, as `type`.
void fillInput(void* buffer, Op op, loomDataType_t type, int rank, size_t first, size_t count);

struct Case {
  Coll coll;
  loomDataType_t type;
  Op op;
  int nranks;
  int rank;
  int root;
  size_t count;  // as passed to the call
};

// Element counts of the send and receive buffers of `c` on its rank.
size_t sendElements(const Case& c);
size_t recvElements(const Case& c);
// Whether this rank's recvbuff holds a result.
bool hasResult(const Case& c);

// Fills this rank's send buffer for `c`.
void fillSend(const Case& c, void* send);

// Compares recv with the exact expectation; "" if equal, else the first
// mismatch ("element 7: got 3, expected 4").
std::string checkResult(const Case& c, const void* recv);
// How many elements of recv differ from the expectation.
size_t wrongElements(const Case& c, const void* recv);

size_t typeSize(loomDataType_t type);

}  // namespace loom::check
