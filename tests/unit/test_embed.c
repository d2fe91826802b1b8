/* test_embed.c: the engine-facing half of lash.h: agent specs, template
** values, host tools answered at once or frames later, retries and
** failures, events as JSON, approvals from C, cancelling, freeing and
** closing with runs in flight, lash_fd, the frame budget, lash_attach and
** misuse of every function. Leaks are checked by running this binary
** under valgrind and ASan (make check). */
#include "lash_lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include "t.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- recording events and calls ---------------------------------------- */

static int frame;                 /* the host's frame counter */

typedef struct events {
  char types[8192];               /* "run_start,model_request,..." */
  int n;
  char last_end[4096];            /* the last run_end event */
  char approvals[8][64];          /* ids of approval_request events */
  int napprovals;
  int text_deltas;
  char cancelled[512];            /* the last tool_cancelled event */
  int ncancelled;
  int approve_inline;             /* answer approvals from the callback */
  int reenter;                    /* try lash_step/lash_close/lash_run in the callback */
  int reenter_step, reenter_close, reenter_run;
  int follow_up;                  /* start a run from the run_end event */
  lash_Run *second;
  int follow_start, follow_lua;
  lash_State *S;
} events;

static events ev;

/* Copy the string value of "key":"..." in json into out. */
static int json_str(const char *json, const char *key, char *out, size_t n) {
  char pat[64];
  const char *p, *q;
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  if (!(p = strstr(json, pat))) return 0;
  p += strlen(pat);
  if (!(q = strchr(p, '"'))) return 0;
  snprintf(out, n, "%.*s", (int)(q - p), p);
  return 1;
}

static void on_event(lash_Run *run, const char *json, void *ud) {
  events *e = ud;
  char type[64] = "?";
  json_str(json, "type", type, sizeof type);
  e->n++;
  if (strlen(e->types) + strlen(type) + 2 < sizeof e->types) {
    strcat(e->types, type);
    strcat(e->types, ",");
  }
  if (strcmp(type, "run_end") == 0) {
    snprintf(e->last_end, sizeof e->last_end, "%s", json);
    if (e->follow_up) {
      e->follow_up = 0;
      e->follow_start = lash_run_start(e->S, "again", "{\"values\":{\"who\":\"twice\"}}", &e->second);
      e->follow_lua = lash_dostring(e->S, "reentered = true", "=cb");
    }
  }
  if (strcmp(type, "text_delta") == 0) e->text_deltas++;
  if (strcmp(type, "tool_cancelled") == 0) {
    snprintf(e->cancelled, sizeof e->cancelled, "%s", json);
    e->ncancelled++;
  }
  if (strcmp(type, "approval_request") == 0 && e->napprovals < 8) {
    json_str(json, "id", e->approvals[e->napprovals], sizeof e->approvals[0]);
    if (e->approve_inline)
      lash_run_approve(run, e->approvals[e->napprovals], 1, NULL);
    e->napprovals++;
  }
  if (e->reenter) {
    e->reenter_step = lash_step(e->S, 0);
    e->reenter_close = lash_close(e->S);
    e->reenter_run = lash_run(e->S);
  }
}

static void events_reset(lash_State *S) {
  memset(&ev, 0, sizeof ev);
  ev.S = S;
}

enum { HOLD, ANSWER, RETRY_ONCE, FAIL, CANCEL_RUN };

typedef struct tools {
  int mode;
  lash_Call *held[8];
  int nheld;
  int calls;
  int frame_called;
  char last_args[256];
} tools;

static tools tl;

static void on_tool(lash_Call *call, const char *args, void *ud) {
  tools *t = ud;
  char buf[300];
  t->calls++;
  t->frame_called = frame;
  snprintf(t->last_args, sizeof t->last_args, "%s", args);
  switch (t->mode) {
    case HOLD:
      if (t->nheld < 8) t->held[t->nheld++] = call;
      break;
    case ANSWER:
      snprintf(buf, sizeof buf, "made %s", args);
      lash_call_return(call, buf);
      break;
    case RETRY_ONCE:
      if (t->calls == 1) lash_call_retry(call, "kind must be a tree or a rock");
      else lash_call_return(call, "made it");
      break;
    case FAIL:
      lash_call_fail(call, "the scene is locked");
      break;
    case CANCEL_RUN:              /* the engine gives up on the run at once */
      if (t->nheld < 8) t->held[t->nheld++] = call;
      lash_run_cancel(lash_call_run(call));
      break;
  }
}

static const char *SCHEMA =
  "{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\"}},"
  "\"required\":[\"kind\"]}";

/* Step (polling) until the run ends; the number of frames, or -1. */
static int run_frames(lash_State *S, lash_Run *run, int max) {
  for (int f = 0; f < max; f++) {
    if (lash_run_status(run) >= LASH_RUN_DONE) return f;
    frame++;
    if (lash_step(S, 0) < 0) return -1;
  }
  return lash_run_status(run) >= LASH_RUN_DONE ? max : -1;
}

/* Step until the tool callback has been called n times in total. */
static int frames_until_calls(lash_State *S, int n, int max) {
  for (int f = 0; f < max; f++) {
    if (tl.calls >= n) return f;
    frame++;
    if (lash_step(S, 0) < 0) return -1;
  }
  return tl.calls >= n ? max : -1;
}

/* The JSON array after "key": in json (strings and nesting respected),
** copied into out; 0 if absent or too long. */
static int json_array(const char *json, const char *key, char *out, size_t n) {
  char pat[64];
  const char *p, *q;
  int depth = 0, in_str = 0;
  snprintf(pat, sizeof pat, "\"%s\":[", key);
  if (!(p = strstr(json, pat))) return 0;
  p += strlen(pat) - 1;
  for (q = p; *q; q++) {
    if (in_str) {
      if (*q == '\\' && q[1]) q++;
      else if (*q == '"') in_str = 0;
    } else if (*q == '"') {
      in_str = 1;
    } else if (*q == '[' || *q == '{') {
      depth++;
    } else if ((*q == ']' || *q == '}') && --depth == 0) {
      if ((size_t)(q - p + 2) > n) return 0;
      snprintf(out, n, "%.*s", (int)(q - p + 1), p);
      return 1;
    }
  }
  return 0;
}

static int readable(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static const char *result_json(lash_Run *run) {
  const char *out = NULL, *json = NULL;
  if (lash_run_result(run, &out, &json) != LASH_OK || !json) return "";
  return json;
}

static const char *output_of(lash_Run *run) {
  const char *out = NULL;
  if (lash_run_result(run, &out, NULL) != LASH_OK || !out) return "";
  return out;
}

/* The scripted model: step 1 calls spawn (kind tree); step 2 answers with
** the instructions and the tool's result. */
static const char *SPEC_SPAWN =
  "return {\n"
  "  instructions = 'hello {{ values.who }}',\n"
  "  model = lash.script_model {\n"
  "    { tool_calls = { { name = 'spawn', args = { kind = 'tree' } } } },\n"
  "    function(m, info)\n"
  "      local r = m[#m].parts[1]\n"
  "      return info.instructions .. '|' .. r.status .. '|' .. r.content\n"
  "    end,\n"
  "  },\n"
  "}\n";

static lash_State *open_spawn(void) {
  lash_State *S = lash_open(NULL);
  events_reset(S);
  memset(&tl, 0, sizeof tl);
  lash_load_spec_string(S, SPEC_SPAWN, "spawn_spec");
  lash_register_tool(S, "spawn", "Spawn an entity.", SCHEMA, on_tool, &tl);
  lash_set_event_handler(S, on_event, &ev);
  return S;
}

/* ---- the tests ------------------------------------------------------------ */

static void test_misuse(void) {
  lash_State *S = lash_open(NULL);
  lash_Run *run = (lash_Run *)1;
  T_EQ_INT(lash_load_spec_file(NULL, "x.lua"), LASH_EARG, "load_spec_file(NULL state)");
  T_EQ_INT(lash_load_spec_file(S, NULL), LASH_EARG, "load_spec_file(NULL path)");
  T_EQ_INT(lash_load_spec_string(NULL, "return {}", NULL), LASH_EARG, "load_spec_string(NULL state)");
  T_EQ_INT(lash_load_spec_string(S, NULL, NULL), LASH_EARG, "load_spec_string(NULL text)");
  T_EQ_INT(lash_load_spec_string_safe(NULL, "return {}", NULL), LASH_EARG, "load_spec_string_safe(NULL state)");
  T_EQ_INT(lash_load_spec_string_safe(S, NULL, NULL), LASH_EARG, "load_spec_string_safe(NULL text)");
  T_OK(strstr(lash_errmsg(S), "lash_load_spec_string_safe: NULL text") != NULL, "names the call: %s", lash_errmsg(S));
  T_EQ_INT(lash_set_value(NULL, "k", "v"), LASH_EARG, "set_value(NULL state)");
  T_EQ_INT(lash_set_value(S, NULL, "v"), LASH_EARG, "set_value(NULL key)");
  T_EQ_INT(lash_register_tool(NULL, "t", NULL, NULL, on_tool, NULL), LASH_EARG, "register_tool(NULL state)");
  T_EQ_INT(lash_register_tool(S, NULL, NULL, NULL, on_tool, NULL), LASH_EARG, "register_tool(NULL name)");
  T_EQ_INT(lash_register_tool(S, "t", NULL, NULL, NULL, NULL), LASH_EARG, "register_tool(NULL callback)");
  T_EQ_INT(lash_register_tool(S, "no spaces", NULL, NULL, on_tool, NULL), LASH_EARG, "a bad tool name");
  T_OK(strstr(lash_errmsg(S), "1-64 characters") != NULL, "says what a name may be: %s", lash_errmsg(S));
  T_EQ_INT(lash_register_tool(S, "t", NULL, "{not json", on_tool, NULL), LASH_EARG, "a schema that is not JSON");
  T_OK(strstr(lash_errmsg(S), "not valid JSON") != NULL, "says so: %s", lash_errmsg(S));
  T_EQ_INT(lash_register_tool(S, "t", NULL, "{\"type\":\"array\"}", on_tool, NULL), LASH_EARG, "a schema that is not an object schema");
  T_OK(strstr(lash_errmsg(S), "object") != NULL, "says it must be an object schema: %s", lash_errmsg(S));
  T_EQ_INT(lash_register_tool(S, "t", "A tool.", NULL, on_tool, NULL), LASH_OK, "a tool without arguments");
  T_EQ_INT(lash_register_tool(S, "t", "A tool.", NULL, on_tool, NULL), LASH_EARG, "the same name twice");
  T_OK(strstr(lash_errmsg(S), "registered already") != NULL, "says so: %s", lash_errmsg(S));
  T_EQ_INT(lash_unregister_tool(S, "nope"), LASH_EARG, "unregister an unknown tool");
  T_EQ_INT(lash_unregister_tool(NULL, "t"), LASH_EARG, "unregister_tool(NULL state)");
  T_EQ_INT(lash_unregister_tool(S, NULL), LASH_EARG, "unregister_tool(NULL name)");
  T_EQ_INT(lash_unregister_tool(S, "t"), LASH_OK, "unregister a tool");
  T_EQ_INT(lash_call_return(NULL, "x"), LASH_EARG, "call_return(NULL)");
  T_EQ_INT(lash_call_retry(NULL, "x"), LASH_EARG, "call_retry(NULL)");
  T_EQ_INT(lash_call_fail(NULL, "x"), LASH_EARG, "call_fail(NULL)");
  T_EQ_INT(lash_call_status(NULL), LASH_EARG, "call_status(NULL)");
  T_OK(!lash_call_id(NULL) && !lash_call_name(NULL) && !lash_call_args(NULL) && !lash_call_run(NULL),
       "call accessors on NULL give NULL");
  T_EQ_INT(lash_set_event_handler(NULL, on_event, NULL), LASH_EARG, "set_event_handler(NULL state)");
  T_EQ_INT(lash_run_start(NULL, "p", NULL, &run), LASH_EARG, "run_start(NULL state)");
  T_OK(run == NULL, "run_start clears *run on failure");
  T_EQ_INT(lash_run_start(S, "p", NULL, NULL), LASH_EARG, "run_start(NULL out)");
  T_EQ_INT(lash_run_start(S, "p", NULL, &run), LASH_EARG, "run_start before any spec");
  T_OK(strstr(lash_errmsg(S), "load a spec first") != NULL, "says to load a spec: %s", lash_errmsg(S));
  T_EQ_INT(lash_run_status(NULL), LASH_EARG, "run_status(NULL)");
  T_EQ_INT(lash_run_result(NULL, NULL, NULL), LASH_EARG, "run_result(NULL)");
  T_EQ_INT(lash_run_cancel(NULL), LASH_EARG, "run_cancel(NULL)");
  T_EQ_INT(lash_run_approve(NULL, "id", 1, NULL), LASH_EARG, "run_approve(NULL)");
  T_EQ_INT(lash_run_free(NULL), LASH_EARG, "run_free(NULL)");
  T_EQ_INT(lash_fd(NULL), LASH_EARG, "fd(NULL)");
  T_EQ_INT(lash_run(NULL), LASH_EARG, "run(NULL)");
  T_EQ_INT(lash_dofile(NULL, "x"), LASH_EARG, "dofile(NULL)");
  T_EQ_INT(lash_set_memory_limit(NULL, 1), LASH_EARG, "set_memory_limit(NULL)");
  T_OK(lash_memory_used(NULL) == 0, "memory_used(NULL) is 0");
  T_OK(lash_lua(NULL) == NULL, "lua(NULL) is NULL");
  T_EQ_INT(lash_close(NULL), LASH_OK, "close(NULL) is a no-op");

  /* bad run options */
  lash_load_spec_string(S, SPEC_SPAWN, "s");
  T_EQ_INT(lash_run_start(S, "p", "{nope", &run), LASH_EARG, "options that are not JSON");
  T_OK(strstr(lash_errmsg(S), "not valid JSON") != NULL, "says so: %s", lash_errmsg(S));
  T_EQ_INT(lash_run_start(S, "p", "[1]", &run), LASH_EARG, "options that are not an object");
  T_EQ_INT(lash_run_start(S, "p", "{\"colour\":1}", &run), LASH_EARG, "an unknown option");
  T_OK(strstr(lash_errmsg(S), "unknown option 'colour'") && strstr(lash_errmsg(S), "model_settings"),
       "names it and the known ones: %s", lash_errmsg(S));
  T_EQ_INT(lash_run_start(S, "p", "{\"limits\":3}", &run), LASH_EARG, "an option of the wrong type");
  T_EQ_INT(lash_run_start(S, "p", "{\"values\":{\"a\":1}}", &run), LASH_EARG, "a value that is not a string");
  T_EQ_INT(lash_run_start(S, "p", "{\"approval\":\"maybe\"}", &run), LASH_EARG, "a bad approval mode");
  T_EQ_INT(lash_run_start(S, "p", "{\"limits\":{\"max_stepz\":1}}", &run), LASH_EARG, "a bad limit (checked by the agent)");
  T_OK(strstr(lash_errmsg(S), "max_stepz") != NULL, "names it: %s", lash_errmsg(S));
  T_EQ_INT(lash_step(S, 0), 0, "nothing was started by the failed calls");
  lash_close(S);

  /* a state whose opening failed answers every call with the failure */
  S = lash_attach(NULL, NULL);
  T_OK(S != NULL, "attach(NULL) still returns a state to report on");
  T_EQ_INT(lash_step(S, 0), LASH_EARG, "which fails every call");
  T_OK(strstr(lash_errmsg(S), "NULL lua_State") != NULL, "saying why: %s", lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string(S, "return {}", NULL), LASH_EARG, "load on it fails too");
  T_EQ_INT(lash_close(S), LASH_OK, "and it closes");
}

/* Prompt parts and a structured answer through lash_run_start's options:
** the model sees the document part and answers JSON; *output is its text,
** the result's "output" the decoded value. */
static void test_parts_and_output(void) {
  lash_State *S = lash_open(NULL);
  lash_Run *run;
  T_EQ_INT(lash_load_spec_string(S,
    "return lash.agent { model = function(msgs) local p = msgs[1].parts "
    "return string.format('{\"n\": %d, \"doc\": \"%s\"}', #p, p[2].text) end }", "parts"),
    LASH_OK, "a spec whose model reports the prompt's parts");
  T_EQ_INT(lash_run_start(S, "read this",
    "{\"parts\": [{\"type\": \"document\", \"text\": \"notes\", \"name\": \"n.txt\"}],"
    " \"output\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}},"
    " \"required\": [\"n\"]}}", &run), LASH_OK, "starts with parts and an output schema");
  T_OK(run_frames(S, run, 50) >= 0 && lash_run_status(run) == LASH_RUN_DONE, "to the end");
  T_EQ_STR(output_of(run), "{\"n\": 2, \"doc\": \"notes\"}", "the answer's JSON text");
  T_OK(strstr(result_json(run), "\"output\":{\"doc\":\"notes\",\"n\":2}") != NULL
       || strstr(result_json(run), "\"output\":{\"n\":2,\"doc\":\"notes\"}") != NULL,
       "the decoded value in the result: %s", result_json(run));
  lash_run_free(run);
  lash_close(S);
}

static void test_specs(void) {
  lash_State *S = lash_open(NULL);
  char path[] = "/tmp/lash_test_spec_XXXXXX.lua";
  int fd;
  FILE *f;
  T_EQ_INT(lash_load_spec_string(S, "return {", "broken"), LASH_ERUN, "a spec with a syntax error");
  T_OK(strstr(lash_errmsg(S), "broken") != NULL, "names the spec: %s", lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string(S, "return 42", "num"), LASH_ERUN, "a spec that returns a number");
  T_OK(strstr(lash_errmsg(S), "must return lash.agent") != NULL, "says what it must return");
  T_EQ_INT(lash_load_spec_string(S, "return { colour = 1 }", "bad"), LASH_ERUN, "a spec with an unknown field");
  T_OK(strstr(lash_errmsg(S), "colour") != NULL, "names the field: %s", lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string(S, "error('nope')", "raise"), LASH_ERUN, "a spec that raises");
  T_EQ_INT(lash_load_spec_file(S, "/nonexistent/agent.lua"), LASH_ERUN, "a missing spec file");
  T_OK(strstr(lash_errmsg(S), "/nonexistent/agent.lua") != NULL, "names the path");
  fd = mkstemps(path, 4);
  f = fdopen(fd, "w");
  fputs("return lash.agent { name = 'filed', model = lash.script_model { 'from a file' } }\n", f);
  fclose(f);
  T_EQ_INT(lash_load_spec_file(S, path), LASH_OK, "a spec file returning lash.agent{...}");
  {
    lash_Run *run;
    T_EQ_INT(lash_run_start(S, "hi", NULL, &run), LASH_OK, "runs it");
    T_OK(run_frames(S, run, 50) >= 0 && lash_run_status(run) == LASH_RUN_DONE, "to the end");
    T_EQ_STR(output_of(run), "from a file", "with the scripted answer");
    lash_run_free(run);
  }
  unlink(path);

  /* files load like `lash run` without --trust; strings are the host's own */
  strcpy(path, "/tmp/lash_test_spec_XXXXXX.lua");
  fd = mkstemps(path, 4);
  f = fdopen(fd, "w");
  fputs("os.execute('true') return {}\n", f);
  fclose(f);
  T_EQ_INT(lash_load_spec_file(S, path), LASH_ERUN, "a spec file may not call os.execute");
  T_OK(strstr(lash_errmsg(S), "os.execute") && strstr(lash_errmsg(S), "trust"), "saying so: %s", lash_errmsg(S));
  unlink(path);
  T_EQ_INT(lash_load_spec_string(S, "assert(os.getenv('HOME') ~= false) return { model = lash.script_model { 'trusted' } }", "host"),
           LASH_OK, "a spec string from the host runs trusted");

  /* a string from elsewhere loads as a file does: safe, under budgets */
  T_EQ_INT(lash_load_spec_string_safe(S, "os.execute('true') return {}", "user"), LASH_ERUN,
           "a safe spec string may not call os.execute");
  T_OK(strstr(lash_errmsg(S), "user:1: os.execute is not available") != NULL, "naming the string and the line: %s",
       lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string_safe(S, "return require('io')", "user"), LASH_ERUN, "nor require other modules");
  T_EQ_INT(lash_dostring(S, "local b = require('lash.spec').BUDGET; saved_budget = { b.instructions, b.memory }; "
                            "b.instructions = 100000; b.memory = 4 * 1024 * 1024", "=t"),
           LASH_OK, "the host lowers lash.spec.BUDGET");
  T_EQ_INT(lash_load_spec_string_safe(S, "while true do end", "loop"), LASH_ERUN, "an endless loop is stopped");
  T_OK(strstr(lash_errmsg(S), "loop: the spec ran past its budget of 100000 Lua instructions") != NULL,
       "at the instruction budget: %s", lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string_safe(S, "local s = 'x' while true do s = s .. s end", "bomb"), LASH_ERUN,
           "a runaway allocation is stopped");
  T_OK(strstr(lash_errmsg(S), "more than 4") && strstr(lash_errmsg(S), "of memory while loading"),
       "at the memory budget: %s", lash_errmsg(S));
  T_EQ_INT(lash_dostring(S, "local b = require('lash.spec').BUDGET; b.instructions, b.memory = saved_budget[1], "
                            "saved_budget[2]", "=t"), LASH_OK, "put the budget back");
  {
    lash_Run *run;
    T_EQ_INT(lash_load_spec_string_safe(S, "local n = lash.agent { model = lash.script_model { 'safe' } } "
                                           "return n", "user"), LASH_OK, "a well-behaved safe Lua spec string");
    lash_run_start(S, "hi", NULL, &run);
    run_frames(S, run, 50);
    T_EQ_STR(output_of(run), "safe", "runs");
    lash_run_free(run);
    T_EQ_INT(lash_load_spec_string_safe(S, "{\"model\": \"test\"}", NULL), LASH_OK, "a safe JSON spec string (by its '{')");
    lash_run_start(S, "hi", NULL, &run);
    run_frames(S, run, 50);
    T_EQ_STR(output_of(run), "success (no tool calls)", "runs");
    lash_run_free(run);
  }

  /* JSON and YAML */
  T_EQ_INT(lash_load_spec_string(S, "{\"model\": \"test\", \"instructions\": \"Be brief.\", \"description\": null}", "agent.json"),
           LASH_OK, "a JSON spec string");
  {
    lash_Run *run;
    lash_run_start(S, "hi", NULL, &run);
    run_frames(S, run, 50);
    T_EQ_STR(output_of(run), "success (no tool calls)", "runs with the test model it names");
    lash_run_free(run);
  }
  T_EQ_INT(lash_load_spec_string(S, "{\"modle\": \"test\"}", "agent.json"), LASH_ERUN, "a JSON spec with an unknown key");
  T_OK(strstr(lash_errmsg(S), "unknown key 'modle'") != NULL, "names it: %s", lash_errmsg(S));
  T_EQ_INT(lash_load_spec_string(S, "{nope", "agent.json"), LASH_ERUN, "a JSON spec that is not JSON");
  {  /* YAML is lash's own loader (src/2-runtime/yaml_loader.c): always there */
    char ypath[] = "/tmp/lash_test_spec_XXXXXX.yaml";
    fd = mkstemps(ypath, 5);
    f = fdopen(fd, "w");
    fputs("model: test\ninstructions: Keep answers short.\n", f);
    fclose(f);
    T_EQ_INT(lash_load_spec_file(S, ypath), LASH_OK, "a YAML spec file");
    unlink(ypath);
    T_EQ_INT(lash_load_spec_string(S, "model: [unclosed", "agent.yaml"), LASH_ERUN, "a YAML string that does not parse");
  }
  lash_close(S);
}

static void test_answer_at_once(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  const char *json;
  tl.mode = ANSWER;
  T_EQ_INT(lash_set_value(S, "who", "world"), LASH_OK, "set a template value");
  T_EQ_INT(lash_run_start(S, "build", NULL, &run), LASH_OK, "start a run");
  T_EQ_INT(lash_run_status(run), LASH_RUN_RUNNING, "it is running");
  T_EQ_INT(lash_run_result(run, NULL, NULL), LASH_EBUSY, "no result while it runs");
  T_OK(strstr(lash_errmsg(S), "still going") != NULL, "says so");
  T_OK(run_frames(S, run, 50) > 0, "it ends after some frames");
  T_EQ_INT(lash_run_status(run), LASH_RUN_DONE, "done");
  T_EQ_INT(tl.calls, 1, "the host tool was called once");
  T_EQ_STR(tl.last_args, "{\"kind\":\"tree\"}", "with the arguments as JSON");
  T_EQ_STR(output_of(run), "hello world|ok|made {\"kind\":\"tree\"}",
           "the model saw the rendered value and the host's answer");
  json = result_json(run);
  T_OK(strstr(json, "\"status\":\"done\"") && strstr(json, "\"stop_reason\":\"complete\"") &&
       strstr(json, "\"messages\":["), "the result JSON: %s", json);
  T_OK(strstr(ev.types, "run_start,model_request,") == ev.types, "events start with run_start, model_request: %s", ev.types);
  T_OK(strstr(ev.types, "tool_call,tool_result,") != NULL, "a tool_call then its tool_result");
  T_OK(strstr(ev.types, "run_end,") != NULL && strstr(ev.last_end, "\"stop_reason\":\"complete\""),
       "and run_end: %s", ev.last_end);
  T_OK(ev.text_deltas > 0, "text streams as text_delta events when a handler is set");
  lash_run_free(run);

  /* a run's values override the state's; removing a value */
  T_EQ_INT(lash_run_start(S, "build", "{\"values\":{\"who\":\"bob\"}}", &run), LASH_OK, "start with values");
  run_frames(S, run, 50);
  T_EQ_STR(output_of(run), "hello bob|ok|made {\"kind\":\"tree\"}", "the run's value wins");
  lash_run_free(run);
  T_EQ_INT(lash_set_value(S, "who", NULL), LASH_OK, "remove a value");
  T_EQ_INT(lash_run_start(S, "build", NULL, &run), LASH_OK, "start again");
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_FAILED, "a template reading a missing value fails the run");
  T_OK(strstr(result_json(run), "who") != NULL, "naming the value: %s", result_json(run));
  lash_run_free(run);
  lash_close(S);
}

static void test_three_frames_later(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  lash_Call *c;
  int called, f;
  lash_set_value(S, "who", "you");
  tl.mode = HOLD;
  lash_run_start(S, "build", NULL, &run);
  T_OK(frames_until_calls(S, 1, 50) >= 0, "the tool is called");
  c = tl.held[0];
  called = frame;
  T_EQ_STR(lash_call_name(c), "spawn", "the call's tool name");
  T_EQ_STR(lash_call_id(c), "call_1_1", "its id");
  T_EQ_STR(lash_call_args(c), "{\"kind\":\"tree\"}", "its arguments");
  T_OK(lash_call_run(c) == run, "and its run");
  for (f = 0; f < 3; f++) {
    frame++;
    T_EQ_INT(lash_step(S, 0), 1, "work remains while the call waits");
    T_EQ_INT(lash_call_status(c), LASH_CALL_PENDING, "the call is pending");
    T_EQ_INT(lash_run_status(run), LASH_RUN_RUNNING, "the run waits");
  }
  T_EQ_INT(frame - called, 3, "three frames passed");
  T_EQ_INT(lash_call_return(c, "a tree, three frames later"), LASH_OK, "answer it now");
  T_EQ_INT(lash_call_status(c), LASH_CALL_ANSWERED, "answered");
  T_EQ_INT(lash_call_return(c, "again"), LASH_EARG, "answering twice is LASH_EARG");
  T_OK(strstr(lash_errmsg(S), "answered already") != NULL, "saying so: %s", lash_errmsg(S));
  T_EQ_INT(lash_call_retry(c, "again"), LASH_EARG, "so is a retry after it");
  T_EQ_INT(lash_call_fail(c, "again"), LASH_EARG, "and a failure");
  T_OK(run_frames(S, run, 50) >= 0, "the run goes on");
  T_EQ_STR(output_of(run), "hello you|ok|a tree, three frames later", "with the late answer");
  T_EQ_INT(lash_call_return(c, "late"), LASH_EARG, "a finished call still refuses a second answer");
  lash_run_free(run);
  lash_close(S);
}

static const char *SPEC_RETRY =
  "return { model = lash.script_model {\n"
  "  { tool_calls = { { name = 'spawn', args = { kind = 'cloud' } } } },\n"
  "  function(m) local r = m[#m].parts[1]\n"
  "    assert(r.status == 'retry', 'expected a retry, got ' .. r.status)\n"
  "    return { tool_calls = { { name = 'spawn', args = { kind = 'tree' } } }, text = r.content } end,\n"
  "  function(m) return m[#m - 1].parts[1].text .. '|' .. m[#m].parts[1].content end,\n"
  "} }\n";

static void test_retry_and_fail(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  tl.mode = RETRY_ONCE;
  T_EQ_INT(lash_load_spec_string(S, SPEC_RETRY, "retry"), LASH_OK, "load the retry script");
  lash_run_start(S, "build", NULL, &run);
  T_OK(run_frames(S, run, 80) >= 0 && lash_run_status(run) == LASH_RUN_DONE, "a retried call, then done");
  T_EQ_INT(tl.calls, 2, "the tool was called twice");
  T_EQ_STR(output_of(run), "kind must be a tree or a rock\n\nFix the errors and try again.|made it",
           "the model saw the retry prompt, then the answer");
  T_OK(strstr(ev.types, "retry,") != NULL, "a retry event");
  lash_run_free(run);

  tl.mode = FAIL;
  tl.calls = 0;
  lash_load_spec_string(S, SPEC_SPAWN, "spawn");
  lash_set_value(S, "who", "x");
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_FAILED, "lash_call_fail fails the run");
  T_OK(strstr(result_json(run), "\"kind\":\"tool\"") && strstr(result_json(run), "the scene is locked"),
       "with a tool error carrying the message: %s", result_json(run));
  T_OK(strstr(ev.last_end, "\"stop_reason\":\"error\"") != NULL, "run_end says error");
  lash_run_free(run);

  /* a C tool driven by the offline test model (arguments from the schema) */
  tl.mode = ANSWER;
  tl.calls = 0;
  lash_run_start(S, "build", "{\"model\":\"test\"}", &run);
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_DONE, "the test model calls the host tool");
  T_EQ_STR(output_of(run), "{\"spawn\":\"made {\\\"kind\\\":\\\"a\\\"}\"}", "and reports its result");
  lash_run_free(run);

  /* an unregistered tool is unknown to the model */
  T_EQ_INT(lash_unregister_tool(S, "spawn"), LASH_OK, "unregister spawn");
  tl.calls = 0;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 50);
  T_EQ_INT(tl.calls, 0, "its callback is not called any more");
  T_OK(strstr(output_of(run), "retry|Unknown tool name: 'spawn'") != NULL,
       "the model is told the tool is unknown: %s", output_of(run));
  lash_run_free(run);
  lash_close(S);
}

/* One turn, two calls run concurrently: the host's spawn, and a Lua tool
** that fails once spawn is waiting. */
static const char *SPEC_SIBLING =
  "local boom = lash.tool { name = 'boom', handler = function() lash.sleep(0) error('the floor gave way') end }\n"
  "return { tools = { boom }, model = lash.script_model {\n"
  "  { tool_calls = { { name = 'spawn', args = { kind = 'tree' } }, { name = 'boom', args = {} } } } } }\n";

static void test_cancel_mid_tool(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  lash_Call *c;
  lash_set_value(S, "who", "x");
  tl.mode = HOLD;
  lash_run_start(S, "build", NULL, &run);
  frames_until_calls(S, 1, 50);
  c = tl.held[0];
  lash_step(S, 0);
  T_EQ_INT(ev.ncancelled, 0, "no tool_cancelled while the call waits");
  T_EQ_INT(lash_run_cancel(run), LASH_OK, "cancel the run while its tool call waits");
  T_OK(run_frames(S, run, 20) >= 0, "it ends");
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "cancelled");
  T_EQ_INT(lash_call_status(c), LASH_CALL_CANCELLED, "the call says the run stopped waiting");
  T_EQ_INT(ev.ncancelled, 1, "the host is told once, with a tool_cancelled event");
  {
    char id[64] = "", name[64] = "", run_id[64] = "";
    json_str(ev.cancelled, "id", id, sizeof id);
    json_str(ev.cancelled, "name", name, sizeof name);
    json_str(ev.cancelled, "run_id", run_id, sizeof run_id);
    T_OK(strcmp(id, "call_1_1") == 0 && strcmp(name, "spawn") == 0 && run_id[0],
         "naming the call (as lash_call_id), the tool and the run: %s", ev.cancelled);
    T_EQ_STR(id, lash_call_id(c), "its id is the call's");
  }
  T_OK(strstr(ev.types, "tool_call,tool_cancelled,run_end,") != NULL, "after the tool_call, before run_end: %s",
       ev.types);
  T_EQ_INT(lash_call_return(c, "too late"), LASH_EGONE, "answering it is LASH_EGONE");
  T_OK(strstr(lash_errmsg(S), "no longer waited for") != NULL, "saying why: %s", lash_errmsg(S));
  T_EQ_INT(lash_run_cancel(run), LASH_EGONE, "cancelling again is LASH_EGONE");
  T_OK(strstr(result_json(run), "\"status\":\"cancelled\"") != NULL, "the result says cancelled");
  T_OK(strstr(ev.last_end, "\"stop_reason\":\"cancelled\"") != NULL, "run_end says cancelled");
  T_EQ_INT(lash_step(S, 0), 0, "nothing is left running");
  lash_run_free(run);

  /* answered, then cancelled before the run took the answer: nothing to drop */
  events_reset(S);
  tl.nheld = 0;
  tl.calls = 0;
  lash_run_start(S, "build", NULL, &run);
  frames_until_calls(S, 1, 50);
  T_EQ_INT(lash_call_return(tl.held[0], "done"), LASH_OK, "answer the call");
  T_EQ_INT(lash_run_cancel(run), LASH_OK, "then cancel the run before the next step");
  run_frames(S, run, 20);
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "the run ends cancelled");
  T_EQ_INT(ev.ncancelled, 0, "no tool_cancelled for a call the host answered");
  lash_run_free(run);

  /* cancelled from inside the tool's own callback */
  events_reset(S);
  tl.nheld = 0;
  tl.calls = 0;
  tl.mode = CANCEL_RUN;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 20);
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "a run cancelled from the tool callback ends cancelled");
  T_EQ_INT(lash_call_status(tl.held[0]), LASH_CALL_CANCELLED, "its call says so");
  T_EQ_INT(ev.ncancelled, 1, "and the host gets one tool_cancelled for it");
  T_OK(strstr(ev.cancelled, "\"id\":\"call_1_1\"") != NULL, "for that call: %s", ev.cancelled);
  lash_run_free(run);
  tl.mode = HOLD;

  /* cancelled before it ever ran */
  lash_run_start(S, "build", NULL, &run);
  T_EQ_INT(lash_run_cancel(run), LASH_OK, "cancel a run before its first step");
  run_frames(S, run, 20);
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "it ends cancelled");
  lash_run_free(run);

  /* freed while it waits: cancelled, then freed by lash once unwound */
  tl.nheld = 0;
  tl.calls = 0;
  lash_run_start(S, "build", NULL, &run);
  frames_until_calls(S, 1, 50);
  T_EQ_INT(lash_run_free(run), LASH_OK, "free a run that waits on a tool");
  ev.n = 0;
  for (int f = 0; f < 20 && lash_step(S, 0) > 0; f++) {}
  T_EQ_INT(lash_step(S, 0), 0, "it unwinds");
  T_EQ_INT(ev.n, 0, "and sends no events after it was freed (no tool_cancelled either)");

  /* the run stops waiting because another call of the same turn failed */
  events_reset(S);
  tl.nheld = 0;
  tl.calls = 0;
  T_EQ_INT(lash_load_spec_string(S, SPEC_SIBLING, "sibling"), LASH_OK, "a spec whose turn calls spawn and a failing tool");
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_FAILED, "the failing call fails the run");
  T_EQ_INT(tl.nheld, 1, "spawn had been handed to the host");
  T_EQ_INT(lash_call_status(tl.held[0]), LASH_CALL_CANCELLED, "and is dropped");
  T_EQ_INT(ev.ncancelled, 1, "the host is told with tool_cancelled");
  T_OK(strstr(ev.cancelled, "\"name\":\"spawn\"") != NULL, "naming spawn: %s", ev.cancelled);
  T_EQ_INT(lash_call_return(tl.held[0], "late"), LASH_EGONE, "answering it is LASH_EGONE");
  lash_run_free(run);
  lash_close(S);
}

static const char *SPEC_APPROVE =
  "local remove = lash.tool { name = 'remove', requires_approval = true,\n"
  "  parameters = { type = 'object', properties = { what = { type = 'string' } } },\n"
  "  handler = function(_, a) return 'removed ' .. a.what end }\n"
  "-- asks for two removals, then reports their results (also when resumed)\n"
  "local function turn(m)\n"
  "  local p = m[#m].parts\n"
  "  if p[1].type == 'tool_result' then\n"
  "    return p[1].status .. ':' .. p[1].content .. '|' .. p[2].status .. ':' .. p[2].content\n"
  "  end\n"
  "  return { tool_calls = { { id = 'a', name = 'remove', args = { what = 'house' } },\n"
  "                          { id = 'b', name = 'remove', args = { what = 'tree' } } } }\n"
  "end\n"
  "return { tools = { remove }, model = turn }\n";

static void test_approvals(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  T_EQ_INT(lash_load_spec_string(S, SPEC_APPROVE, "approve"), LASH_OK, "load a spec with a tool needing approval");
  lash_run_start(S, "clean up", NULL, &run);
  for (int f = 0; f < 20 && lash_run_status(run) != LASH_RUN_APPROVAL; f++) lash_step(S, 0);
  T_EQ_INT(lash_run_status(run), LASH_RUN_APPROVAL, "the run waits for approval");
  T_EQ_INT(ev.napprovals, 2, "two approval_request events");
  T_OK(strcmp(ev.approvals[0], "a") == 0 && strcmp(ev.approvals[1], "b") == 0, "with the call ids");
  for (int f = 0; f < 3; f++) lash_step(S, 0);
  T_EQ_INT(lash_run_status(run), LASH_RUN_APPROVAL, "still waiting frames later");
  T_EQ_INT(lash_run_approve(run, "zz", 1, NULL), LASH_EARG, "approving an id it did not ask about");
  T_OK(strstr(lash_errmsg(S), "'zz'") != NULL, "names it: %s", lash_errmsg(S));
  T_EQ_INT(lash_run_approve(run, NULL, 1, NULL), LASH_EARG, "a NULL id");
  T_EQ_INT(lash_run_approve(run, "a", 1, NULL), LASH_OK, "allow a");
  T_EQ_INT(lash_run_approve(run, "a", 0, NULL), LASH_EARG, "answering a twice");
  T_EQ_INT(lash_run_status(run), LASH_RUN_APPROVAL, "b still waits");
  T_EQ_INT(lash_run_approve(run, "b", 0, "Not the tree."), LASH_OK, "deny b with a message");
  T_OK(run_frames(S, run, 50) >= 0 && lash_run_status(run) == LASH_RUN_DONE, "the run ends");
  T_EQ_STR(output_of(run), "ok:removed house|denied:Not the tree.", "a ran, b was denied with the message");
  T_EQ_INT(lash_run_approve(run, "b", 1, NULL), LASH_EARG, "b was answered already");
  lash_run_free(run);

  /* answered from inside the approval_request event */
  events_reset(S);
  ev.approve_inline = 1;
  lash_run_start(S, "clean up", NULL, &run);
  run_frames(S, run, 50);
  T_EQ_STR(output_of(run), "ok:removed house|ok:removed tree", "approvals given from the event callback");
  lash_run_free(run);

  /* "stop" mode: the run ends and says what is pending */
  events_reset(S);
  lash_run_start(S, "clean up", "{\"approval\":\"stop\"}", &run);
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_DONE, "approval \"stop\": the run ends");
  T_OK(strstr(result_json(run), "\"stop_reason\":\"approval_required\"") &&
       strstr(result_json(run), "\"pending\":[") , "with approval_required and the pending calls");
  T_EQ_INT(lash_run_approve(run, "a", 1, NULL), LASH_EGONE, "approving after the run ended is LASH_EGONE");
  {
    /* resume it later from its history, with decisions */
    static char history[8192], opts[9000];
    lash_Run *again;
    T_OK(json_array(result_json(run), "messages", history, sizeof history), "the result carries the history");
    snprintf(opts, sizeof opts, "{\"history\":%s,\"approvals\":{\"a\":true,\"b\":\"Keep the tree.\"}}", history);
    T_EQ_INT(lash_run_start(S, NULL, opts, &again), LASH_OK, "resume with prompt NULL, the history and decisions");
    run_frames(S, again, 50);
    T_EQ_STR(output_of(again), "ok:removed house|denied:Keep the tree.", "the paused turn ran with those decisions");
    lash_run_free(again);
  }
  lash_run_free(run);
  lash_close(S);
}

/* SPEC_SPAWN's conversation, played from the history (so a run resumed
** from a history that stopped for approval goes on where it stopped). */
static const char *SPEC_SPAWN_TURN =
  "return {\n"
  "  instructions = 'hello {{ values.who }}',\n"
  "  model = function(m, info)\n"
  "    local r = m[#m].parts[1]\n"
  "    if r.type == 'tool_result' then return info.instructions .. '|' .. r.status .. '|' .. r.content end\n"
  "    return { tool_calls = { { name = 'spawn', args = { kind = 'tree' } } } }\n"
  "  end,\n"
  "}\n";

/* A host tool registered with LASH_TOOL_REQUIRES_APPROVAL: its calls ask
** first, and the callback only ever sees approved ones. */
static void test_host_tool_approval(void) {
  lash_State *S = lash_open(NULL);
  lash_Run *run;
  events_reset(S);
  memset(&tl, 0, sizeof tl);
  tl.mode = ANSWER;
  lash_set_event_handler(S, on_event, &ev);
  T_EQ_INT(lash_load_spec_string(S, SPEC_SPAWN_TURN, "spawn_turn"), LASH_OK, "load a spec calling spawn");
  lash_set_value(S, "who", "x");
  T_EQ_INT(lash_register_tool_ex(S, "spawn", "Spawn an entity.", SCHEMA, 0x80, on_tool, &tl), LASH_EARG,
           "register_tool_ex with an unknown flag");
  T_OK(strstr(lash_errmsg(S), "unknown flags 0x80") && strstr(lash_errmsg(S), "LASH_TOOL_REQUIRES_APPROVAL"),
       "names the flag and the known ones: %s", lash_errmsg(S));
  T_EQ_INT(lash_register_tool_ex(NULL, "spawn", NULL, SCHEMA, 0, on_tool, &tl), LASH_EARG, "register_tool_ex(NULL state)");
  T_EQ_INT(lash_register_tool_ex(S, NULL, NULL, SCHEMA, 0, on_tool, &tl), LASH_EARG, "register_tool_ex(NULL name)");
  T_EQ_INT(lash_register_tool_ex(S, "spawn", NULL, SCHEMA, 0, NULL, &tl), LASH_EARG, "register_tool_ex(NULL callback)");
  T_EQ_INT(lash_register_tool_ex(S, "spawn", "Spawn an entity.", SCHEMA, 0, on_tool, &tl), LASH_OK,
           "register_tool_ex with no flags");
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 50);
  T_OK(tl.calls == 1 && ev.napprovals == 0, "is an ordinary tool (called without asking)");
  T_EQ_STR(output_of(run), "hello x|ok|made {\"kind\":\"tree\"}", "and answered");
  lash_run_free(run);
  lash_unregister_tool(S, "spawn");

  T_EQ_INT(lash_register_tool_ex(S, "spawn", "Spawn an entity.", SCHEMA, LASH_TOOL_REQUIRES_APPROVAL, on_tool, &tl),
           LASH_OK, "register a host tool that requires approval");
  tl.calls = 0;
  events_reset(S);
  lash_run_start(S, "build", NULL, &run);
  for (int f = 0; f < 20 && lash_run_status(run) != LASH_RUN_APPROVAL; f++) lash_step(S, 0);
  T_EQ_INT(lash_run_status(run), LASH_RUN_APPROVAL, "its call waits for approval");
  T_EQ_INT(ev.napprovals, 1, "after an approval_request event");
  T_EQ_STR(ev.approvals[0], "call_1_1", "with the call's id");
  T_EQ_INT(tl.calls, 0, "the callback is not called before the approval");
  for (int f = 0; f < 3; f++) lash_step(S, 0);
  T_EQ_INT(tl.calls, 0, "nor frames later");
  T_EQ_INT(lash_run_approve(run, "call_1_1", 1, NULL), LASH_OK, "approve it");
  T_OK(run_frames(S, run, 50) >= 0 && lash_run_status(run) == LASH_RUN_DONE, "the run ends");
  T_EQ_INT(tl.calls, 1, "the callback ran once approved");
  T_EQ_STR(output_of(run), "hello x|ok|made {\"kind\":\"tree\"}", "and its answer reached the model");
  T_OK(strstr(ev.types, "tool_call,approval_request,tool_result,") != NULL,
       "events: tool_call, approval_request, tool_result: %s", ev.types);
  lash_run_free(run);

  /* denied: the callback never runs, the model gets the message */
  tl.calls = 0;
  events_reset(S);
  lash_run_start(S, "build", NULL, &run);
  for (int f = 0; f < 20 && lash_run_status(run) != LASH_RUN_APPROVAL; f++) lash_step(S, 0);
  T_EQ_INT(lash_run_approve(run, "call_1_1", 0, "No trees today."), LASH_OK, "deny it with a message");
  run_frames(S, run, 50);
  T_EQ_INT(tl.calls, 0, "a denied call never reaches the callback");
  T_EQ_STR(output_of(run), "hello x|denied|No trees today.", "the model sees the denial");
  lash_run_free(run);

  /* approved from inside the approval_request event */
  events_reset(S);
  ev.approve_inline = 1;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 50);
  T_EQ_INT(tl.calls, 1, "approved from the event callback, the tool runs");
  T_EQ_STR(output_of(run), "hello x|ok|made {\"kind\":\"tree\"}", "to its answer");
  lash_run_free(run);

  /* "stop": the run ends with the host call pending; resumed with a decision */
  tl.calls = 0;
  events_reset(S);
  lash_run_start(S, "build", "{\"approval\":\"stop\"}", &run);
  run_frames(S, run, 50);
  T_OK(strstr(result_json(run), "\"stop_reason\":\"approval_required\"") &&
       strstr(result_json(run), "\"name\":\"spawn\""), "approval \"stop\": the host call is pending: %s",
       result_json(run));
  T_EQ_INT(tl.calls, 0, "and was not called");
  {
    static char history[8192], opts[9000];
    lash_Run *again;
    T_OK(json_array(result_json(run), "messages", history, sizeof history), "the result carries the history");
    snprintf(opts, sizeof opts, "{\"history\":%s,\"approvals\":{\"call_1_1\":true}}", history);
    T_EQ_INT(lash_run_start(S, NULL, opts, &again), LASH_OK, "resume it with the call approved");
    run_frames(S, again, 50);
    T_EQ_INT(tl.calls, 1, "the host tool runs on the resumed run");
    T_EQ_STR(output_of(again), "hello x|ok|made {\"kind\":\"tree\"}", "to its answer");
    lash_run_free(again);
  }
  lash_run_free(run);
  lash_close(S);
}

static void test_fd_and_budget(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  lua_State *L;
  int fd, done;
  lash_set_value(S, "who", "x");
  fd = lash_fd(S);
  T_OK(fd >= 0, "lash_fd gives a descriptor");
  T_OK(!readable(fd, 0), "not readable while idle");
  tl.mode = HOLD;
  lash_run_start(S, "build", NULL, &run);
  T_OK(readable(fd, 0), "readable once a run is ready to start");
  frames_until_calls(S, 1, 50);
  while (readable(fd, 0) && lash_step(S, 0) > 0) {}
  T_OK(!readable(fd, 0), "not readable while the run waits for the host");
  lash_call_return(tl.held[0], "ok");
  T_OK(readable(fd, 0), "readable after lash_call_return, between frames");
  run_frames(S, run, 50);
  lash_run_free(run);

  /* a due timer makes it readable too */
  T_EQ_INT(lash_dostring(S, "local lash = require 'lash'; slept = false; "
                            "lash.spawn(function() lash.sleep(0.03) slept = true end)", "=t"),
           LASH_OK, "a task that sleeps 30 ms");
  lash_step(S, 0);
  T_OK(!readable(fd, 0), "not readable while the timer is pending");
  T_OK(readable(fd, 5000), "readable when it is due");
  lash_step(S, 0);
  T_EQ_INT(lash_dostring(S, "assert(slept)", "=t"), LASH_OK, "and the step woke the task");

  /* the frame budget: 40 ready tasks of 2 ms each do not fit in 5 ms */
  T_EQ_INT(lash_dostring(S, "local lash = require 'lash'; finished = 0; "
                            "for i = 1, 40 do lash.spawn(function() "
                            "local t = lash.now() while lash.now() - t < 0.002 do end "
                            "finished = finished + 1 end) end", "=t"),
           LASH_OK, "40 tasks that compute for 2 ms each");
  T_EQ_INT(lash_step(S, 5), 1, "a 5 ms step leaves work");
  L = lash_lua(S);
  lua_getglobal(L, "finished");
  done = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  T_OK(done > 0 && done < 40, "it resumed some of them, not all (%d)", done);
  T_OK(readable(fd, 0), "the tasks left over keep the fd readable");
  T_EQ_INT(lash_step(S, 0), 0, "a budget of 0 resumes every ready task");
  T_EQ_INT(lash_dostring(S, "assert(finished == 40)", "=t"), LASH_OK, "all 40 ran");
  lash_close(S);
}

/* Budgeted steps hold the collector while tasks run and pay its work
** afterwards: garbage is still collected, memory stays bounded, and the
** collector runs again between steps (or stays stopped if the host
** stopped it). */
static void test_budget_gc(void) {
  lash_State *S = lash_open(NULL);
  size_t peak = 0;
  int i;
  T_EQ_INT(lash_dostring(S, "local lash = require 'lash'; churn = lash.spawn(function() "
                            "while true do local t = {} for i = 1, 2000 do t[i] = {i} end "
                            "lash.sleep(0) end end)", "=t"),
           LASH_OK, "a task that makes ~100 KiB of garbage per resume");
  for (i = 0; i < 3000; i++) {
    lash_step(S, 1);
    if (lash_memory_used(S) > peak) peak = lash_memory_used(S);
  }
  T_OK(peak < (48u << 20), "3,000 budgeted steps of 2,000 new tables each stay under 48 MiB (peak %zu KiB)", peak >> 10);
  T_EQ_INT(lash_dostring(S, "assert(collectgarbage('isrunning'))", "=t"), LASH_OK,
           "the collector runs again between steps");
  T_EQ_INT(lash_dostring(S, "collectgarbage('stop')", "=t"), LASH_OK, "the host stops the collector");
  lash_step(S, 1);
  T_EQ_INT(lash_dostring(S, "assert(not collectgarbage('isrunning')) collectgarbage('restart') churn:cancel()", "=t"),
           LASH_OK, "a budgeted step leaves it stopped");
  lash_close(S);
}

static void test_reentry(void) {
  lash_State *S = open_spawn();
  lash_Run *run;
  lash_set_value(S, "who", "x");
  tl.mode = ANSWER;
  ev.reenter = 1;
  ev.follow_up = 1;
  lash_run_start(S, "build", NULL, &run);
  lash_step(S, 0);
  T_EQ_INT(ev.reenter_step, LASH_EBUSY, "lash_step inside a callback is LASH_EBUSY");
  T_EQ_INT(ev.reenter_close, LASH_EBUSY, "so is lash_close");
  T_EQ_INT(ev.reenter_run, LASH_EBUSY, "and lash_run");
  ev.reenter = 0;
  run_frames(S, run, 50);
  T_EQ_INT(lash_run_status(run), LASH_RUN_DONE, "the run is unharmed");
  T_EQ_INT(ev.follow_start, LASH_OK, "lash_run_start inside a callback works");
  T_EQ_INT(ev.follow_lua, LASH_OK, "so does lash_dostring");
  T_OK(ev.second && run_frames(S, ev.second, 50) >= 0, "the run started from the callback runs");
  T_EQ_STR(output_of(ev.second), "hello twice|ok|made {\"kind\":\"tree\"}", "to its answer");
  T_EQ_INT(lash_dostring(S, "assert(reentered)", "=t"), LASH_OK, "and the Lua ran");
  lash_run_free(ev.second);
  lash_run_free(run);
  lash_close(S);
}

static const char *SPEC_SLEEPY =
  "local nap = lash.tool { name = 'nap', handler = function() lash.sleep(3600) end }\n"
  "local remove = lash.tool { name = 'remove', requires_approval = true, handler = function() return 'x' end }\n"
  "return { tools = { nap, remove }, model = lash.script_model {\n"
  "  function(m) local n = m[1].parts[1].text\n"
  "    return { tool_calls = { { name = n, args = n == 'spawn' and { kind = 'tree' } or {} } } } end } }\n";

static void test_close_in_flight(void) {
  lash_State *S = open_spawn();
  lash_Run *runs[5];
  lash_Call *c;
  const char *out, *json;
  int i;
  lash_set_value(S, "who", "x");
  tl.mode = ANSWER;
  lash_run_start(S, "build", NULL, &runs[4]);
  run_frames(S, runs[4], 50);
  T_EQ_INT(lash_run_status(runs[4]), LASH_RUN_DONE, "one run finished before closing");
  tl.mode = HOLD;
  T_EQ_INT(lash_load_spec_string(S, SPEC_SLEEPY, "sleepy"), LASH_OK, "a spec whose runs wait on a host tool, an approval, a sleep");
  lash_run_start(S, "spawn", NULL, &runs[0]);
  lash_run_start(S, "remove", NULL, &runs[1]);
  lash_run_start(S, "nap", NULL, &runs[2]);
  lash_run_start(S, "nap", NULL, &runs[3]);
  for (i = 0; i < 10; i++) lash_step(S, 0);
  T_EQ_INT(tl.nheld, 1, "the first waits on the host tool");
  c = tl.held[0];
  T_EQ_INT(lash_run_status(runs[1]), LASH_RUN_APPROVAL, "the second waits for approval");
  T_EQ_INT(lash_run_status(runs[2]), LASH_RUN_RUNNING, "the third sleeps in a Lua tool");
  T_EQ_INT(lash_run_cancel(runs[3]), LASH_OK, "the fourth is being cancelled");
  ev.n = 0;
  T_EQ_INT(lash_close(S), LASH_OK, "close the state with all of them in flight");
  T_EQ_INT(ev.n, 0, "closing delivered no events");
  for (i = 0; i < 4; i++) {
    T_EQ_INT(lash_run_status(runs[i]), LASH_RUN_CANCELLED, "a run in flight ends cancelled");
    T_EQ_INT(lash_run_result(runs[i], &out, &json), LASH_OK, "its result is readable after close");
    T_OK(out == NULL && json && strstr(json, "\"status\":\"cancelled\""), "and says cancelled: %s", json ? json : "(null)");
  }
  T_EQ_INT(lash_run_status(runs[4]), LASH_RUN_DONE, "the finished run keeps its status");
  T_EQ_STR(output_of(runs[4]), "hello x|ok|made {\"kind\":\"tree\"}", "and its answer");
  T_EQ_INT(lash_call_return(c, "late"), LASH_EGONE, "answering a call after close is LASH_EGONE");
  T_EQ_INT(lash_call_status(c), LASH_CALL_CANCELLED, "the call says cancelled");
  T_EQ_INT(lash_run_approve(runs[1], "call_1_1", 1, NULL), LASH_EGONE, "approving after close is LASH_EGONE");
  T_EQ_INT(lash_run_cancel(runs[2]), LASH_EGONE, "cancelling after close is LASH_EGONE");
  for (i = 0; i < 5; i++) T_EQ_INT(lash_run_free(runs[i]), LASH_OK, "free a run after close");
}

/* Entries of dir other than "." and "..", or -1 if it cannot be read. */
static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static void rm_tree(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", dir);
}

/* A local sandbox made by a spec run: it writes a file, then calls the
** host's probe (held, so the test can look while the sandbox exists). */
static const char *SPEC_SANDBOX =
  "return { capabilities = { 'LocalSandbox' }, model = lash.script_model {\n"
  "  { tool_calls = { { name = 'run_command', args = { command = 'echo hi > note.txt' } } } },\n"
  "  { tool_calls = { { name = 'probe', args = {} } } },\n"
  "  function(m) return m[#m].parts[1].content end } }\n";

/* lash_Options.state_root is where local sandboxes of the state's runs
** live (and it wins over $LASH_SANDBOX_ROOT). */
static void test_state_root(void) {
  char root[] = "/tmp/lash_test_root_XXXXXX", envroot[] = "/tmp/lash_test_env_XXXXXX";
  char *saved_env = getenv("LASH_SANDBOX_ROOT") ? strdup(getenv("LASH_SANDBOX_ROOT")) : NULL;
  lash_Options o;
  lash_State *S;
  lash_Run *run;
  int during;
  lash_options_init(&o);
  if (!mkdtemp(root) || !mkdtemp(envroot)) {
    T_OK(0, "make temporary state roots");
    free(saved_env);
    return;
  }
  /* as root the jail runs as another uid, which must reach the roots */
  chmod(root, 0755);
  chmod(envroot, 0755);
  o.state_root = root;
  S = lash_open(&o);
  if (lash_dostring(S, "local ok, why = require('lash').sandbox.probe { backend = 'local' } "
                       "if not ok then error(why, 0) end", "=probe") != LASH_OK) {
    T_OK(1, "# SKIP local sandboxes do not work here: %s", lash_errmsg(S));
    lash_close(S);
    rm_tree(root);
    rm_tree(envroot);
    free(saved_env);
    return;
  }
  setenv("LASH_SANDBOX_ROOT", envroot, 1);
  events_reset(S);
  memset(&tl, 0, sizeof tl);
  tl.mode = HOLD;
  T_EQ_INT(lash_load_spec_string(S, SPEC_SANDBOX, "sandboxed"), LASH_OK, "a spec with a local sandbox");
  T_EQ_INT(lash_register_tool(S, "probe", NULL, NULL, on_tool, &tl), LASH_OK, "and a host probe tool");
  lash_run_start(S, "go", NULL, &run);
  for (int f = 0; f < 2000 && tl.calls < 1 && lash_run_status(run) < LASH_RUN_DONE; f++) lash_step(S, 10);
  T_OK(tl.calls == 1, "the run made its sandbox, ran a command in it and called the probe %s",
       lash_run_status(run) >= LASH_RUN_DONE ? result_json(run) : "");
  during = dir_entries(root);
  T_OK(during >= 1, "the sandbox lives under lash_Options.state_root (%d entries in %s)", during, root);
  T_EQ_INT(dir_entries(envroot), 0, "not under $LASH_SANDBOX_ROOT: the option wins");
  if (tl.nheld) lash_call_return(tl.held[0], "seen");
  for (int f = 0; f < 2000 && lash_run_status(run) < LASH_RUN_DONE; f++) lash_step(S, 10);
  T_EQ_STR(output_of(run), "seen", "the run ends");
  lash_run_free(run);
  lash_close(S);
  if (saved_env) setenv("LASH_SANDBOX_ROOT", saved_env, 1);
  else unsetenv("LASH_SANDBOX_ROOT");
  free(saved_env);
  rm_tree(root);
  rm_tree(envroot);
}

static int logged;
static void on_log(void *ud, int level, const char *msg) {
  (void)ud; (void)level; (void)msg;
  logged++;
}

static void test_attach(void) {
  lua_State *L = luaL_newstate();
  lash_State *S, *S2;
  lash_Options o;
  lash_Run *run;
  luaL_openlibs(L);
  S = lash_attach(L, NULL);
  T_OK(S && strcmp(lash_errmsg(S), "no error") == 0, "attach to a host's Lua state");
  T_OK(lash_lua(S) == L, "the state is the host's");
  S2 = lash_attach(L, NULL);
  T_EQ_INT(lash_step(S2, 0), LASH_EARG, "a second attachment to the same state fails");
  T_OK(strstr(lash_errmsg(S2), "attached already") != NULL, "saying so");
  lash_close(S2);
  events_reset(S);
  memset(&tl, 0, sizeof tl);
  tl.mode = HOLD;
  lash_load_spec_string(S, SPEC_SPAWN, "spawn");
  lash_register_tool(S, "spawn", NULL, SCHEMA, on_tool, &tl);
  lash_set_value(S, "who", "host");
  T_EQ_INT(lash_run_start(S, "build", NULL, &run), LASH_OK, "a run in the host's state");
  frames_until_calls(S, 1, 50);
  lash_call_return(tl.held[0], "attached");
  run_frames(S, run, 50);
  T_EQ_STR(output_of(run), "hello host|ok|attached", "runs like in an owned state");
  lash_run_free(run);
  T_OK(lash_memory_used(S) > 0, "memory_used reports the host's heap");
  T_EQ_INT(lash_set_memory_limit(S, 1 << 20), LASH_EARG, "but a budget is not ours to set");
  /* the host's own Lua use of lash keeps going after lash_close */
  T_OK(luaL_dostring(L, "local lash = require 'lash'; host_task = lash.spawn(function() lash.sleep(0.01) return 7 end)") == LUA_OK,
       "the host spawns its own lash task");
  tl.nheld = 0;
  lash_run_start(S, "build", NULL, &run);
  frames_until_calls(S, 2, 50);
  T_EQ_INT(lash_close(S), LASH_OK, "close the attachment with a run in flight");
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "the run was cancelled");
  lash_run_free(run);
  T_OK(luaL_dostring(L, "local lash = require 'lash'; lash.run(); assert(host_task:join() == 7)") == LUA_OK,
       "the host's task was left alone and still finishes: %s", lua_tostring(L, -1));
  lash_options_init(&o);
  o.log = on_log;
  S = lash_attach(L, &o);
  T_OK(S && strcmp(lash_errmsg(S), "no error") == 0, "attach again after close, with a log callback");
  T_OK(luaL_dostring(L, "require('lash').log('warning', 'from the host')") == LUA_OK && logged == 1,
       "the host's Lua logs through it");
  lash_close(S);
  T_OK(luaL_dostring(L, "require('lash').log('debug', 'after close')") == LUA_OK && logged == 1,
       "after close the runtime no longer calls it");
  lash_options_init(&o);
  o.memory_limit = 1 << 20;
  S = lash_attach(L, &o);
  T_EQ_INT(lash_step(S, 0), LASH_EARG, "attach with a memory budget is refused");
  T_OK(strstr(lash_errmsg(S), "memory_limit") != NULL, "saying why");
  lash_close(S);
  lua_close(L);

  L = luaL_newstate();
  luaL_openlibs(L);
  S = lash_attach_release(L, NULL, LUA_VERSION_RELEASE_NUM + 1);
  T_EQ_INT(lash_step(S, 0), LASH_EARG, "attach from a host of another Lua 5.4 release is refused");
  T_OK(strstr(lash_errmsg(S), "same release") != NULL && strstr(lash_errmsg(S), LUA_RELEASE) != NULL,
       "naming both releases: %s", lash_errmsg(S));
  lash_close(S);
  T_OK(luaL_dostring(L, "return package.loaded['lash.core'] == nil") == LUA_OK && lua_toboolean(L, -1),
       "and the host's state is left untouched");
  lua_close(L);

  L = luaL_newstate();
  S = lash_attach(L, NULL);
  T_EQ_INT(lash_step(S, 0), LASH_ERUN, "attach to a state without the standard libraries fails");
  T_OK(strstr(lash_errmsg(S), "luaL_openlibs") != NULL, "saying what to do: %s", lash_errmsg(S));
  lash_close(S);
  lua_close(L);
}

/* The host owns its signals: lash installs no handler and changes no
** mask, so the host's own SIGTERM handler runs, and the host stops a run
** from its loop with lash_run_cancel (the documented way in). */
static volatile sig_atomic_t host_got_term;

static void host_on_term(int sig) {
  (void)sig;
  host_got_term = 1;
}

static int same_signals(const struct sigaction *before, const sigset_t *mask) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT};
  sigset_t now;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction sa;
    sigaction(sigs[i], NULL, &sa);
    if (sa.sa_handler != before[i].sa_handler) return 0;
  }
  sigprocmask(SIG_SETMASK, NULL, &now);
  for (int sig = 1; sig < 32; sig++)
    if (sigismember(&now, sig) != sigismember(mask, sig)) return 0;
  return 1;
}

static void test_host_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT};
  struct sigaction host, before[6], old;
  sigset_t mask;
  lash_State *S;
  lash_Run *run;
  memset(&host, 0, sizeof host);
  host.sa_handler = host_on_term;
  sigemptyset(&host.sa_mask);
  sigaction(SIGTERM, &host, &old);
  for (size_t i = 0; i < 6; i++) sigaction(sigs[i], NULL, &before[i]);
  sigprocmask(SIG_SETMASK, NULL, &mask);
  S = open_spawn();
  T_OK(same_signals(before, &mask), "lash_open installs no signal handler and blocks no signal");
  lash_set_value(S, "who", "x");
  tl.mode = HOLD;
  lash_run_start(S, "build", NULL, &run);
  T_OK(frames_until_calls(S, 1, 50) >= 0 && lash_run_status(run) < LASH_RUN_DONE,
       "a run waits on its tool call");
  T_OK(same_signals(before, &mask), "nor does running (a tool call waiting)");
  host_got_term = 0;
  raise(SIGTERM);
  T_EQ_INT(host_got_term, 1, "SIGTERM reaches the host's own handler");
  /* the host's loop sees the flag and cancels through the API */
  for (int f = 0; f < 50 && lash_run_status(run) < LASH_RUN_DONE; f++) {
    if (host_got_term) {
      T_EQ_INT(lash_run_cancel(run), LASH_OK, "the host cancels the run from its loop");
      host_got_term = 0;
    }
    lash_step(S, 0);
  }
  T_EQ_INT(lash_run_status(run), LASH_RUN_CANCELLED, "the run ends cancelled");
  lash_run_free(run);
  T_EQ_INT(lash_close(S), LASH_OK, "lash_close");
  T_OK(same_signals(before, &mask), "and lash_close leaves the host's signals as they were");
  sigaction(SIGTERM, &old, NULL);
}

/* ---- hooks from C ------------------------------------------------------- */

/* Two spawns in one turn (a cloud and a tree), then an answer listing the
** results the model saw. */
static const char *SPEC_HOOKS =
  "return { model = lash.script_model {\n"
  "  { tool_calls = { { name = 'spawn', args = { kind = 'cloud' } }, { name = 'spawn', args = { kind = 'tree' } } } },\n"
  "  function(m, info) local out = { info.instructions or '-' }\n"
  "    for _, p in ipairs(m[#m].parts) do out[#out + 1] = p.status .. ':' .. p.content end\n"
  "    return table.concat(out, '|') end,\n"
  "} }\n";

typedef struct hooklog {
  int calls[6];
  char last_payload[6][512];
  lash_Call *held;
  int hold_before_tool;       /* hold the first before_tool_call for frames */
  int fail_model_request;
  int stop_model_request;
} hooklog;

static hooklog hk;

static void on_before_tool(lash_Call *call, const char *payload, void *ud) {
  hooklog *h = ud;
  h->calls[0]++;
  snprintf(h->last_payload[0], sizeof h->last_payload[0], "%s", payload);
  if (h->hold_before_tool && !h->held) {
    h->held = call;             /* answered frames later */
    return;
  }
  if (strstr(payload, "\"kind\":\"cloud\""))
    lash_call_return(call, "\"No clouds in this level.\"");                  /* deny */
  else
    lash_call_return(call, "{\"args\":{\"kind\":\"house\"}}");              /* edit */
}

static void on_after_tool(lash_Call *call, const char *payload, void *ud) {
  hooklog *h = ud;
  h->calls[1]++;
  snprintf(h->last_payload[1], sizeof h->last_payload[1], "%s", payload);
  lash_call_return(call, "{\"content\":\"replaced by the host\"}");         /* replace */
}

static void on_model_request(lash_Call *call, const char *payload, void *ud) {
  hooklog *h = ud;
  h->calls[2]++;
  snprintf(h->last_payload[2], sizeof h->last_payload[2], "%.511s", payload);
  if (h->fail_model_request) lash_call_fail(call, "the engine is shutting down");
  else if (h->stop_model_request) lash_call_retry(call, "no requests during a cutscene");
  else if (strstr(payload, "\"step\":2")) lash_call_return(call, "{\"instructions\":\"edited by the host\"}");
  else lash_call_return(call, NULL);
}

static void on_run_end_hook(lash_Call *call, const char *payload, void *ud) {
  hooklog *h = ud;
  h->calls[3]++;
  snprintf(h->last_payload[3], sizeof h->last_payload[3], "%.511s", payload);
  lash_call_return(call, "null");
}

static void test_hooks(void) {
  lash_State *S = lash_open(NULL);
  lash_Run *run;
  events_reset(S);
  memset(&tl, 0, sizeof tl);
  memset(&hk, 0, sizeof hk);
  tl.mode = ANSWER;
  lash_load_spec_string(S, SPEC_HOOKS, "hooks_spec");
  lash_register_tool(S, "spawn", "Spawn an entity.", SCHEMA, on_tool, &tl);
  lash_set_event_handler(S, on_event, &ev);
  T_EQ_INT(lash_register_hook(S, "before_tool_cal", on_before_tool, &hk), LASH_EARG, "an unknown hook is LASH_EARG");
  T_OK(strstr(lash_errmsg(S), "known hooks: before_model_request") != NULL, "naming the known ones: %s",
       lash_errmsg(S));
  T_EQ_INT(lash_register_hook(NULL, "on_run_end", on_run_end_hook, &hk), LASH_EARG, "a NULL state is LASH_EARG");
  T_EQ_INT(lash_register_hook(S, "before_tool_call", on_before_tool, &hk), LASH_OK, "register before_tool_call");
  T_EQ_INT(lash_register_hook(S, "after_tool_call", on_after_tool, &hk), LASH_OK, "register after_tool_call");
  T_EQ_INT(lash_register_hook(S, "before_model_request", on_model_request, &hk), LASH_OK, "and before_model_request");
  T_EQ_INT(lash_register_hook(S, "on_run_end", on_run_end_hook, &hk), LASH_OK, "and on_run_end");

  T_EQ_INT(lash_run_start(S, "build", NULL, &run), LASH_OK, "start a run");
  T_OK(run_frames(S, run, 100) >= 0, "it ends");
  T_OK(lash_run_status(run) == LASH_RUN_DONE, "done: %s", result_json(run));
  T_EQ_STR(output_of(run), "edited by the host|denied:No clouds in this level.|ok:replaced by the host",
           "deny, edit (the tool made a house) and replace all reached the model, and the instructions edit");
  T_EQ_INT(tl.calls, 1, "only the allowed call reached the host tool");
  T_EQ_STR(tl.last_args, "{\"kind\":\"house\"}", "with the arguments the hook edited");
  T_EQ_INT(hk.calls[0], 2, "before_tool_call saw both calls");
  T_OK(strstr(hk.last_payload[1], "\"result\":{\"content\":\"made {\\\"kind\\\":\\\"house\\\"}\"") != NULL,
       "after_tool_call saw the tool's own result: %s", hk.last_payload[1]);
  T_EQ_INT(hk.calls[2], 2, "before_model_request ran before each request");
  T_EQ_INT(hk.calls[3], 1, "on_run_end ran once");
  T_OK(strstr(hk.last_payload[3], "\"stop_reason\":\"complete\"") != NULL, "with the outcome: %s", hk.last_payload[3]);
  lash_run_free(run);

  /* a hook answered three frames later: the run waits for it */
  hk.hold_before_tool = 1;
  lash_run_start(S, "build", NULL, &run);
  for (int f = 0; f < 50 && !hk.held; f++) { frame++; lash_step(S, 0); }
  T_OK(hk.held != NULL, "the hook was called and held");
  T_EQ_STR(lash_call_name(hk.held), "before_tool_call", "the call is named after the hook");
  for (int f = 0; f < 3; f++) { frame++; lash_step(S, 0); }
  T_EQ_INT(lash_run_status(run), LASH_RUN_RUNNING, "the run waits for the hook");
  T_EQ_INT(lash_call_return(hk.held, "false"), LASH_OK, "deny it three frames later");
  run_frames(S, run, 100);
  T_OK(strstr(output_of(run), "denied:The tool call was denied by a hook.") != NULL, "denied: %s", output_of(run));
  lash_run_free(run);
  hk.hold_before_tool = 0;

  /* stopping the run from before_model_request, and failing it */
  hk.stop_model_request = 1;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 100);
  T_EQ_INT(lash_run_status(run), LASH_RUN_FAILED, "a hook's stop fails the run");
  T_OK(strstr(result_json(run), "\"kind\":\"hook\"") && strstr(result_json(run), "no requests during a cutscene"),
       "with kind hook and the host's message: %s", result_json(run));
  lash_run_free(run);
  hk.stop_model_request = 0;
  hk.fail_model_request = 1;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 100);
  T_OK(strstr(result_json(run), "the engine is shutting down") != NULL, "lash_call_fail fails it: %s",
       result_json(run));
  lash_run_free(run);
  hk.fail_model_request = 0;

  /* removed hooks pass */
  T_EQ_INT(lash_register_hook(S, "before_tool_call", NULL, NULL), LASH_OK, "remove before_tool_call");
  T_EQ_INT(lash_register_hook(S, "after_tool_call", NULL, NULL), LASH_OK, "and after_tool_call");
  memset(&tl, 0, sizeof tl);
  tl.mode = ANSWER;
  lash_run_start(S, "build", NULL, &run);
  run_frames(S, run, 100);
  T_EQ_INT(tl.calls, 2, "both calls reach the tool without the hooks");
  lash_run_free(run);
  lash_close(S);
}

int main(void) {
  test_host_signals();
  test_misuse();
  test_specs();
  test_parts_and_output();
  test_answer_at_once();
  test_three_frames_later();
  test_retry_and_fail();
  test_cancel_mid_tool();
  test_approvals();
  test_host_tool_approval();
  test_fd_and_budget();
  test_budget_gc();
  test_reentry();
  test_close_in_flight();
  test_state_root();
  test_attach();
  test_hooks();
  return T_DONE();
}
