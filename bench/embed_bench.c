/*
** embed_bench.c: the embedding benchmarks of bench_embed.sh, a C host on
** lash.h against bench/agent_server.c (an instant loopback Chat
** Completions server: K calls to `echo`, then "done"). `echo` is a host
** tool registered from C.
**
**   embed_bench frame PORT N K SECONDS HZ
**     N runs always in flight (a finished run is replaced at once); a frame
**     loop at HZ calls lash_step(S, 1) once per frame and times each call.
**     Prints: samples p50_ms p99_ms max_ms agent_steps_per_s, then the
**     same percentiles of the thread's CPU time inside lash_step (which
**     leaves out time the OS gave to other processes)
**   embed_bench conc PORT N K [ROUNDS]
**     N runs started together, echo answered at once, stepped with
**     lash_step(S, -1) until all end; ROUNDS times (default 1). Prints:
**     seconds agent_steps_per_s lash_steps_per_s
**   embed_bench idle PORT N K
**     N runs started together; echo holds every call, so the runs sit idle
**     waiting for the host. Prints the resident memory and Lua heap added
**     per idle run, in KiB: rss_kib_per_run lua_kib_per_run
**
** An agent step is one model round trip plus its tool call.
*/
#define _GNU_SOURCE
#include "lash.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
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

static void die(lash_State *S, const char *what) {
  fprintf(stderr, "embed_bench: %s: %s\n", what, lash_errmsg(S));
  exit(1);
}

static int hold;                  /* idle mode: keep the calls */
static lash_Call **held;
static int nheld;

static void echo(lash_Call *call, const char *args, void *ud) {
  (void)ud;
  if (hold) {
    held[nheld++] = call;
    return;
  }
  lash_call_return(call, args);
}

static lash_State *open_bench(const char *port, int k) {
  char spec[512];
  lash_State *S = lash_open(NULL);
  if (!S) die(S, "open");
  snprintf(spec, sizeof spec,
           "return { model = { 'openai:bench', base_url = 'http://127.0.0.1:%s/v1', "
           "api_key = 'bench' }, instructions = 'Call echo until told to stop.', "
           "limits = { max_steps = %d } }", port, k + 1);
  if (lash_load_spec_string(S, spec, "bench") != LASH_OK) die(S, "spec");
  if (lash_register_tool(S, "echo", "Echo the text.",
                         "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":"
                         "\"string\"}},\"required\":[\"text\"]}", echo, NULL) != LASH_OK)
    die(S, "register");
  return S;
}

static lash_Run *start(lash_State *S) {
  lash_Run *run;
  if (lash_run_start(S, "go", NULL, &run) != LASH_OK) die(S, "run_start");
  return run;
}

static void check_done(lash_State *S, lash_Run *run) {
  const char *out = NULL, *json = NULL;
  lash_run_result(run, &out, &json);
  if (lash_run_status(run) != LASH_RUN_DONE || !out || strcmp(out, "done") != 0) {
    fprintf(stderr, "embed_bench: a run ended with status %d: %s\n",
            lash_run_status(run), json ? json : "(no result)");
    (void)S;
    exit(1);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int frame_mode(const char *port, int n, int k, double seconds, int hz) {
  lash_State *S = open_bench(port, k);
  lash_Run **runs = calloc((size_t)n, sizeof *runs);
  size_t cap = (size_t)(seconds * hz) + 16, ns = 0;
  int64_t *samples = malloc(cap * sizeof *samples);
  int64_t *cpu = malloc(cap * sizeof *cpu);
  int64_t period = 1000000000ll / hz, tick, t_end, t0;
  long finished = 0;
  int i;
  /* warm up: one run loads the modules and opens a connection */
  runs[0] = start(S);
  while (lash_run_status(runs[0]) < LASH_RUN_DONE) lash_step(S, -1);
  check_done(S, runs[0]);
  lash_run_free(runs[0]);
  for (i = 0; i < n; i++) runs[i] = start(S);
  t0 = tick = now_ns();
  t_end = t0 + (int64_t)(seconds * 1e9);
  while (now_ns() < t_end && ns < cap) {
    int64_t a = now_ns(), b, ca = cpu_ns();
    struct timespec next;
    if (lash_step(S, 1) < 0) die(S, "step");
    b = now_ns();
    cpu[ns] = cpu_ns() - ca;
    samples[ns++] = b - a;
    for (i = 0; i < n; i++) {
      if (lash_run_status(runs[i]) >= LASH_RUN_DONE) {
        check_done(S, runs[i]);
        lash_run_free(runs[i]);
        finished++;
        runs[i] = start(S);
      }
    }
    tick += period;
    next.tv_sec = (time_t)(tick / 1000000000ll);
    next.tv_nsec = (long)(tick % 1000000000ll);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  {
    double wall = (double)(now_ns() - t0) / 1e9;
    qsort(samples, ns, sizeof *samples, cmp_i64);
    qsort(cpu, ns, sizeof *cpu, cmp_i64);
    printf("%zu %.3f %.3f %.3f %.0f %.3f %.3f %.3f\n", ns, samples[ns / 2] / 1e6,
           samples[(size_t)((double)ns * 0.99)] / 1e6, samples[ns - 1] / 1e6,
           (double)finished * (k + 1) / wall, cpu[ns / 2] / 1e6,
           cpu[(size_t)((double)ns * 0.99)] / 1e6, cpu[ns - 1] / 1e6);
  }
  for (i = 0; i < n; i++) lash_run_free(runs[i]);
  lash_close(S);
  free(runs);
  free(samples);
  free(cpu);
  return 0;
}

static int conc_mode(const char *port, int n, int k, int rounds) {
  lash_State *S = open_bench(port, k);
  lash_Run **runs = calloc((size_t)n, sizeof *runs);
  long steps = 0;
  int64_t t0;
  double wall;
  int i;
  runs[0] = start(S);
  while (lash_run_status(runs[0]) < LASH_RUN_DONE) lash_step(S, -1);
  check_done(S, runs[0]);
  lash_run_free(runs[0]);
  t0 = now_ns();
  for (int r = 0; r < rounds; r++) {
    for (i = 0; i < n; i++) runs[i] = start(S);
    while (lash_step(S, -1) > 0) steps++;
    for (i = 0; i < n; i++) {
      check_done(S, runs[i]);
      lash_run_free(runs[i]);
    }
  }
  wall = (double)(now_ns() - t0) / 1e9;
  printf("%.6f %.0f %.0f\n", wall, (double)n * rounds * (k + 1) / wall, steps / wall);
  lash_close(S);
  free(runs);
  return 0;
}

static int idle_mode(const char *port, int n, int k) {
  lash_State *S = open_bench(port, k);
  lash_Run **runs = calloc((size_t)n, sizeof *runs);
  long rss0, rss1;
  size_t lua0, lua1;
  int i;
  held = calloc((size_t)n, sizeof *held);
  runs[0] = start(S);
  while (lash_run_status(runs[0]) < LASH_RUN_DONE) lash_step(S, -1);
  check_done(S, runs[0]);
  lash_run_free(runs[0]);
  lash_dostring(S, "collectgarbage() collectgarbage()", "=gc");
  rss0 = rss_kib();
  lua0 = lash_memory_used(S);
  hold = 1;
  for (i = 0; i < n; i++) runs[i] = start(S);
  while (nheld < n)
    if (lash_step(S, -1) < 0) die(S, "step");
  lash_dostring(S, "collectgarbage() collectgarbage()", "=gc");
  rss1 = rss_kib();
  lua1 = lash_memory_used(S);
  printf("%.1f %.1f\n", (double)(rss1 - rss0) / n, (double)(lua1 - lua0) / 1024.0 / n);
  /* let them finish, to check they were healthy */
  hold = 0;
  for (i = 0; i < nheld; i++) lash_call_return(held[i], "{\"text\":\"hi\"}");
  while (lash_step(S, -1) > 0) {}
  for (i = 0; i < n; i++) {
    check_done(S, runs[i]);
    lash_run_free(runs[i]);
  }
  lash_close(S);
  free(runs);
  free(held);
  return 0;
}

int main(int argc, char **argv) {
  struct rlimit rl;
  /* 1,000 runs hold 1,000 connections */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (argc >= 7 && strcmp(argv[1], "frame") == 0)
    return frame_mode(argv[2], atoi(argv[3]), atoi(argv[4]), atof(argv[5]), atoi(argv[6]));
  if (argc >= 5 && strcmp(argv[1], "conc") == 0)
    return conc_mode(argv[2], atoi(argv[3]), atoi(argv[4]), argc > 5 ? atoi(argv[5]) : 1);
  if (argc >= 5 && strcmp(argv[1], "idle") == 0)
    return idle_mode(argv[2], atoi(argv[3]), atoi(argv[4]));
  fprintf(stderr, "usage: embed_bench frame PORT N K SECONDS HZ | conc PORT N K [ROUNDS] | idle PORT N K\n");
  return 2;
}
