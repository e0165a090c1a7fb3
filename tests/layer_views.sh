#!/bin/sh
# The include views refuse what the layering forbids: through transport's
# view, its own and base's headers compile and comm's do not; through the
# tools' view, <loom/loom.h> and base compile and the collectives do not.
#   layer_views.sh CXX LAYERS_DIR PUBLIC_INCLUDE_DIR
set -u
cxx=$1 layers=$2 public=$3
status=0
try() {  # try VIEW EXPECTED(ok|refused) HEADER
  if printf '#include "%s"\n' "$3" | "$cxx" -std=c++20 -fsyntax-only -I"$layers/$1" -I"$public" -x c++ - 2>/dev/null; then
    got=ok
  else
    got=refused
  fi
  if [ "$got" = "$2" ]; then
    echo "layer views: $1 including $3: $got, as it should"
  else
    echo "layer views: $1 including $3: $got, expected $2"
    status=1
  fi
}
try transport ok transport/transport.hpp
try transport ok base/net/socket.hpp
try transport refused comm/communicator.hpp
try transport refused collectives/run.hpp
try base refused transport/transport.hpp
try tools ok loom/loom.h
try tools ok base/datatype.hpp
try tools refused collectives/tuner.hpp
try training refused comm/communicator.hpp
exit $status
