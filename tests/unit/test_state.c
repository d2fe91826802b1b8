/* test_state.c: the embedding API of lash.h (open, run code, step, budget,
** close with tasks in flight, misuse). */
#include "lash_lua.h"
#include "t.h"

#include <string.h>

static int logged;
static int cleaned_up;
/* Called from a task's __close: proves lash_close unwound it. */
static int note_cleanup(lua_State *L) { (void)L; cleaned_up++; return 0; }
static void on_log(void *ud, int level, const char *msg) { (void)ud; (void)level; (void)msg; logged++; }

int main(void) {
  lash_Options o;
  lash_State *S;
  int rc, steps = 0;

  S = lash_open(NULL);
  T_OK(S != NULL, "open with default options");
  T_EQ_STR(lash_errmsg(S), "no error", "no error after open");
  T_EQ_INT(lash_dostring(S, "lash = require 'lash'; done = 0", "=t"), LASH_OK, "require lash");
  T_EQ_INT(lash_dostring(S, "for i = 1, 3 do lash.spawn(function() for k = 1, 3 do lash.sleep(0.001) end done = done + 1 end) end", "=t"), LASH_OK, "spawn tasks");
  while ((rc = lash_step(S, 5)) > 0) steps++;
  T_EQ_INT(rc, 0, "step until idle returns 0");
  T_OK(steps >= 3, "each step advanced by at most one wait (took several)");
  T_EQ_INT(lash_dostring(S, "assert(done == 3)", "=t"), LASH_OK, "all tasks ran to completion");
  T_EQ_INT(lash_dostring(S, "error('boom')", "=chunk"), LASH_ERUN, "a Lua error is LASH_ERUN");
  T_OK(strstr(lash_errmsg(S), "boom") && strstr(lash_errmsg(S), "stack traceback"), "errmsg has the message and a traceback");
  T_EQ_INT(lash_dostring(S, "x = = 1", "=chunk"), LASH_ERUN, "a syntax error is LASH_ERUN");
  T_EQ_INT(lash_dofile(S, "/nonexistent/spec.lua"), LASH_ERUN, "a missing file is an error");
  T_OK(strstr(lash_errmsg(S), "/nonexistent/spec.lua") != NULL, "naming the file");
  T_OK(lash_fd(S) >= 0, "the loop's fd is exposed");
  T_EQ_INT(lash_run(S), LASH_OK, "run with nothing to do returns at once");
  /* closing with tasks in flight cancels them and runs their cleanup */
  lua_pushcfunction(lash_lua(S), note_cleanup);
  lua_setglobal(lash_lua(S), "note_cleanup");
  T_EQ_INT(lash_dostring(S, "lash.spawn(function() local g <close> = setmetatable({}, {__close=function() note_cleanup() end}) lash.sleep(3600) end)", "=t"), LASH_OK, "spawn a long task");
  lash_step(S, 0);
  T_EQ_INT(cleaned_up, 0, "the task is still waiting before close");
  lash_close(S);
  T_EQ_INT(cleaned_up, 1, "close cancelled the task and ran its cleanup (leaks: ASan/valgrind)");

  /* memory budget */
  lash_options_init(&o);
  o.memory_limit = 4u << 20;
  o.log = on_log;
  S = lash_open(&o);
  T_OK(S != NULL && strcmp(lash_errmsg(S), "no error") == 0, "open with a 4 MiB budget");
  rc = lash_dostring(S, "local t = {} for i = 1, 1e7 do t[i] = ('x'):rep(100) .. i end", "=bomb");
  T_EQ_INT(rc, LASH_EMEM, "a memory bomb hits the budget");
  T_OK(strstr(lash_errmsg(S), "memory budget of 4194304 bytes") != NULL, "the error names the budget");
  T_EQ_INT(lash_dostring(S, "collectgarbage(); x = 1", "=after"), LASH_OK, "the state still works after");
  T_OK(lash_memory_used(S) > 0 && lash_memory_used(S) < (4u << 20), "usage is tracked");
  T_EQ_INT(lash_dostring(S, "lash = require 'lash'; lash.spawn(function() error('lost') end)", "=t"), LASH_OK, "spawn a failing task");
  lash_run(S);
  T_EQ_INT(lash_dostring(S, "collectgarbage(); collectgarbage()", "=gc"), LASH_OK, "collect it");
  T_OK(logged >= 1, "an unjoined failed task is logged through the log callback");
  lash_close(S);

  /* misuse */
  T_EQ_INT(lash_dostring(NULL, "x=1", NULL), LASH_EARG, "NULL state is LASH_EARG");
  T_EQ_INT(lash_step(NULL, 0), LASH_EARG, "step on NULL is LASH_EARG");
  T_EQ_STR(lash_errmsg(NULL), "lash: NULL state", "errmsg(NULL) is safe");
  lash_close(NULL);  /* a no-op: reaching the next line is the check */
  return T_DONE();
}
