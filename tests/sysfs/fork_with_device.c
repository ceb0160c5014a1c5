/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that forks while its device is busy, as Python's
 * multiprocessing does in rdma-core's tests and MPI launchers do: a
 * thread opens and closes contexts of the device without pause (under
 * `uroce-run --sysfs` each close rewrites the device's sysfs counters),
 * while the main thread forks children one after another. Each child
 * opens the device itself, queries and closes it, and exits; a child
 * that has not exited within 10 s has hung on something the fork left
 * held, and is killed.
 *
 *   fork_with_device DEVICE CHILDREN [refused]
 *     prints "ok" and exits 0 when every child did so in time; else names
 *     the first that did not and exits 1. With "refused" each child must
 *     instead be refused the device at once (ibv_open_device fails with
 *     ENODEV), as a child of a program with a device of its own is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct ibv_device* device;
static atomic_bool stop;

static struct ibv_device* find_device(const char* name) {
  struct ibv_device** list = ibv_get_device_list(NULL);
  if (!list) return NULL;
  for (int i = 0; list[i]; ++i)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) return list[i];
  return NULL; /* the list is the program's until it exits */
}

static void* churn(void* arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    struct ibv_context* c = ibv_open_device(device);
    if (c) ibv_close_device(c);
  }
  return NULL;
}

enum { kUsed = 0, kRefused = 10 };

/* The child: the device again, as a program of its own. */
static int child(void) {
  struct ibv_context* c = ibv_open_device(device);
  if (!c) return errno == ENODEV ? kRefused : 2;
  struct ibv_device_attr attr;
  const int rc = ibv_query_device(c, &attr);
  ibv_close_device(c);
  return rc == 0 ? 0 : 3;
}

/* 0 when pid exited with `expect` within 10 s; else kills it and says
 * why. */
static int reap(pid_t pid, int n, int expect) {
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (int waited = 0; waited < 1000; ++waited) {
    int status;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == expect) return 0;
      fprintf(stderr, "fork_with_device: child %d ended with status %#x\n", n, status);
      return 1;
    }
    nanosleep(&tick, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  fprintf(stderr, "fork_with_device: child %d hung (killed after 10 s)\n", n);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "refused") != 0)) {
    fprintf(stderr, "usage: fork_with_device DEVICE CHILDREN [refused]\n");
    return 2;
  }
  const int expect = argc == 4 ? kRefused : kUsed;
  device = find_device(argv[1]);
  if (!device) {
    fprintf(stderr, "fork_with_device: no device %s\n", argv[1]);
    return 2;
  }
  /* The device open before the churn starts, as a program's is. */
  struct ibv_context* held = ibv_open_device(device);
  if (!held) {
    fprintf(stderr, "fork_with_device: cannot open %s\n", argv[1]);
    return 2;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, churn, NULL) != 0) return 2;
  const int children = atoi(argv[2]);
  int failed = 0;
  for (int n = 0; n < children && !failed; ++n) {
    const pid_t pid = fork();
    if (pid == 0) _exit(child());
    if (pid < 0) {
      perror("fork_with_device: fork");
      failed = 1;
      break;
    }
    failed = reap(pid, n, expect);
  }
  atomic_store(&stop, true);
  pthread_join(t, NULL);
  ibv_close_device(held);
  if (failed) return 1;
  printf("ok\n");
  return 0;
}
