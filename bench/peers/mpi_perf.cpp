// Open MPI's collectives measured with loom-perf's method (sweep.hpp), as
// the peer in bench/compare and bench/transport/compare-ucx. Run under
// mpirun; float32 sums, out of place; sendrecv as loom-perf's (a ring shift).
#include <mpi.h>

#include <vector>

#include "bench/peers/sweep.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const loom::bench::Sweep s = loom::bench::parseSweep(argc, argv);
  const size_t maxElements = s.maxBytes / sizeof(float) + 1;
  std::vector<float> send(maxElements, 1.0f), recv(maxElements, 0.0f);

  auto run = [&](size_t bytes) {
    const int count = static_cast<int>(bytes / sizeof(float));
    if (s.collective == "all_reduce") {
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (s.collective == "all_gather") {
      MPI_Allgather(send.data(), count / n, MPI_FLOAT, recv.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (s.collective == "reduce_scatter") {
      MPI_Reduce_scatter_block(send.data(), recv.data(), count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (s.collective == "sendrecv") {  // loom-perf's: to the next rank, from the previous
      MPI_Sendrecv(send.data(), count, MPI_FLOAT, (rank + 1) % n, 0, recv.data(), count, MPI_FLOAT, (rank + n - 1) % n, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Bcast(send.data(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
  };
  auto slowest = [](double us) {
    double max = 0;
    MPI_Allreduce(&us, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
  };
  loom::bench::runSweep(s, rank, n, run, [] { MPI_Barrier(MPI_COMM_WORLD); }, slowest, send.data());
  MPI_Finalize();
  return 0;
}
