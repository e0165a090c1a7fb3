# rdma-core's libibverbs is optional: AUTO uses it when pkg-config finds
# libibverbs, ON requires it, OFF never looks. Without it the verbs transport
# still builds with its in-process fake (tests), and reaches no device.
# scripts/setup installs Debian's libibverbs-dev, so the README's commands
# always build the real one.
include(${CMAKE_CURRENT_LIST_DIR}/LoomOptionalPackage.cmake)
loom_optional_package(IBVERBS libibverbs "verbs transport on libibverbs")
