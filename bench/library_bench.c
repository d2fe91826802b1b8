/*
** library_bench.c: what the self-contained liblash costs a host that links
** it (bench_library.sh): one fresh process per call.
**
**   library_bench N
**     Prints: first_open_ms second_open_ms rss_before_kib rss_first_kib
**     rss_per_state_kib heap_kib
**     first_open_ms: the process's first lash_open(NULL) (cold: the
**     library's pages, Lua's standard libraries and lash's modules loaded
**     from the bytecode compiled in); second_open_ms: the next one;
**     rss_first_kib: resident memory the first state added; then N more
**     states are opened and rss_per_state_kib is what each added;
**     heap_kib: one state's Lua heap (lash_memory_used).
*/
#define _GNU_SOURCE
#include "lash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static lash_State *open_checked(void) {
  lash_State *S = lash_open(NULL);
  if (!S || lash_dostring(S, "return require('lash') and nil", "=bench") != LASH_OK) {
    fprintf(stderr, "library_bench: %s\n", S ? lash_errmsg(S) : "out of memory");
    exit(1);
  }
  return S;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100, i;
  lash_State *first, *second, **more;
  long rss0, rss1, rss2;
  double t0, t1, t2;
  if (n < 1) n = 1;
  more = calloc((size_t)n, sizeof *more);
  rss0 = rss_kib();
  t0 = now_ms();
  first = open_checked();
  t1 = now_ms();
  rss1 = rss_kib();
  second = open_checked();
  t2 = now_ms();
  rss2 = rss_kib();
  for (i = 0; i < n; i++) more[i] = open_checked();
  printf("%.3f %.3f %ld %ld %.1f %.1f\n", t1 - t0, t2 - t1, rss0, rss1 - rss0,
         (double)(rss_kib() - rss2) / n, lash_memory_used(first) / 1024.0);
  for (i = 0; i < n; i++) lash_close(more[i]);
  lash_close(second);
  lash_close(first);
  free(more);
  return 0;
}
