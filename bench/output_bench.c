/*
** output_bench.c: throughput and memory of output shaping (src/1-base/output.c),
** driven by bench/bench_output.sh.
**
**   output_bench shape MIB CHUNK_KIB CAP   feed MIB MiB of command-like
**       output (lines of varying length, some UTF-8) through a tail ring of
**       CAP bytes in CHUNK_KIB KiB chunks, then repair and truncate what it
**       kept as run_command does (tail, 2000 lines, CAP bytes);
**   output_bench utf8 MIB                  validate MIB MiB of UTF-8 text;
**   output_bench trunc ITERS CAP           repair + truncate + render a
**       CAP-byte text ITERS times (the per-stream work after the ring).
** Prints "seconds bytes vmrss_kib vmhwm_kib" on one line. The input is one
** chunk, generated up front and varied per feed, so memory is the ring's
** and not the input's.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* VmRSS and VmHWM (peak) of this process, in KiB. */
static void memory(long *rss, long *hwm) {
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  *rss = *hwm = -1;
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) *rss = strtol(line + 6, NULL, 10);
    if (strncmp(line, "VmHWM:", 6) == 0) *hwm = strtol(line + 6, NULL, 10);
  }
  fclose(f);
}

/* Lines of 10-150 bytes, about one in eight with multibyte characters. */
static void fill(char *buf, size_t n) {
  static const char *words[] = {"build", "ok", "warning:", "src/output.c:42", "\xc3\xa9t\xc3\xa9",
                                "\xe2\x82\xac", "test", "passed", "0x7ffd", "linking"};
  size_t i = 0, line = 0;
  unsigned seed = 12345;
  while (i < n) {
    size_t want = 10 + (seed = seed * 1103515245u + 12345u) % 140, at = 0;
    while (at < want && i < n) {
      const char *w = words[(seed = seed * 1103515245u + 12345u) >> 16 & 7];
      size_t k = strlen(w);
      if ((line & 7) != 0 && (unsigned char)w[0] >= 0x80) w = "plain", k = 5;
      if (i + k + 1 >= n) break;
      memcpy(buf + i, w, k);
      buf[i + k] = ' ';
      i += k + 1;
      at += k + 1;
    }
    if (i < n) buf[i++] = '\n';
    line++;
  }
}

static int shape(size_t mib, size_t chunk_kib, size_t cap) {
  size_t chunk = chunk_kib * 1024, total = mib << 20, fed = 0, len, rlen, out = 0;
  char *buf = malloc(chunk), *fixed;
  const char *kept;
  lash_ring r;
  lash_trunc_opts o = {2000, 0, LASH_TRUNC_TAIL, 0};
  lash_trunc t;
  double t0, t1;
  long rss, hwm;
  if (!buf) return 1;
  fill(buf, chunk);
  t0 = now();
  lash_ring_init(&r, cap);
  while (fed < total) {
    size_t n = total - fed < chunk ? total - fed : chunk;
    buf[fed / chunk % (chunk - 1)] ^= 1;       /* no two chunks alike */
    if (lash_ring_feed(&r, buf, n) != 0) return 1;
    fed += n;
  }
  kept = lash_ring_view(&r, &len);
  fixed = malloc(lash_utf8_repaired_size(kept, len) + 1);
  rlen = lash_utf8_repair(kept, len, fixed);
  o.max_bytes = cap;
  o.already_truncated = lash_ring_dropped(&r);
  lash_truncate(fixed, rlen, &o, &t);
  {
    char *res = malloc(lash_trunc_size(&t));
    out = lash_trunc_render(fixed, &t, res);
    free(res);
  }
  t1 = now();
  memory(&rss, &hwm);
  printf("%.6f %zu %ld %ld %zu\n", t1 - t0, fed, rss, hwm, out);
  free(fixed);
  lash_ring_free(&r);
  free(buf);
  return 0;
}

/* Repair, truncate and render a cap-sized text `iters` times: the work done
** once per stream after the ring. */
static int trunc_loop(size_t iters, size_t cap) {
  char *text = malloc(cap), *fixed = malloc(cap * 3), *res = malloc(cap + 128);
  lash_trunc_opts o = {2000, 0, LASH_TRUNC_TAIL, 1};
  lash_trunc t;
  size_t i, out = 0;
  double t0, t1;
  long rss, hwm;
  if (!text || !fixed || !res) return 1;
  o.max_bytes = cap - 1;                       /* the cap fires every time */
  fill(text, cap);
  t0 = now();
  for (i = 0; i < iters; i++) {
    size_t n = lash_utf8_repair(text, cap, fixed);
    lash_truncate(fixed, n, &o, &t);
    out += lash_trunc_render(fixed, &t, res);
    text[i % cap] ^= 1;
  }
  t1 = now();
  memory(&rss, &hwm);
  printf("%.6f %zu %ld %ld %zu\n", t1 - t0, iters, rss, hwm, out);
  free(text);
  free(fixed);
  free(res);
  return 0;
}

static int utf8(size_t mib) {
  size_t chunk = 1 << 20, total = mib << 20, done = 0, ok = 0;
  char *buf = malloc(chunk);
  double t0, t1;
  long rss, hwm;
  if (!buf) return 1;
  fill(buf, chunk);
  t0 = now();
  while (done < total) {
    ok += lash_utf8_valid(buf, chunk);
    done += chunk;
  }
  t1 = now();
  memory(&rss, &hwm);
  printf("%.6f %zu %ld %ld %zu\n", t1 - t0, done, rss, hwm, ok);
  free(buf);
  return ok == total / chunk ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "shape") == 0)
    return shape(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10), strtoul(argv[4], NULL, 10));
  if (argc == 3 && strcmp(argv[1], "utf8") == 0) return utf8(strtoul(argv[2], NULL, 10));
  if (argc == 4 && strcmp(argv[1], "trunc") == 0)
    return trunc_loop(strtoul(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
  fprintf(stderr, "usage: output_bench shape MIB CHUNK_KIB CAP | utf8 MIB | trunc ITERS CAP\n");
  return 2;
}
