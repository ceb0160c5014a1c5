/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What an MPI user checks first on a new fabric: a ping-pong between the
 * first and the last rank (on different hosts when mpirun maps by slot
 * over two hosts) that gets every byte back as sent, and an allreduce
 * whose result each rank can compute by itself. Prints one line per
 * check; any mismatch aborts the job with a nonzero status.
 *
 *   mpi_check [ITERATIONS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kLarge = 1 << 20, kVector = 4096 };

static void fail(const char* what, long at) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "rank %d: %s (at %ld)\n", rank, what, at);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The byte the pattern of iteration `iter` has at `i`: every iteration
 * sends other bytes, so a stale buffer cannot pass. */
static uint8_t pattern(long iter, size_t i) { return (uint8_t)(i * 131u + (size_t)iter * 7u + 1u); }

/* Rank `a` sends `len` bytes to rank `b`, which sends them back;
 * returns the mean round trip in microseconds, on rank `a`. */
static double pingpong(int a, int b, size_t len, long iters) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  uint8_t* buf = malloc(len);
  if (!buf) fail("out of memory", 0);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (long it = 0; it < iters; ++it) {
    if (rank == a) {
      for (size_t i = 0; i < len; ++i) buf[i] = pattern(it, i);
      MPI_Send(buf, (int)len, MPI_BYTE, b, 1, MPI_COMM_WORLD);
      memset(buf, 0, len);
      MPI_Recv(buf, (int)len, MPI_BYTE, b, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (size_t i = 0; i < len; ++i)
        if (buf[i] != pattern(it, i)) fail("ping-pong: a byte came back changed", it);
    } else if (rank == b) {
      MPI_Status st;
      MPI_Recv(buf, (int)len, MPI_BYTE, a, 1, MPI_COMM_WORLD, &st);
      int n;
      MPI_Get_count(&st, MPI_BYTE, &n);
      if ((size_t)n != len) fail("ping-pong: a message of another length", it);
      MPI_Send(buf, (int)len, MPI_BYTE, a, 2, MPI_COMM_WORLD);
    }
  }
  const double us = (MPI_Wtime() - start) * 1e6 / (double)iters;
  free(buf);
  return us;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long iters = argc > 1 ? atol(argv[1]) : 1000;
  if (size < 2 || iters < 1) fail("needs 2 ranks or more and 1 iteration or more", size);

  const int last = size - 1;
  const double small = pingpong(0, last, 8, iters);
  const double large = pingpong(0, last, kLarge, iters / 10 + 1);
  if (rank == 0) {
    printf("pingpong 0<->%d 8 B: %ld round trips intact, %.2f us each\n", last, iters, small);
    printf("pingpong 0<->%d 1 MiB: %ld round trips intact, %.1f MB/s\n", last, iters / 10 + 1,
           2.0 * kLarge / large);
  }

  /* Element i of rank r is r * i + 1: the sum over n ranks is
   * i * n(n-1)/2 + n. */
  long* mine = malloc(kVector * sizeof(long));
  long* sum = malloc(kVector * sizeof(long));
  if (!mine || !sum) fail("out of memory", 0);
  for (long round = 0; round < iters / 10 + 1; ++round) {
    for (long i = 0; i < kVector; ++i) mine[i] = (long)rank * i + 1 + round;
    MPI_Allreduce(mine, sum, kVector, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (long i = 0; i < kVector; ++i)
      if (sum[i] != i * size * (size - 1) / 2 + (long)size * (1 + round))
        fail("allreduce: a wrong sum", i);
  }
  if (rank == 0)
    printf("allreduce of %d longs over %d ranks: %ld rounds right\n", kVector, size,
           iters / 10 + 1);
  free(mine);
  free(sum);
  MPI_Finalize();
  return 0;
}
