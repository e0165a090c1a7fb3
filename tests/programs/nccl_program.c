/* A program written for NCCL, not for Loom: it includes nccl.h, links only
 * libnccl.so.2 (Loom's), and checks every collective and send/recv on host
 * buffers exactly, ncclMemAlloc's buffers, then bad input's error codes.
 *
 *   loom_test_nccl_program RANK NRANKS DIR
 *
 * Rank 0 writes ncclGetUniqueId's id to DIR/id; the others wait for it. With
 * NCCL_COMM_ID set, every rank calls ncclGetUniqueId itself, as NCCL's users
 * of a fixed bootstrap address do, and nothing is exchanged.
 * Prints "ok" and exits 0 when everything held; "FAIL ..." and 1 otherwise. */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      printf("FAIL line %d: ", __LINE__);    \
      printf(__VA_ARGS__);                   \
      printf("\n");                          \
      ++failures;                            \
    }                                        \
  } while (0)

#define NCCL(call)                                                                          \
  do {                                                                                      \
    ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess) {                                                                \
      printf("FAIL line %d: %s: %s (%s)\n", __LINE__, #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

/* IEEE half for a small non-negative integer (exact up to 2048), and back
 * for normal halves: C has no half type on every compiler this builds with. */
static uint16_t halfOf(int v) {
  if (v == 0) return 0;
  int e = 0;
  while ((v >> (e + 1)) != 0) ++e;
  return (uint16_t)(((e + 15) << 10) | ((v << (10 - e)) & 0x3ff));
}

static double fromHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) return m / 16777216.0; /* subnormal: m x 2^-24 */
  const double magnitude = (1.0 + m / 1024.0) * (double)(1 << e) / 32768.0;
  return (h & 0x8000) ? -magnitude : magnitude;
}

/* Small integers in every type, exactly: half and bf16 as their bits. */
static void put(void* buffer, ncclDataType_t type, size_t i, int v) {
  switch (type) {
    case ncclInt8: ((int8_t*)buffer)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t*)buffer)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t*)buffer)[i] = v; break;
    case ncclUint32: ((uint32_t*)buffer)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t*)buffer)[i] = v; break;
    case ncclUint64: ((uint64_t*)buffer)[i] = (uint64_t)v; break;
    case ncclFloat16: ((uint16_t*)buffer)[i] = halfOf(v); break;
    case ncclFloat32: ((float*)buffer)[i] = (float)v; break;
    case ncclFloat64: ((double*)buffer)[i] = v; break;
    case ncclBfloat16: {
      float f = (float)v;
      uint32_t bits;
      memcpy(&bits, &f, 4);
      ((uint16_t*)buffer)[i] = (uint16_t)(bits >> 16); /* small integers are exact in bf16 */
      break;
    }
    default: break;
  }
}

static double get(const void* buffer, ncclDataType_t type, size_t i) {
  switch (type) {
    case ncclInt8: return ((const int8_t*)buffer)[i];
    case ncclUint8: return ((const uint8_t*)buffer)[i];
    case ncclInt32: return ((const int32_t*)buffer)[i];
    case ncclUint32: return ((const uint32_t*)buffer)[i];
    case ncclInt64: return (double)((const int64_t*)buffer)[i];
    case ncclUint64: return (double)((const uint64_t*)buffer)[i];
    case ncclFloat16: return fromHalf(((const uint16_t*)buffer)[i]);
    case ncclFloat32: return ((const float*)buffer)[i];
    case ncclFloat64: return ((const double*)buffer)[i];
    case ncclBfloat16: {
      uint32_t bits = (uint32_t)((const uint16_t*)buffer)[i] << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    default: return -1;
  }
}

static size_t sizeOf(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

static const char* typeName(ncclDataType_t type) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                "float16", "float32", "float64", "bfloat16"};
  return names[type];
}

/* Rank r's value at i: 1..7, so that sums, products and averages of a few
 * ranks stay small integers, exact in every type. */
static int value(int rank, size_t i) { return (int)((rank + i) % 3) + 1; }

static void collectives(ncclComm_t comm, int rank, int n) {
  enum { kCount = 1003 }; /* odd: no type's count divides evenly */
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                  ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  char* in = malloc(8 * kCount * (size_t)n);
  char* out = malloc(8 * kCount * (size_t)n);
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    const ncclDataType_t type = types[t];
    const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin};
    for (int o = 0; o < 4; ++o) {
      for (size_t i = 0; i < kCount; ++i) put(in, type, i, value(rank, i));
      NCCL(ncclAllReduce(in, out, kCount, type, ops[o], comm, NULL));
      for (size_t i = 0; i < kCount; ++i) {
        double want = ops[o] == ncclProd ? 1 : ops[o] == ncclMin ? 99 : 0;
        for (int r = 0; r < n; ++r) {
          const double v = value(r, i);
          want = ops[o] == ncclSum ? want + v : ops[o] == ncclProd ? want * v : ops[o] == ncclMax ? (v > want ? v : want) : (v < want ? v : want);
        }
        if (get(out, type, i) != want) {
          CHECK(0, "allreduce %s op %d element %zu: %g, not %g", typeName(type), o, i, get(out, type, i), want);
          break;
        }
      }
    }
    /* Reduce-scatter (sum): block r of the sum; all-gather: every rank's block. */
    for (size_t i = 0; i < kCount * (size_t)n; ++i) put(in, type, i, value(rank, i));
    NCCL(ncclReduceScatter(in, out, kCount, type, ncclSum, comm, NULL));
    for (size_t i = 0; i < kCount; ++i) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += value(r, (size_t)rank * kCount + i);
      if (get(out, type, i) != want) {
        CHECK(0, "reducescatter %s element %zu: %g, not %g", typeName(type), i, get(out, type, i), want);
        break;
      }
    }
    for (size_t i = 0; i < kCount; ++i) put(in, type, i, value(rank, i));
    NCCL(ncclAllGather(in, out, kCount, type, comm, NULL));
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < kCount; ++i) {
        if (get(out, type, (size_t)r * kCount + i) != value(r, i)) {
          CHECK(0, "allgather %s block %d element %zu", typeName(type), r, i);
          r = n;
          break;
        }
      }
    }
  }
  /* Rooted and all-to-all collectives, int32, root the last rank. */
  const int root = n - 1;
  int32_t* a = (int32_t*)in;
  int32_t* b = (int32_t*)out;
  for (size_t i = 0; i < kCount * (size_t)n; ++i) a[i] = rank * 100000 + (int32_t)i;
  NCCL(ncclBroadcast(a, b, kCount, ncclInt32, root, comm, NULL));
  for (size_t i = 0; i < kCount; ++i) CHECK(b[i] == root * 100000 + (int32_t)i, "broadcast element %zu", i);
  NCCL(ncclReduce(a, b, kCount, ncclInt32, ncclSum, root, comm, NULL));
  if (rank == root) {
    for (size_t i = 0; i < kCount; ++i) CHECK(b[i] == 100000 * n * (n - 1) / 2 + n * (int32_t)i, "reduce %zu", i);
  }
  NCCL(ncclAlltoAll(a, b, kCount, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount; ++i) {
      const int32_t want = r * 100000 + (int32_t)((size_t)rank * kCount + i);
      if (b[(size_t)r * kCount + i] != want) {
        CHECK(0, "alltoall block %d element %zu: %d, not %d", r, i, b[(size_t)r * kCount + i], want);
        r = n;
        break;
      }
    }
  }
  NCCL(ncclGather(a, b, kCount, ncclInt32, root, comm, NULL));
  if (rank == root) {
    for (int r = 0; r < n; ++r) CHECK(b[(size_t)r * kCount + 7] == r * 100000 + 7, "gather block %d", r);
  }
  NCCL(ncclScatter(a, b, kCount, ncclInt32, root, comm, NULL));
  CHECK(b[5] == root * 100000 + rank * (int32_t)kCount + 5, "scatter: %d", b[5]);
  /* Average and a pre-multiplied sum (float32). */
  float* f = (float*)in;
  float* g = (float*)out;
  for (size_t i = 0; i < kCount; ++i) f[i] = (float)(2 * (rank + 1));
  NCCL(ncclAllReduce(f, g, kCount, ncclFloat32, ncclAvg, comm, NULL));
  CHECK(g[3] == (float)(n + 1), "avg: %g, not %d", (double)g[3], n + 1);
  float scalar = 0.5f;
  ncclRedOp_t half;
  NCCL(ncclRedOpCreatePreMulSum(&half, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  NCCL(ncclAllReduce(f, g, kCount, ncclFloat32, half, comm, NULL));
  CHECK(g[9] == (float)(n * (n + 1) / 2), "premulsum: %g", (double)g[9]);
  NCCL(ncclRedOpDestroy(half, comm));
  /* Send/recv around the ring, in one group. */
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t i = 0; i < kCount; ++i) a[i] = rank * 1000 + (int32_t)i;
  NCCL(ncclGroupStart());
  NCCL(ncclSend(a, kCount, ncclInt32, next, comm, NULL));
  NCCL(ncclRecv(b, kCount, ncclInt32, prev, comm, NULL));
  NCCL(ncclGroupEnd());
  for (size_t i = 0; i < kCount; ++i) CHECK(b[i] == prev * 1000 + (int32_t)i, "recv element %zu", i);
  free(in);
  free(out);
}

/* ncclMemAlloc's memory as a collective's buffer: device memory where a GPU
 * is visible, else Loom's shared host memory. The program touches it only
 * through collectives, which take either: the root's host data broadcast
 * into every rank's, then summed out of every rank's into host memory. */
static void memAlloc(ncclComm_t comm, int rank, int n) {
  enum { kCount = 300007 }; /* past a slot of the node's segment: read in place where it can be */
  const int root = n - 1;
  int32_t* m = NULL;
  NCCL(ncclMemAlloc((void**)&m, kCount * sizeof(int32_t)));
  int32_t* a = (int32_t*)malloc(kCount * sizeof(int32_t));
  int32_t* b = (int32_t*)malloc(kCount * sizeof(int32_t));
  for (size_t i = 0; i < kCount; ++i) a[i] = rank == root ? (int32_t)(3 * i + 1) : -1;
  NCCL(ncclBroadcast(a, m, kCount, ncclInt32, root, comm, NULL));
  NCCL(ncclAllReduce(m, b, kCount, ncclInt32, ncclSum, comm, NULL));
  for (size_t i = 0; i < kCount; ++i) {
    if (b[i] != n * (int32_t)(3 * i + 1)) {
      CHECK(0, "ncclMemAlloc'd buffers: element %zu is %d", i, b[i]);
      break;
    }
  }
  NCCL(ncclMemFree(m));
  CHECK(ncclMemFree(m) == ncclInvalidArgument, "ncclMemFree twice");
  CHECK(ncclMemAlloc((void**)&m, 0) == ncclInvalidArgument, "ncclMemAlloc of 0 bytes");
  free(a);
  free(b);
}

/* NCCL's error codes for bad input, each with a message. */
static void badInput(ncclComm_t comm) {
  float x[4] = {0};
  CHECK(ncclAllReduce(x, x, 4, ncclFloat8e4m3, ncclSum, comm, NULL) == ncclInvalidArgument, "fp8");
  CHECK(strstr(ncclGetLastError(comm), "fp8") != NULL, "fp8's message: %s", ncclGetLastError(comm));
  CHECK(ncclAllReduce(x, x, 4, (ncclDataType_t)99, ncclSum, comm, NULL) == ncclInvalidArgument, "type 99");
  CHECK(strstr(ncclGetLastError(comm), "datatype") != NULL, "type 99's message: %s", ncclGetLastError(comm));
  CHECK(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, NULL, NULL) == ncclInvalidArgument, "NULL comm");
  CHECK(ncclBroadcast(x, x, 4, ncclFloat, 1 << 20, comm, NULL) == ncclInvalidArgument, "root out of range");
  CHECK(ncclSend(x, 4, ncclFloat, -3, comm, NULL) == ncclInvalidArgument, "peer -3");
  /* Windows (collective: every rank is here): a host buffer registers, is
   * its own pointer back, and deregisters; bad flags and a NULL buffer are
   * named. */
  ncclWindow_t win = NULL;
  void* back = NULL;
  NCCL(ncclCommWindowRegister(comm, x, sizeof x, &win, NCCL_WIN_COLL_SYMMETRIC));
  NCCL(ncclWinGetUserPtr(comm, win, &back));
  CHECK(back == (void*)x, "ncclWinGetUserPtr: %p, registered %p", back, (void*)x);
  NCCL(ncclCommWindowDeregister(comm, win));
  CHECK(ncclWinGetUserPtr(comm, win, &back) == ncclInvalidArgument, "a deregistered window");
  CHECK(ncclCommWindowRegister(comm, NULL, 16, &win, NCCL_WIN_DEFAULT) == ncclInvalidArgument, "a NULL window");
  CHECK(strstr(ncclGetLastError(comm), "buff") != NULL, "a NULL window's message: %s", ncclGetLastError(comm));
  int device = -1;
  const ncclResult_t onDevice = ncclCommCuDevice(comm, &device);  /* a device only where CUDA sees one */
  CHECK(onDevice == ncclInvalidUsage || (onDevice == ncclSuccess && device >= 0), "ncclCommCuDevice: %d, device %d",
        (int)onDevice, device);
  CHECK(ncclCommCuDevice(comm, NULL) == ncclInvalidArgument, "ncclCommCuDevice with a NULL device");
  CHECK(ncclGetErrorString(ncclTimeout) != NULL && strlen(ncclGetErrorString(ncclInvalidArgument)) > 0, "strings");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s RANK NRANKS DIR\n", argv[0]);
    return 2;
  }
  const int rank = atoi(argv[1]), n = atoi(argv[2]);
  char path[4096];
  snprintf(path, sizeof path, "%s/id", argv[3]);
  int version = 0;
  NCCL(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE && version == 22707, "version %d", version);
  ncclUniqueId id;
  const char* fixed = getenv("NCCL_COMM_ID");
  if (fixed != NULL && fixed[0] != '\0') {
    NCCL(ncclGetUniqueId(&id));
  } else if (rank == 0) {
    NCCL(ncclGetUniqueId(&id));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) return 1;
  } else {
    FILE* f = NULL;
    for (int i = 0; i < 3000 && (f = fopen(path, "rb")) == NULL; ++i) usleep(10000);
    if (f == NULL || fread(&id, sizeof id, 1, f) != 1) return 1;
    fclose(f);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "nccl_program";
  ncclComm_t comm;
  NCCL(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  int count = 0, me = -1;
  NCCL(ncclCommCount(comm, &count));
  NCCL(ncclCommUserRank(comm, &me));
  CHECK(count == n && me == rank, "count %d rank %d", count, me);
  collectives(comm, rank, n);
  /* A split in two halves by parity runs the same checks. */
  ncclComm_t half;
  NCCL(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
  int halfCount = 0, halfRank = -1;
  NCCL(ncclCommCount(half, &halfCount));
  NCCL(ncclCommUserRank(half, &halfRank));
  CHECK(halfCount == (n + 1 - rank % 2) / 2 && halfRank == rank / 2, "split: %d of %d", halfRank, halfCount);
  if (halfCount > 1) collectives(half, halfRank, halfCount);
  NCCL(ncclCommDestroy(half));
  memAlloc(comm, rank, n);
  badInput(comm);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  ncclComm_t none;
  CHECK(ncclCommSplit(comm, 0, rank, &none, &bad) == ncclInvalidArgument, "a config without its magic");
  ncclResult_t async = ncclInternalError;
  NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", async);
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  if (failures != 0) return 1;
  printf("rank %d ok\n", rank);
  return 0;
}
