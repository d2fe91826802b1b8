/*
** agent_baseline.c: the "bare C loop" of bench_agent.sh. Does the same
** work as N lash agent runs of K tool steps, minus the harness: N
** concurrent loops, each POSTing a growing Chat Completions body to the
** bench server (libcurl multi, one thread), spawning `echo hi` with its
** stdout on a pipe for every tool call, reading it, reaping it, and
** sending the next request, until the server answers without a tool call.
** Prints the wall time in seconds. With MODE "nospawn" the tool answers
** "hi" itself, with no process (the baseline of the harness's own cost).
**
** usage: agent_baseline PORT N K [MODE]
*/
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

typedef struct run {
  CURL *easy;
  buf history;      /* the messages so far, without the brackets */
  buf body;         /* the request */
  buf resp;
  int step;
  int pipe_fd;      /* -1 unless a tool is running */
  pid_t pid;
  int done;
  struct curl_slist *headers;
} run;

static char url[128];
static int nospawn;

static void put(buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static size_t on_data(char *p, size_t sz, size_t nm, void *ud) {
  put(ud, p, sz * nm);
  return sz * nm;
}

static const char tools_json[] =
  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"echo\",\"description\":"
  "\"Print text with echo.\",\"parameters\":{\"type\":\"object\",\"properties\":"
  "{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}}}]";

static void start_request(CURLM *multi, run *r) {
  r->body.n = 0;
  puts_(&r->body, "{\"messages\":[{\"content\":\"Call echo until told to stop.\",\"role\":\"system\"},"
                  "{\"content\":\"go\",\"role\":\"user\"}");
  put(&r->body, r->history.p ? r->history.p : "", r->history.n);
  puts_(&r->body, "],\"model\":\"bench\",");
  puts_(&r->body, tools_json);
  puts_(&r->body, "}");
  r->resp.n = 0;
  curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body.p);
  curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long)r->body.n);
  curl_multi_add_handle(multi, r->easy);
}

static int spawn_echo(run *r) {
  int fds[2];
  posix_spawn_file_actions_t fa;
  char *argv[] = {"echo", "hi", NULL};
  if (pipe2(fds, O_CLOEXEC)) return -1;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  if (posix_spawnp(&r->pid, "echo", &fa, NULL, argv, environ)) return -1;
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  r->pipe_fd = fds[0];
  return 0;
}

static void tool_done(CURLM *multi, run *r, const char *out, size_t n) {
  char msg[512];
  int status;
  if (r->pid > 0) {
    waitpid(r->pid, &status, 0);
    close(r->pipe_fd);
  }
  r->pipe_fd = -1;
  snprintf(msg, sizeof msg,
    ",{\"content\":null,\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":"
    "\"{\\\"text\\\":\\\"hi\\\"}\",\"name\":\"echo\"},\"id\":\"call_%d\",\"type\":\"function\"}]}"
    ",{\"content\":\"%.*s\\n\",\"role\":\"tool\",\"tool_call_id\":\"call_%d\"}",
    r->step, (int)(n > 0 ? n - 1 : 0), out, r->step);
  puts_(&r->history, msg);
  r->step++;
  start_request(multi, r);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  int n, k, i, left;
  run *runs;
  CURLM *multi;
  struct curl_waitfd *wfds;
  int *widx;
  double t0;
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT N K\n", argv[0]);
    return 2;
  }
  snprintf(url, sizeof url, "http://127.0.0.1:%s/v1/chat/completions", argv[1]);
  n = atoi(argv[2]);
  k = atoi(argv[3]);
  nospawn = argc > 4 && strcmp(argv[4], "nospawn") == 0;
  (void)k;  /* the server decides when to stop */
  curl_global_init(CURL_GLOBAL_DEFAULT);
  multi = curl_multi_init();
  runs = calloc((size_t)n, sizeof *runs);
  wfds = calloc((size_t)n, sizeof *wfds);
  widx = calloc((size_t)n, sizeof *widx);
  t0 = now();
  for (i = 0; i < n; i++) {
    run *r = &runs[i];
    r->pipe_fd = -1;
    r->easy = curl_easy_init();
    r->headers = curl_slist_append(NULL, "content-type: application/json");
    r->headers = curl_slist_append(r->headers, "authorization: Bearer bench");
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, &r->resp);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    start_request(multi, r);
  }
  left = n;
  while (left > 0) {
    int running, nw = 0, msgs;
    CURLMsg *m;
    curl_multi_perform(multi, &running);
    while ((m = curl_multi_info_read(multi, &msgs)) != NULL) {
      run *r;
      if (m->msg != CURLMSG_DONE) continue;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
      curl_multi_remove_handle(multi, m->easy_handle);
      if (m->data.result != CURLE_OK) {
        fprintf(stderr, "agent_baseline: %s\n", curl_easy_strerror(m->data.result));
        return 1;
      }
      if (r->resp.p && strstr(r->resp.p, "\"tool_calls\":[") && nospawn) {
        r->pid = -1;
        tool_done(multi, r, "hi\n", 3);
      } else if (r->resp.p && strstr(r->resp.p, "\"tool_calls\":[")) {
        if (spawn_echo(r)) {
          perror("agent_baseline: spawn");
          return 1;
        }
      } else {
        r->done = 1;
        left--;
      }
    }
    for (i = 0; i < n; i++) {
      if (runs[i].pipe_fd >= 0) {
        wfds[nw].fd = runs[i].pipe_fd;
        wfds[nw].events = CURL_WAIT_POLLIN;
        wfds[nw].revents = 0;
        widx[nw] = i;
        nw++;
      }
    }
    if (left == 0) break;
    curl_multi_poll(multi, wfds, (unsigned)nw, 1000, NULL);
    for (i = 0; i < nw; i++) {
      if (wfds[i].revents) {
        run *r = &runs[widx[i]];
        char out[256], rest[256];
        ssize_t got = read(r->pipe_fd, out, sizeof out);
        /* drain to EOF: echo writes once, then exits */
        while (got > 0 && read(r->pipe_fd, rest, sizeof rest) > 0) {}
        tool_done(multi, r, out, got > 0 ? (size_t)got : 0);
      }
    }
  }
  printf("%.6f\n", now() - t0);
  return 0;
}
