/*
** spawn_time.c: wall time of whole commands, for bench_cli.sh. Each
** command is started with posix_spawn (as lash and the agent floor start
** theirs), its stdout and stderr to /dev/null, and reaped; the commands
** take turns N times, so load from elsewhere on the machine hits them
** alike. Prints one line per command: its median and p90 in ms.
**
** usage: spawn_time N CMD1... [:: CMD2...]...
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n, ncmd = 0, i, j, devnull;
  char **cmds[64];
  double *t[64];
  posix_spawn_file_actions_t fa;
  if (argc < 3 || (n = atoi(argv[1])) < 1) {
    fprintf(stderr, "usage: %s N CMD... [:: CMD...]...\n", argv[0]);
    return 2;
  }
  cmds[ncmd++] = argv + 2;
  for (i = 2; i < argc; i++)
    if (strcmp(argv[i], "::") == 0 && ncmd < 64) {
      argv[i] = NULL;
      cmds[ncmd++] = argv + i + 1;
    }
  devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, devnull, 1);
  posix_spawn_file_actions_adddup2(&fa, devnull, 2);
  for (j = 0; j < ncmd; j++) t[j] = calloc((size_t)n, sizeof(double));
  for (i = 0; i < n; i++)
    for (j = 0; j < ncmd; j++) {
      pid_t pid;
      int st;
      double s = now_ms();
      if (posix_spawnp(&pid, cmds[j][0], &fa, NULL, cmds[j], environ)) {
        perror(cmds[j][0]);
        return 1;
      }
      waitpid(pid, &st, 0);
      t[j][i] = now_ms() - s;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "spawn_time: %s failed (status %d)\n", cmds[j][0], st);
        return 1;
      }
    }
  for (j = 0; j < ncmd; j++) {
    qsort(t[j], (size_t)n, sizeof(double), cmp);
    printf("%.3f %.3f\n", (t[j][(n - 1) / 2] + t[j][n / 2]) / 2, t[j][(n * 9) / 10 < n ? (n * 9) / 10 : n - 1]);
  }
  return 0;
}
