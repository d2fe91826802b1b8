/*
** main.c: the `lash` command. Opens a lash state and hands the command
** line to lua/lash/cli.lua; errors print a traceback and exit non-zero.
** The only option handled here is --memory-limit, because the budget must
** be in place before the Lua state exists.
**
** It also owns the process's signals, which the library never touches:
** cli.lua asks for them (host.trap) and SIGINT, SIGTERM, SIGHUP, SIGQUIT and
** SIGPIPE are then read on lash's loop through a signalfd. SIGPIPE (the
** reader of stdout went away, as with `| head -1`) stops lash quietly; a
** blocked SIGPIPE also turns the failed write into EPIPE. The first cancels every task
** (runs unwind: owned sandboxes destroyed, holder marks released, commands
** killed) and arms the shutdown bound; the second signal, or the bound
** running out, aborts: every wait left fails at once, so what remains of
** the cleanup is skipped, and closing the state kills the jails still
** running. A watchdog alarm a little past the bound ends the process even
** if something never returns to the loop.
**
** `lash chat` also gets the terminal (host.term, src/8-cli/term.c): while it
** is open, SIGINT goes to the session (it cancels a turn) instead.
*/
#include "lash_lua.h"
#include "lauxlib.h"
#include "runtime.h"
#include "output.h"
#include "pool.h"
#include "term.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parse sizes like 512M, 2G, 65536. Returns 0 on success; refuses signs,
** junk and anything that does not fit in a size_t. */
static int parse_size(const char *s, size_t *out) {
  char *end;
  unsigned long long v;
  unsigned shift = 0;
  if (*s < '0' || *s > '9') return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end) return -1;
  if (v > (SIZE_MAX >> shift)) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

/* An error that escaped the CLI, on stderr: its message may carry text
** from outside (a spec, a server, a model), so on a terminal it goes
** through the one sanitizer (lash_term_visible). */
static void say_error(const char *msg) {
  size_t n = strlen(msg);
  char *safe;
  if (!isatty(2) || !(safe = malloc(lash_term_visible_size(msg, n) + 1))) {
    fprintf(stderr, "lash: %s\n", msg);
    return;
  }
  safe[lash_term_visible(msg, n, safe)] = '\0';
  fprintf(stderr, "lash: %s\n", safe);
  free(safe);
}

/* The CLI's signal state; lives in main's frame, reached through the
** host functions' upvalue and the watcher's data. */
typedef struct cli_signals {
  lash_signal sig;
  lash_timer bound;
  lash_loop *loop;
  lash_runtime *rt;
  cli_term *term;   /* host.term while open: SIGINT is the session's */
  uint64_t bound_ns;
  int watchdog_s;
  int signo;        /* the first signal caught, 0: none */
  int count;
  int started;
} cli_signals;

static const char *signame(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal";
  }
}

static void on_bound(lash_loop *loop, lash_timer *t) {
  cli_signals *cs = t->data;
  (void)loop;
  fprintf(stderr, "lash: cleanup is taking longer than the shutdown bound "
          "(%.0fs); exiting without finishing it\n", cs->bound_ns / 1e9);
  lash_runtime_abort(cs->rt);
}

static void on_signal(lash_loop *loop, lash_signal *s, int signo) {
  cli_signals *cs = s->data;
  if (cli_term_signal(cs->term, signo)) return;
  /* every later write to the closed pipe raises another SIGPIPE: only the
  ** first counts, or the cleanup it started would be cut short */
  if (signo == SIGPIPE && cs->count > 0) return;
  cs->count++;
  if (cs->count == 1) {
    cs->signo = signo;
    /* nobody reads what lash writes any more: no need to say anything */
    if (signo != SIGPIPE)
      fprintf(stderr, "\nlash: %s: stopping (cancelling, cleaning up for at "
              "most %.0fs; send it again to exit at once)\n", signame(signo),
              cs->bound_ns / 1e9);
    lash_runtime_cancel_tasks(cs->rt);
    lash_timer_start(loop, &cs->bound, cs->bound_ns, on_bound, cs);
    /* the last resort, outside the loop: SIGALRM's default action */
    alarm((unsigned)cs->watchdog_s);
  } else if (!lash_runtime_aborting(cs->rt)) {
    fprintf(stderr, "lash: %s again: exiting now, skipping the rest of the "
            "cleanup\n", signame(signo));
    lash_runtime_abort(cs->rt);
  }
}

/* host.trap(seconds): read SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE on
** the loop from now on, with `seconds` as the shutdown bound. Returns true,
** or nil and why. */
static int host_trap(lua_State *L) {
  cli_signals *cs = lua_touserdata(L, lua_upvalueindex(1));
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
  double secs = luaL_checknumber(L, 1);
  int rc;
  luaL_argcheck(L, secs > 0 && secs <= 86400, 1,
                "the shutdown bound must be between 0 and 86400 seconds");
  cs->bound_ns = (uint64_t)(secs * 1e9);
  cs->watchdog_s = (int)secs + 5;
  if (cs->started) {
    lua_pushboolean(L, 1);
    return 1;
  }
  cs->rt = lash_runtime_get(L);
  cs->loop = lash_runtime_loop(L);
  lash_timer_init(&cs->bound);
  rc = lash_signal_start(cs->loop, &cs->sig, sigs, 5, on_signal, cs);
  if (rc != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "cannot watch signals: %s", strerror(-rc));
    return 2;
  }
  cs->started = 1;
  lua_pushboolean(L, 1);
  return 1;
}

/* host.signal() -> signo, name of the first signal caught, or nil. */
static int host_signal(lua_State *L) {
  cli_signals *cs = lua_touserdata(L, lua_upvalueindex(1));
  if (!cs->signo) return 0;
  lua_pushinteger(L, cs->signo);
  lua_pushstring(L, signame(cs->signo));
  return 2;
}

static int run_cli(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  cli_signals *cs = lua_touserdata(L, 3);
  int i;
  lua_createtable(L, argc, 1);
  lua_pushstring(L, argv[0]);
  lua_rawseti(L, -2, 0);
  for (i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  lua_pushvalue(L, -1);
  lua_setglobal(L, "arg");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lash.cli");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "main");
  lua_pushvalue(L, -3);
  lua_createtable(L, 0, 3);
  lua_pushlightuserdata(L, cs);
  lua_pushcclosure(L, host_trap, 1);
  lua_setfield(L, -2, "trap");
  lua_pushlightuserdata(L, cs);
  lua_pushcclosure(L, host_signal, 1);
  lua_setfield(L, -2, "signal");
  cli_term_push(L, &cs->term);
  lua_setfield(L, -2, "term");
  lua_call(L, 2, 1);
  return 1;
}

/* A CLI run from a build tree (build/bin/lash, with ../../lua/lash/init.lua
** there) loads the tree's Lua modules, so a Lua edit needs no rebuild;
** installed, it uses those compiled into it. $LASH_LUA_DIR wins over both
** (the library reads it). */
static const char *tree_lua_dir(char *buf, size_t n) {
  char probe[PATH_MAX + 32];
  ssize_t len = readlink("/proc/self/exe", buf, n - 1);
  char *slash;
  if (len <= 0) return NULL;
  buf[len] = '\0';
  if (!(slash = strrchr(buf, '/'))) return NULL;
  *slash = '\0';
  if ((size_t)snprintf(probe, sizeof probe, "%s/../../lua/lash/init.lua", buf) >= sizeof probe ||
      access(probe, R_OK) != 0)
    return NULL;
  if ((size_t)(slash - buf) + sizeof "/../../lua" > n) return NULL;
  strcat(buf, "/../../lua");
  return buf;
}

int main(int argc, char **argv) {
  char tree[PATH_MAX];
  lash_Options opts;
  lash_State *S;
  lua_State *L;
  cli_signals cs;
  cli_pool pool;
  int i, j, code = 0;
  memset(&cs, 0, sizeof cs);
  memset(&pool, 0, sizeof pool);
  cs.sig.fd = -1;
  lash_options_init(&opts);
  /* the Lua heap's small blocks from the program's pool (cli/pool.c):
  ** freed by cli_pool_close once the state is gone */
  opts.alloc = cli_pool_alloc;
  opts.alloc_ud = &pool;
  if (!getenv("LASH_LUA_DIR") || !*getenv("LASH_LUA_DIR"))
    opts.lua_dir = tree_lua_dir(tree, sizeof tree);
  {
    const char *env = getenv("LASH_MEMORY_LIMIT");
    if (env && parse_size(env, &opts.memory_limit) != 0) {
      fprintf(stderr, "lash: LASH_MEMORY_LIMIT=%s is not a size (e.g. 512M)\n", env);
      return 2;
    }
  }
  /* strip --memory-limit N / --memory-limit=N before the CLI sees argv */
  for (i = 1, j = 1; i < argc; i++) {
    const char *v = NULL;
    if (strcmp(argv[i], "--") == 0) {
      while (i < argc) argv[j++] = argv[i++];
      break;
    }
    if (strcmp(argv[i], "--memory-limit") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "lash: --memory-limit needs a size (e.g. 512M)\n");
        return 2;
      }
      v = argv[++i];
    } else if (strncmp(argv[i], "--memory-limit=", 15) == 0) {
      v = argv[i] + 15;
    }
    if (v) {
      if (parse_size(v, &opts.memory_limit) != 0) {
        fprintf(stderr, "lash: --memory-limit %s is not a size (e.g. 512M)\n", v);
        return 2;
      }
      continue;
    }
    argv[j++] = argv[i];
  }
  argc = j;
  argv[argc] = NULL;
  S = lash_open(&opts);
  if (!S) {
    fprintf(stderr, "lash: cannot create a Lua state (out of memory)\n");
    cli_pool_close(&pool);
    return 1;
  }
  if (strcmp(lash_errmsg(S), "no error") != 0) {
    say_error(lash_errmsg(S));
    lash_close(S);
    cli_pool_close(&pool);
    return 1;
  }
  L = lash_lua(S);
  lua_pushcfunction(L, run_cli);
  lua_setglobal(L, "__lash_run_cli");
  {
    /* Call run_cli through the protected, traced path of lash_dostring by
    ** way of a tiny chunk, so a Lua error prints its traceback. */
    lua_pushinteger(L, argc);
    lua_setglobal(L, "__lash_argc");
    lua_pushlightuserdata(L, argv);
    lua_setglobal(L, "__lash_argv");
    lua_pushlightuserdata(L, &cs);
    lua_setglobal(L, "__lash_host");
    if (lash_dostring(S,
          "local run, argc, argv, host = __lash_run_cli, __lash_argc, __lash_argv, __lash_host\n"
          "__lash_run_cli, __lash_argc, __lash_argv, __lash_host = nil, nil, nil, nil\n"
          "__lash_exit = run(argc, argv, host)", "=lash") != LASH_OK) {
      say_error(lash_errmsg(S));
      code = cs.signo ? 128 + cs.signo : 1;
    } else {
      lua_getglobal(L, "__lash_exit");
      code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1)
           : lua_toboolean(L, -1) || lua_isnil(L, -1) ? 0 : 1;
      lua_pop(L, 1);
    }
  }
  /* Tasks still alive (an aborted cleanup) unwind here without waiting,
  ** and closing the Lua state kills the commands they were running. */
  lash_close(S);
  cli_pool_close(&pool);
  /* the loop is gone with S: only the fd and the mask are left to undo */
  lash_signal_stop(NULL, &cs.sig);
  return code;
}
