// NCCL_* variables that have a Loom equivalent become LOOM_* ones as the
// library loads, before any call reads them; a LOOM_* variable already set
// wins. What has no equivalent is left alone, and said so once on stderr
// where it would change what NCCL does (docs/nccl.md).
//
//   NCCL_DEBUG           LOOM_DEBUG          WARN, INFO, TRACE; VERSION and ABORT as WARN
//   NCCL_DEBUG_SUBSYS    LOOM_DEBUG_SUBSYS
//   NCCL_DEBUG_FILE      LOOM_DEBUG_FILE
//   NCCL_SOCKET_IFNAME   LOOM_SOCKET_IFNAME  the same grammar
//   NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS   LOOM_SOCKET_NSOCKS (sockets per peer)
//   NCCL_IB_HCA          LOOM_IB_HCA         the same grammar
//   NCCL_IB_GID_INDEX    LOOM_IB_GID_INDEX
//   NCCL_ALGO            LOOM_ALGO           Ring or Tree (one algorithm; else ignored)
//   NCCL_BUFFSIZE        LOOM_BUFFSIZE
//   NCCL_TOPO_FILE       LOOM_TOPO_FILE
//   NCCL_TOPO_DUMP_FILE  LOOM_TOPO_DUMP_FILE
//   NCCL_SHM_DISABLE=1   LOOM_TRANSPORT=socket
//   NCCL_COMM_BLOCKING   a config's blocking where the caller left it undefined (comm.cpp)
//   NCCL_COMM_ID         LOOM_COMM_ID        host:port of a fixed rendezvous root
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shim/nccl/shim.hpp"

namespace loom::nccl {
namespace {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

void set(const char* loomName, const std::string& value) { ::setenv(loomName, value.c_str(), 0); }

void ignored(const char* name, const char* value, const char* why) {
  std::fprintf(stderr, "loom (libnccl.so.2): %s=%s %s; ignored\n", name, value, why);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void mapDebug() {
  if (const char* v = get("NCCL_DEBUG")) {
    const std::string level = lower(v);
    if (level == "warn" || level == "info" || level == "trace") set("LOOM_DEBUG", level == "warn"   ? "WARN"
                                                                                  : level == "info" ? "INFO"
                                                                                                    : "TRACE");
    else if (level == "version" || level == "abort") set("LOOM_DEBUG", "WARN");
    else ignored("NCCL_DEBUG", v, "is not a level Loom has (WARN, INFO, TRACE)");
  }
  if (const char* v = get("NCCL_DEBUG_SUBSYS")) set("LOOM_DEBUG_SUBSYS", v);
  if (const char* v = get("NCCL_DEBUG_FILE")) set("LOOM_DEBUG_FILE", v);
}

void mapNetwork() {
  if (const char* v = get("NCCL_SOCKET_IFNAME")) set("LOOM_SOCKET_IFNAME", v);
  if (const char* v = get("NCCL_COMM_ID")) set("LOOM_COMM_ID", v);
  const char* perThread = get("NCCL_NSOCKS_PERTHREAD");
  const char* threads = get("NCCL_SOCKET_NTHREADS");
  if (perThread != nullptr || threads != nullptr) {
    const long sockets = (perThread != nullptr ? std::atol(perThread) : 1) * (threads != nullptr ? std::atol(threads) : 1);
    if (sockets >= 1) set("LOOM_SOCKET_NSOCKS", std::to_string(sockets));
  }
  if (const char* v = get("NCCL_IB_HCA")) set("LOOM_IB_HCA", v);
  if (const char* v = get("NCCL_IB_GID_INDEX")) set("LOOM_IB_GID_INDEX", v);
  if (const char* v = get("NCCL_SHM_DISABLE"); v != nullptr && std::string(v) == "1") set("LOOM_TRANSPORT", "socket");
}

void mapTuning() {
  if (const char* v = get("NCCL_ALGO")) {
    const std::string algo = lower(v);
    if (algo == "ring" || algo == "tree") set("LOOM_ALGO", algo);
    else ignored("NCCL_ALGO", v, "names no single algorithm Loom has (Ring, Tree)");
  }
  if (const char* v = get("NCCL_BUFFSIZE")) set("LOOM_BUFFSIZE", v);
  if (const char* v = get("NCCL_TOPO_FILE")) set("LOOM_TOPO_FILE", v);
  if (const char* v = get("NCCL_TOPO_DUMP_FILE")) set("LOOM_TOPO_DUMP_FILE", v);
}

__attribute__((constructor)) void mapNcclEnvironment() {
  mapDebug();
  mapNetwork();
  mapTuning();
}

}  // namespace

std::span<const char* const> mappedVariables() {
  static constexpr const char* kMapped[] = {
      "NCCL_DEBUG",          "NCCL_DEBUG_SUBSYS",     "NCCL_DEBUG_FILE",
      "NCCL_SOCKET_IFNAME",  "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS",
      "NCCL_ALGO",           "NCCL_BUFFSIZE",         "NCCL_TOPO_FILE",
      "NCCL_TOPO_DUMP_FILE", "NCCL_SHM_DISABLE",      "NCCL_COMM_BLOCKING",
      "NCCL_IB_HCA",         "NCCL_IB_GID_INDEX",     "NCCL_COMM_ID",
  };
  return kMapped;
}

int defaultBlocking() {
  const char* v = get("NCCL_COMM_BLOCKING");
  return v == nullptr ? NCCL_CONFIG_UNDEF_INT : std::atoi(v);
}

}  // namespace loom::nccl
