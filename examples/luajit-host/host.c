/*
** host.c: a C host that carries LuaJIT and lash in one process and uses
** both. It opens a LuaJIT state and runs Lua in it (its own scripts),
** then opens a lash state, registers a C tool that calls into the LuaJIT
** state, and runs an agent on lash's scripted offline `test` model (it
** calls every tool once, then answers with a JSON summary of the
** results). LuaJIT is used again after lash ran.
**
**   cc host.c $(pkg-config --cflags --libs lash) \
**      $(pkg-config --cflags --libs luajit) -o host
**
** LuaJIT's lua_* and lash's Lua 5.4 never meet: liblash carries its own
** Lua, hidden, and exports nothing but lash_*. Before that, this program
** crashed in lash_open (lash's lua_* calls bound to LuaJIT's).
*/
#include "lash.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <stdio.h>
#include <string.h>

static const char *jit_version(lua_State *J) {
  static char v[64];
  lua_getglobal(J, "jit");
  lua_getfield(J, -1, "version");
  snprintf(v, sizeof v, "%s", lua_isstring(J, -1) ? lua_tostring(J, -1) : "?");
  lua_pop(J, 2);
  return v;
}

/* The tool: ask the LuaJIT side for a player's score. */
static void score(lash_Call *call, const char *args_json, void *ud) {
  lua_State *J = ud;
  char text[160];
  (void)args_json;
  lua_getglobal(J, "score_of");
  lua_pushstring(J, "ada");
  if (lua_pcall(J, 1, 1, 0) != 0) {
    lash_call_fail(call, lua_tostring(J, -1));
    lua_pop(J, 1);
    return;
  }
  snprintf(text, sizeof text, "ada has %d points (from %s)",
           (int)lua_tointeger(J, -1), jit_version(J));
  lua_pop(J, 1);
  lash_call_return(call, text);
}

static const char *kSpec =
  "return { name = 'scorekeeper', model = 'test', instructions = 'Answer briefly.' }";

int main(void) {
  lua_State *J = luaL_newstate();
  lash_State *S;
  lash_Run *run = NULL;
  const char *out = NULL;
  int rc = 1;
  if (!J) return 1;
  luaL_openlibs(J);
  if (luaL_dostring(J, "local t = {} for i = 1, 100 do t[i] = i * 2 end\n"
                       "scores = { ada = #t + t[21] }\n"
                       "function score_of(who) return scores[who] end\n"
                       "return jit and jit.version or 'no jit'")) {
    fprintf(stderr, "luajit: %s\n", lua_tostring(J, -1));
    return 1;
  }
  printf("luajit: %s\n", lua_tostring(J, -1));
  lua_pop(J, 1);

  S = lash_open(NULL);
  if (!S || lash_load_spec_string(S, kSpec, "scorekeeper.lua") != LASH_OK ||
      lash_register_tool(S, "score", "The player's score.",
                         "{\"type\":\"object\",\"properties\":{}}", score, J) != LASH_OK) {
    fprintf(stderr, "lash: %s\n", S ? lash_errmsg(S) : "out of memory");
    goto done;
  }
  if (lash_run_start(S, "What is ada's score?", NULL, &run) != LASH_OK || lash_run(S) < 0) {
    fprintf(stderr, "lash: %s\n", lash_errmsg(S));
    goto done;
  }
  if (lash_run_result(run, &out, NULL) != LASH_OK || lash_run_status(run) != LASH_RUN_DONE) {
    fprintf(stderr, "lash: the run ended with status %d\n", lash_run_status(run));
    goto done;
  }
  printf("lash %s: %s\n", lash_version(), out ? out : "(no answer)");

  /* LuaJIT is still fine after lash's work. */
  if (luaL_dostring(J, "scores.ada = scores.ada + 1 return scores.ada")) {
    fprintf(stderr, "luajit: %s\n", lua_tostring(J, -1));
    goto done;
  }
  printf("luajit after lash: %d\n", (int)lua_tointeger(J, -1));
  rc = 0;
done:
  lash_run_free(run);
  lash_close(S);
  lua_close(J);
  return rc;
}
