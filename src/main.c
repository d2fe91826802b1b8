/*
** main.c: the `lash` command. Opens a lash state and hands the command
** line to lua/lash/cli.lua; errors print a traceback and exit non-zero.
** The only option handled here is --memory-limit, because the budget must
** be in place before the Lua state exists.
*/
#include "lash_lua.h"
#include "lauxlib.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int run_cli(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
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
  lua_call(L, 1, 1);
  return 1;
}

int main(int argc, char **argv) {
  lash_Options opts;
  lash_State *S;
  lua_State *L;
  int i, j, code = 0;
  lash_options_init(&opts);
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
    return 1;
  }
  if (strcmp(lash_errmsg(S), "no error") != 0) {
    fprintf(stderr, "lash: %s\n", lash_errmsg(S));
    lash_close(S);
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
    if (lash_dostring(S,
          "local run, argc, argv = __lash_run_cli, __lash_argc, __lash_argv\n"
          "__lash_run_cli, __lash_argc, __lash_argv = nil, nil, nil\n"
          "__lash_exit = run(argc, argv)", "=lash") != LASH_OK) {
      fprintf(stderr, "lash: %s\n", lash_errmsg(S));
      code = 1;
    } else {
      lua_getglobal(L, "__lash_exit");
      code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1)
           : lua_toboolean(L, -1) || lua_isnil(L, -1) ? 0 : 1;
      lua_pop(L, 1);
    }
  }
  lash_close(S);
  return code;
}
