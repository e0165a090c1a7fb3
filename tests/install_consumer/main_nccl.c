/* A program written for NCCL: the installed nccl.h, libnccl.so.2 found
 * through loom-nccl.pc, one rank. */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  ncclComm_t comm;
  int n = 0, version = 0;
  float x = 2.0f;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 1;
  if (ncclCommInitAll(&comm, 1, NULL) != ncclSuccess) return 1;
  if (ncclCommCount(comm, &n) != ncclSuccess) return 1;
  if (ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) != ncclSuccess || x != 2.0f) return 1;
  printf("loom ok %d rank (through NCCL's API)\n", n);
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}
