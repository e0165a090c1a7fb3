# UCX is optional: AUTO uses it when pkg-config finds ucx, ON requires it, OFF
# never looks. scripts/setup installs Debian's libucx-dev, so the README's
# commands always build it.
include(${CMAKE_CURRENT_LIST_DIR}/LoomOptionalPackage.cmake)
loom_optional_package(UCX ucx "UCX transport")
