/*
** test_http.c: closing a Lua state with HTTP requests in flight frees every
** libcurl allocation (counted through curl_global_init_mem), both through
** lua_close alone (finalizers) and through lash_close (cancellation first),
** and a run of requests leaves nothing behind. Needs /usr/bin/python3 for
** tests/servers/http_server.py; skips without it.
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "lash_lua.h"
#include "t.h"

int luaopen_lash_core(lua_State *L);

/* ---- counting allocator for libcurl (test-only process state) ---------- */

static long live_blocks;

typedef union { size_t n; max_align_t align; } hdr;

static void *c_malloc(size_t n) {
  hdr *h = malloc(sizeof *h + n);
  if (!h) return NULL;
  h->n = n;
  live_blocks++;
  return h + 1;
}
static void c_free(void *p) {
  if (!p) return;
  live_blocks--;
  free((hdr *)p - 1);
}
static void *c_realloc(void *p, size_t n) {
  hdr *h;
  if (!p) return c_malloc(n);
  h = realloc((hdr *)p - 1, sizeof *h + n);
  if (!h) return NULL;
  h->n = n;
  return h + 1;
}
static char *c_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = c_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}
static void *c_calloc(size_t k, size_t n) {
  void *p;
  if (n && k > SIZE_MAX / n) return NULL;
  p = c_malloc(k * n);
  if (p) memset(p, 0, k * n);
  return p;
}

/* ---- helpers ----------------------------------------------------------- */

static int port, server_pid;

static int start_server(FILE **proc) {
  char line[256];
  const char *p;
  *proc = popen("exec /usr/bin/python3 tests/servers/http_server.py "
                "--lifetime 60", "r");
  if (!*proc || !fgets(line, sizeof line, *proc)) return -1;
  p = strstr(line, "\"pid\": ");
  if (p) server_pid = atoi(p + 7);
  p = strstr(line, "\"port\": ");
  return p ? atoi(p + 8) : -1;
}

/* Lua code that leaves requests of every kind in flight. */
static void in_flight_code(char *buf, size_t n) {
  snprintf(buf, n,
    "local core = ...\n"
    "local http, task = core.http, core.task\n"
    "local base = 'http://127.0.0.1:%d'\n"
    "local got = 0\n"
    "for i = 1, 3 do task.spawn(function() http.request{url = base .. '/hang'} end) end\n"
    "task.spawn(function() http.request{url = base .. '/hang', http2_prior_knowledge = true} end)\n"
    "task.spawn(function() http.request{url = base .. '/chunked?n=1000&size=10&delay_ms=5',\n"
    "  on_chunk = function(c) got = got + #c end} end)\n"
    "task.spawn(function() http.request{url = base .. '/big?n=8000000',\n"
    "  on_chunk = function(c) got = got + #c; task.sleep(1) end} end)\n"
    "task.sleep(0.3)\n"
    "assert(got > 0, 'the streams should have started')\n", port);
}

static int run_chunk(lua_State *L, const char *code) {
  int rc;
  if (luaL_loadstring(L, code) != LUA_OK) return -1;
  luaL_requiref(L, "lash.core", luaopen_lash_core, 0);
  rc = lua_pcall(L, 1, 0, 0);
  if (rc != LUA_OK) printf("# lua error: %s\n", lua_tostring(L, -1));
  return rc;
}

int main(void) {
  FILE *server = NULL;
  char code[2048];
  long base;

  if (access("/usr/bin/python3", X_OK) != 0) {
    printf("ok 1 # SKIP needs /usr/bin/python3 for the test server\n");
    printf("1..1\n");
    return 0;
  }
  if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, c_malloc, c_free, c_realloc,
                           c_strdup, c_calloc) != CURLE_OK) {
    printf("not ok 1 - curl_global_init_mem\n1..1\n");
    return 1;
  }
  port = start_server(&server);
  T_OK(port > 0, "the test server starts");
  if (port <= 0) return T_DONE();
  base = live_blocks;

  { /* lua_close alone: the finalizers of the ops, the context and the
    ** runtime release everything in order. */
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    in_flight_code(code, sizeof code);
    T_EQ_INT(run_chunk(L, code), LUA_OK, "requests in flight (lua_close)");
    T_OK(live_blocks > base, "libcurl holds memory while they run");
    lua_close(L);
    T_EQ_INT(live_blocks, base, "lua_close frees every libcurl allocation");
  }

  { /* lash_close: tasks are cancelled (ops removed from the multi), then
    ** the state is closed. */
    lash_State *S = lash_open(NULL);
    lua_State *L = S ? lash_lua(S) : NULL;
    T_OK(L != NULL, "lash_open");
    if (L) {
      in_flight_code(code, sizeof code);
      T_EQ_INT(run_chunk(L, code), LUA_OK, "requests in flight (lash_close)");
      lash_close(S);
      T_EQ_INT(live_blocks, base, "lash_close frees every libcurl allocation");
    }
  }

  { /* Many completed requests, buffered and streamed, ok and failing,
    ** leave nothing behind but the pool, which closing frees. */
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    snprintf(code, sizeof code,
      "local core = ...\n"
      "local http = core.http\n"
      "local base = 'http://127.0.0.1:%d'\n"
      "for i = 1, 200 do\n"
      "  local s, h, b = http.request{url = base .. '/echo', body = ('x'):rep(i)}\n"
      "  assert(s == 200 and #b > i)\n"
      "  http.request{url = base .. '/chunked?n=3', on_chunk = function() end}\n"
      "  assert(not pcall(http.request, {url = base .. '/drop'}))\n"
      "  assert(not pcall(http.request, {url = base .. '/big?n=5000', max_body_bytes = 100}))\n"
      "  assert(not pcall(http.request, {url = base .. '/chunked?n=5',\n"
      "    on_chunk = function() error('stop') end}))\n"
      "end\n"
      "collectgarbage()\n", port);
    T_EQ_INT(run_chunk(L, code), LUA_OK, "1000 requests of every outcome");
    lua_close(L);
    T_EQ_INT(live_blocks, base, "nothing is left after closing");
  }

  if (server_pid > 0) kill(server_pid, SIGTERM);
  pclose(server);
  curl_global_cleanup();
  return T_DONE();
}
