/* bench/http_baseline.c: the yardstick for bench_http.sh: N sequential GETs
** of URL with libcurl's easy interface and one reused handle; prints the
** seconds they took. With "nosignal", sets CURLOPT_NOSIGNAL as lash does
** (saving libcurl's per-transfer SIGPIPE handler swaps).
** Usage: http_baseline URL N [nosignal] */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t sink(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  *(size_t *)ud += size * n;
  return size * n;
}

int main(int argc, char **argv) {
  int i, n = argc > 2 ? atoi(argv[2]) : 10000;
  size_t got = 0;
  long code = 0;
  struct timespec a, b;
  CURL *e = curl_easy_init();
  if (argc < 2 || !e) return 2;
  curl_easy_setopt(e, CURLOPT_URL, argv[1]);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &got);
  if (argc > 3) curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (i = 0; i < n; i++)
    if (curl_easy_perform(e) != CURLE_OK ||
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code) || code != 200)
      return fprintf(stderr, "http_baseline: request %d failed\n", i), 1;
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.6f\n", (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
  curl_easy_cleanup(e);
  return 0;
}
