// loomRedOp_t values: the built-in ops, and the PreMulSum ops a communicator
// creates (loomRedOpCreatePreMulSum). A created op's value carries its
// communicator's serial number, so using it on another communicator is
// caught instead of silently meaning some other op.
#pragma once

#include <loom/loom.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "collectives/collective.hpp"

namespace loom::coll {

class RedOpTable {
 public:
  RedOpTable();

  loomRedOp_t create(const void* scalar, loomDataType_t type, loomScalarResidence_t residence);
  // loomInvalidArgument naming "op" if it is not a live op of this table.
  void destroy(loomRedOp_t op);
  // How `op` reduces `type` for this rank (the PreMulSum scalar read now);
  // loomInvalidArgument naming "op" for an unknown, destroyed or foreign op,
  // or one created for another datatype.
  Reduction resolve(loomRedOp_t op, loomDataType_t type) const;

 private:
  struct PreMulSum {
    loomDataType_t type;
    loomScalarResidence_t residence;
    const void* pointer;  // read at every call (loomScalarDevice)
    double value;         // loomScalarHostImmediate
  };
  const PreMulSum& lookup(loomRedOp_t op) const;

  uint32_t serial_;  // this table's tag in op values
  mutable std::mutex mutex_;
  std::vector<std::optional<PreMulSum>> ops_;
};

// The value at `p` of type `type`, as a double (PreMulSum scalars).
double scalarValue(const void* p, loomDataType_t type);

}  // namespace loom::coll
