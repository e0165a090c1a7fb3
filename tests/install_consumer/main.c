/* A plain C program using the installed <loom/loom.h>. */
#include <loom/loom.h>
#include <stdio.h>

int main(void) {
  loomComm_t comm;
  int n = 0;
  if (loomCommInitAll(&comm, 1, NULL) != loomSuccess) return 1;
  if (loomCommCount(comm, &n) != loomSuccess || loomCommBarrier(comm) != loomSuccess) return 1;
  printf("loom ok %d rank\n", n);
  return loomCommDestroy(comm) == loomSuccess ? 0 : 1;
}
