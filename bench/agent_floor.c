/*
** agent_floor.c: the floor of bench_steps.sh, one agent run with nothing
** but the work: POST a growing Chat Completions body to the bench server
** (bench/agent_server.c with TOOL run_command) with libcurl, and for every
** run_command call spawn `sh -c COMMAND` (after PREFIX..., e.g. a bare
** bwrap command line) with posix_spawn, as lash starts its commands
** (glibc's posix_spawn is a vfork-style clone: the child borrows the
** parent's memory instead of copying its page tables; with
** AGENT_FLOOR_FORK=1 in the environment, plain fork/exec instead, the old
** floor), read its output from a pipe, reap it, append the
** call and its result to the history, and repeat until the server answers
** without a tool call. The whole process is what is timed (by the caller).
**
** usage: agent_floor PORT [PREFIX...]
*/
#define _GNU_SOURCE
#include <curl/curl.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

/* s as a JSON string body (without quotes) */
static void put_escaped(buf *b, const char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(b, esc, 2);
    } else if (c == '\n') {
      put(b, "\\n", 2);
    } else if (c < 0x20 || c == 0x7f) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(b, esc, 6);
    } else {
      put(b, (const char *)&s[i], 1);
    }
  }
}

/* Read the JSON string starting after the opening quote at p into out,
** undoing \" \\ \n (all the bench server sends); returns past the close. */
static const char *get_string(const char *p, buf *out) {
  out->n = 0;
  while (*p && *p != '"') {
    if (*p == '\\' && p[1]) {
      char c = p[1] == 'n' ? '\n' : p[1];
      put(out, &c, 1);
      p += 2;
    } else {
      put(out, p++, 1);
    }
  }
  return *p ? p + 1 : p;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud) {
  put(ud, p, sz * nm);
  return sz * nm;
}

static const char tools_json[] =
  "\"tools\":[{\"function\":{\"description\":\"Run a shell command.\",\"name\":\"run_command\","
  "\"parameters\":{\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"],"
  "\"type\":\"object\"}},\"type\":\"function\"}]";

extern char **environ;
static int use_fork;

/* Run PREFIX... sh -c cmd; its stdout and stderr into out. */
static int run(char **prefix, int nprefix, const char *cmd, buf *out) {
  int fds[2], st, i;
  char chunk[4096];
  ssize_t got;
  pid_t pid;
  char **argv = calloc((size_t)nprefix + 4, sizeof *argv);
  for (i = 0; i < nprefix; i++) argv[i] = prefix[i];
  argv[i++] = "sh";
  argv[i++] = "-c";
  argv[i++] = (char *)cmd;
  argv[i] = NULL;
  if (pipe2(fds, O_CLOEXEC)) return -1;
  if (use_fork) {
    pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      execvp(argv[0], argv);
      _exit(127);
    }
  } else {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ)) return -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  close(fds[1]);
  out->n = 0;
  while ((got = read(fds[0], chunk, sizeof chunk)) > 0) put(out, chunk, (size_t)got);
  close(fds[0]);
  waitpid(pid, &st, 0);
  free(argv);
  return 0;
}

int main(int argc, char **argv) {
  char url[128];
  buf history = {0}, body = {0}, resp = {0}, args = {0}, cmd = {0}, id = {0}, out = {0};
  struct curl_slist *headers = NULL;
  CURL *easy;
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT [PREFIX...]\n", argv[0]);
    return 2;
  }
  snprintf(url, sizeof url, "http://127.0.0.1:%s/v1/chat/completions", argv[1]);
  use_fork = getenv("AGENT_FLOOR_FORK") && strcmp(getenv("AGENT_FLOOR_FORK"), "1") == 0;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  easy = curl_easy_init();
  headers = curl_slist_append(headers, "content-type: application/json");
  headers = curl_slist_append(headers, "authorization: Bearer bench");
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &resp);
  puts_(&history, "");
  for (;;) {
    const char *p;
    CURLcode rc;
    body.n = 0;
    puts_(&body, "{\"messages\":[{\"content\":\"Run the commands you are asked to.\",\"role\":\"system\"},"
                 "{\"content\":\"go\",\"role\":\"user\"}");
    put(&body, history.p, history.n);
    puts_(&body, "],\"model\":\"bench\",");
    puts_(&body, tools_json);
    puts_(&body, "}");
    resp.n = 0;
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.p);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)body.n);
    rc = curl_easy_perform(easy);
    if (rc != CURLE_OK) {
      fprintf(stderr, "agent_floor: %s\n", curl_easy_strerror(rc));
      return 1;
    }
    if (!resp.p || !strstr(resp.p, "\"tool_calls\":[")) break;
    p = strstr(resp.p, "\"tool_calls\":[{\"id\":\"");
    if (!p) { fprintf(stderr, "agent_floor: unexpected reply %s\n", resp.p); return 1; }
    get_string(p + strlen("\"tool_calls\":[{\"id\":\""), &id);
    p = strstr(p, "\"arguments\":\"");
    if (!p) { fprintf(stderr, "agent_floor: no arguments in %s\n", resp.p); return 1; }
    get_string(p + strlen("\"arguments\":\""), &args);
    p = strstr(args.p, "\"command\":\"");
    if (!p) { fprintf(stderr, "agent_floor: no command in %s\n", args.p); return 1; }
    get_string(p + strlen("\"command\":\""), &cmd);
    if (run(argv + 2, argc - 2, cmd.p, &out)) { perror("agent_floor: run"); return 1; }
    puts_(&history, ",{\"content\":null,\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"");
    put_escaped(&history, args.p, args.n);
    puts_(&history, "\",\"name\":\"run_command\"},\"id\":\"");
    put(&history, id.p, id.n);
    puts_(&history, "\",\"type\":\"function\"}]},{\"content\":\"");
    put_escaped(&history, out.p ? out.p : "", out.n);
    puts_(&history, "\",\"role\":\"tool\",\"tool_call_id\":\"");
    put(&history, id.p, id.n);
    puts_(&history, "\"}");
  }
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);
  curl_global_cleanup();
  return 0;
}
