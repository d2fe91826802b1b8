/*
** lash.h: the public C API of lash, an embeddable Lua-scriptable agent
** harness. Small and stable; every type is opaque.
**
** A host (a game, an editor, a server) opens a lash_State, loads an agent
** spec, registers its own functions as tools, starts runs and calls
** lash_step once per frame; lash never blocks longer than the budget it is
** given and starts no threads.
**
**   lash_State *S = lash_open(NULL);
**   lash_load_spec_file(S, "agent.lua");
**   lash_register_tool(S, "spawn_entity", "Spawn an entity.", schema_json,
**                      on_spawn, scene);
**   lash_set_event_handler(S, on_event, ui);
**   lash_Run *run;
**   lash_run_start(S, "Build a small village.", NULL, &run);
**   while (game_running) {
**     ... the frame ...
**     lash_step(S, 1);                       // at most ~1 ms of agent work
**   }
**   lash_run_free(run);
**   lash_close(S);
**
** Threading: a lash_State belongs to one thread. Use one state per thread;
** never call into a state, or any handle from it, from two threads. lash
** starts no threads.
**
** Errors: calls return LASH_OK (0), a non-negative value where documented,
** or a negative LASH_E* status; after a failure lash_errmsg(S) says why
** (valid until the next call on S). No call exits or aborts the process.
**
** Callbacks (tool calls, events, log) run on the caller's thread, from
** inside lash_step / lash_run or another call that runs Lua. Inside a
** callback every function may be called except lash_step, lash_run and
** lash_close, which return LASH_EBUSY there. Strings passed to a callback
** are valid until it returns.
**
** Ownership: the host frees what it creates: lash_close(S) for a state,
** lash_run_free(run) for each run (before or after lash_close). A
** lash_Call is owned by its run and valid until lash_run_free.
** Prefix lash_ / LASH_ (defined in state.c: the state half; embed.c: the
** agent half).
*/
#ifndef lash_h
#define lash_h

#include <stddef.h>

/* LASH_API marks the exported functions (default visibility with GCC and
** Clang; a host may predefine it). */
#ifndef LASH_API
#if defined(__GNUC__) || defined(__clang__)
#define LASH_API __attribute__((visibility("default")))
#else
#define LASH_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LASH_VERSION_STRING "0.1.0"

#define LASH_OK 0
#define LASH_ERUN -1     /* a Lua error (message in lash_errmsg) */
#define LASH_EMEM -2     /* the memory budget was exceeded or malloc failed */
#define LASH_EARG -3     /* misuse: NULL handle, bad argument, answered twice */
#define LASH_ESYS -4     /* the operating system refused (epoll, ...) */
#define LASH_EGONE -5    /* the run or call is over (finished, cancelled, or
                         ** its state closed): nothing was done */
#define LASH_EBUSY -6    /* not now: the run is still going, or a callback
                         ** called lash_step, lash_run or lash_close */

typedef struct lash_State lash_State;
typedef struct lash_Run lash_Run;
typedef struct lash_Call lash_Call;

/* A memory allocator, with the contract of Lua's lua_Alloc (nsize 0 frees
** and returns NULL; otherwise realloc semantics). */
typedef void *(*lash_Alloc)(void *ud, void *ptr, size_t osize, size_t nsize);

/* Log levels passed to lash_Options.log. */
#define LASH_LOG_DEBUG 0
#define LASH_LOG_INFO 1
#define LASH_LOG_WARN 2
#define LASH_LOG_ERROR 3

typedef struct lash_Options {
  /* Upper bound on the Lua heap in bytes; 0 means unlimited. Almost all of
  ** lash's memory is in the Lua heap; the few C records behind lash_Run
  ** and lash_Call handles, and answers in flight, use malloc. */
  size_t memory_limit;
  /* Allocator for the Lua state; NULL means realloc/free. */
  lash_Alloc alloc;
  void *alloc_ud;
  /* lash's own Lua modules (`lash`, `lash.*`) are compiled into the
  ** library. A directory given here (or, when NULL, in $LASH_LUA_DIR) is
  ** searched first, for developing them from a source tree ("lua/" of a
  ** checkout); a module missing there comes from the library. */
  const char *lua_dir;
  /* Root directory for the local sandboxes of this state's runs (a
  ** sandbox's own state_root option still wins; this one wins over
  ** $LASH_SANDBOX_ROOT). NULL means $LASH_SANDBOX_ROOT, else
  ** /var/lib/lash/sandboxes as root, else $XDG_STATE_HOME/lash/sandboxes
  ** (or ~/.local/state/lash/sandboxes). */
  const char *state_root;
  /* Receives warnings and diagnostics; NULL means stderr. */
  void (*log)(void *ud, int level, const char *msg);
  void *log_ud;
} lash_Options;

/* ---- states ---------------------------------------------------------- */

/* Fill opts with the defaults. */
LASH_API void lash_options_init(lash_Options *opts);

/* Open a state with its own Lua state (opts may be NULL). Returns NULL
** only when memory for the state itself cannot be had. If opening failed
** otherwise, lash_errmsg says why and every call on S returns the failure
** until lash_close(S). */
LASH_API lash_State *lash_open(const lash_Options *opts);

/* lash_attach (a host's own Lua 5.4 state) is in lash_lua.h. */

/* Cancel every task still running (attached: the runs started through
** this API), give them a bounded time to clean up (sandboxes are
** destroyed), then free everything but the lash_Run handles the host has
** not freed: those stay readable (status, result; cancelled if they were
** still going) and answer everything else with LASH_EGONE. Delivers no
** callbacks. NULL is a no-op. LASH_EBUSY inside a callback.
** lash installs no signal handling; to stop on a signal, note it in your
** handler and call lash_run_cancel or lash_close from your loop: both are
** async-signal-unsafe (never call them from a signal handler). */
LASH_API int lash_close(lash_State *S);

/* Run Lua code or a file in the state (protected, with a traceback). */
LASH_API int lash_dostring(lash_State *S, const char *code, const char *chunkname);
LASH_API int lash_dofile(lash_State *S, const char *path);

/* Why the last call failed. Never NULL. */
LASH_API const char *lash_errmsg(lash_State *S);

/* Bytes the Lua heap uses now; change the budget (0 = unlimited; not for
** attached states). */
LASH_API size_t lash_memory_used(lash_State *S);
LASH_API int lash_set_memory_limit(lash_State *S, size_t limit);

LASH_API const char *lash_version(void);

/* ---- stepping -------------------------------------------------------- */

/* Advance every run and task: wait for I/O at most budget_ms (not at all
** when tasks are ready), dispatch it, then resume the tasks that were
** ready, each until its next wait, in order. With budget_ms > 0 the call
** returns once budget_ms have passed, leaving the tasks not yet resumed
** for the next call (a resume is never interrupted, so one long Lua
** computation can overrun); 0 polls without blocking and resumes every
** ready task; -1 blocks until something happens. With budget_ms > 0 the
** Lua collector is held while tasks run and its work is done at the end
** of the step, within the budget where it fits (the rest carries over, up
** to a few MiB), so garbage collection also keeps to the frame. Returns 1
** while work remains, 0 when idle, or a negative status. Call it once per
** frame. */
LASH_API int lash_step(lash_State *S, int budget_ms);
/* Run until no task is left. */
LASH_API int lash_run(lash_State *S);
/* A file descriptor that is readable whenever lash_step has work: I/O,
** a due timer, or a ready task (including one made ready by
** lash_call_return or lash_run_approve between frames), for hosts that
** wait in their own poll/epoll. Wait for POLLIN, then call lash_step.
** The first call costs two file descriptors (an eventfd and a timerfd). */
LASH_API int lash_fd(lash_State *S);

/* ---- agents ---------------------------------------------------------- */

/* Load the agent spec runs will use: a Lua file or string returning
** lash.agent{...} or a table in the same shape, or a YAML or JSON spec
** (lua/lash/spec.lua). Replaces the previous agent; runs in flight keep
** theirs. A file is loaded as `lash run` loads it without --trust: Lua in
** a safe environment (no io, os.execute, require, ...) under an
** instruction and a memory budget (require("lash.spec").BUDGET: 10^7
** instructions, 64 MiB; lash_dostring may change it); its extension
** (.lua, .yaml/.yml, .json) gives the format. A string's format comes from name's extension,
** else JSON if it starts with '{', else Lua; name labels errors (NULL:
** "spec"). lash_load_spec_string runs a Lua string trusted, with the full
** standard library and no budget: use it for the host's own text only.
** lash_load_spec_string_safe loads any other text (a user's, a
** download's) exactly as a file is loaded. */
LASH_API int lash_load_spec_file(lash_State *S, const char *path);
LASH_API int lash_load_spec_string(lash_State *S, const char *text, const char *name);
LASH_API int lash_load_spec_string_safe(lash_State *S, const char *text,
                               const char *name);

/* A string the spec's instruction templates read as {{ values.key }}, for
** runs started from now on (a run's options may override it). value NULL
** removes the key. */
LASH_API int lash_set_value(lash_State *S, const char *key, const char *value);

/* ---- host tools -------------------------------------------------------- */

/* Called when a run calls a host tool. args_json is the validated
** arguments object. Answer now or on any later frame with exactly one of
** lash_call_return / lash_call_retry / lash_call_fail; the run waits
** until then, or until it stops waiting (the run was cancelled, another
** call of the same turn failed): then a tool_cancelled event arrives and
** lash_call_status says LASH_CALL_CANCELLED. */
typedef void (*lash_ToolFn)(lash_Call *call, const char *args_json, void *ud);

/* Offer fn as a tool to every run started from now on (and to runs in
** flight from their next model request). name: 1-64 of [A-Za-z0-9_-];
** json_schema: the arguments' JSON Schema, an object schema (NULL: no
** arguments); description may be NULL. A name already registered is
** LASH_EARG. */
LASH_API int lash_register_tool(lash_State *S, const char *name,
                       const char *description, const char *json_schema,
                       lash_ToolFn fn, void *ud);
/* lash_register_tool with flags (0: the same as lash_register_tool):
**   LASH_TOOL_REQUIRES_APPROVAL  every call of the tool needs approval
**     first, as for a Lua tool with requires_approval = true: the run
**     sends an approval_request event and waits for lash_run_approve (or,
**     with the run option "approval": "stop", ends with stop_reason
**     "approval_required"); fn is called only for approved calls, and a
**     denied call's message goes to the model.
** Unknown flag bits are LASH_EARG. */
#define LASH_TOOL_REQUIRES_APPROVAL 0x1u
LASH_API int lash_register_tool_ex(lash_State *S, const char *name,
                          const char *description, const char *json_schema,
                          unsigned flags, lash_ToolFn fn, void *ud);
/* Stop offering a tool; fn is not called for it any more (a model that
** still calls it gets "unknown tool"). Calls already delivered stay
** answerable. */
LASH_API int lash_unregister_tool(lash_State *S, const char *name);

/* Answer a call: text is the result the model sees (NULL: empty). */
LASH_API int lash_call_return(lash_Call *call, const char *text);
/* Answer with a retry prompt: the model sees message and tries again
** (counted against the tool's retries). */
LASH_API int lash_call_retry(lash_Call *call, const char *message);
/* Fail the call: the run ends with an error of kind "tool" carrying
** message. */
LASH_API int lash_call_fail(lash_Call *call, const char *message);
/* These three return LASH_EARG when the call was answered already and
** LASH_EGONE when its run no longer waits for it (cancelled, timed out,
** ended, or the state was closed). */

#define LASH_CALL_PENDING 0     /* waiting for an answer */
#define LASH_CALL_ANSWERED 1
#define LASH_CALL_CANCELLED 2   /* the run stopped waiting: drop the work */
LASH_API int lash_call_status(const lash_Call *call);
/* The call's id (as in the events), the tool's name, the arguments JSON,
** and its run. Valid until lash_run_free. NULL for a NULL call. */
LASH_API const char *lash_call_id(const lash_Call *call);
LASH_API const char *lash_call_name(const lash_Call *call);
LASH_API const char *lash_call_args(const lash_Call *call);
LASH_API lash_Run *lash_call_run(const lash_Call *call);

/* ---- hooks ------------------------------------------------------------ */

/* A lifecycle hook of the runs started from C (lua/lash/hooks.lua; the
** host's hooks run after the agent's and its capabilities', so the host
** has the last word). hook is one of "before_model_request",
** "after_model_response", "before_tool_call", "after_tool_call",
** "on_run_end", "before_compaction"; payload_json is what that hook sees
** ({"id","name","args"} for before_tool_call; {"call":{...},"result":
** {"status","content"}} for after_tool_call; {"step","instructions",
** "messages","tools","settings"} before a model request; ...).
** Answer now or on a later frame with lash_call_return(call, decision):
** decision NULL, "" or "null" lets it pass unchanged, otherwise JSON as
** the Lua hooks return:
**   before_tool_call   false | "deny message" | {"allow":false,"message":..}
**                      | {"args":{...}} (edited arguments, checked again)
**   after_tool_call    "new content" | {"content":..,"status":..}
**   before_model_request  {"instructions":..,"messages":[..]} (this request
**                      only) | false | "message" (stops the run)
**   after_model_response  {"parts":[..]} | false | "message" (stops it)
**   before_compaction  false | "message" (skips it) | {...}
**   on_run_end         ignored
** lash_call_retry(call, message) answers "message" (deny, stop, skip);
** lash_call_fail(call, message) ends the run with an error of kind "hook".
** The run waits for the answer; the call's name is the hook's, its args
** the payload. One callback per hook name: registering again replaces it,
** fn NULL removes it (runs in flight then pass that hook). An unknown hook
** name is LASH_EARG. */
typedef void (*lash_HookFn)(lash_Call *call, const char *payload_json, void *ud);
LASH_API int lash_register_hook(lash_State *S, const char *hook, lash_HookFn fn,
                       void *ud);

/* ---- runs ------------------------------------------------------------ */

/* Receives every event of every run as one JSON object with a "type":
** run_start, model_request, text_delta, tool_call, approval_request,
** tool_result, retry, usage, run_end (the events of lash.agent; see
** lua/lash/agent.lua), and
**   {"type":"tool_cancelled","run_id":..,"id":..,"name":..}
** when a run stopped waiting for a host tool call the host had not
** answered (id as lash_call_id; the call is LASH_CALL_CANCELLED: drop
** the work; answering it is LASH_EGONE). Sent once per such call, also
** when the cancel came from inside the tool's callback; not after
** lash_run_free nor by lash_close, which deliver no events. fn NULL stops
** delivery. */
typedef void (*lash_EventFn)(lash_Run *run, const char *event_json, void *ud);
LASH_API int lash_set_event_handler(lash_State *S, lash_EventFn fn, void *ud);

/* Start a run of the loaded agent on prompt (NULL: resume the history
** given in the options). It begins on the next lash_step. options_json
** (NULL or "" for none) is an object with any of:
**   "values": {"k": "v"}     template values (over lash_set_value's)
**   "model": "test"          another model for this run
**   "limits": {"max_steps": 10}, "model_settings": {"max_tokens": 500},
**   "deps": any JSON         the tools' ctx.deps
**   "history": [...]         messages to continue (a result's "messages")
**   "approvals": {"id": true|false|"deny message"}  decisions for a
**                            history that stopped for approval
**   "approval": "wait"       (default) calls needing approval wait for
**                            lash_run_approve; "stop": the run ends with
**                            stop_reason "approval_required" instead
**   "stream": bool           stream model text (default: when an event
**                            handler is set)
**   "parts": [{"type": "image"|"document", "path": "..."}, ...]
**                            files after the prompt text (or "text": ...
**                            for a text document)
**   "output": {JSON Schema}  a structured answer: the result's "output"
**                            is the decoded value, *output its JSON text
** *run receives the handle (free it with lash_run_free). */
LASH_API int lash_run_start(lash_State *S, const char *prompt,
                   const char *options_json, lash_Run **run);

#define LASH_RUN_RUNNING 0      /* working (or waiting for a host tool) */
#define LASH_RUN_APPROVAL 1     /* waiting for lash_run_approve */
#define LASH_RUN_DONE 2         /* ended with an answer (or stopped for
                                ** approval, see the result's stop_reason) */
#define LASH_RUN_FAILED 3       /* ended with an error */
#define LASH_RUN_CANCELLED 4    /* cancelled, or its state was closed */
/* A LASH_RUN_* value, or LASH_EARG for NULL. */
LASH_API int lash_run_status(const lash_Run *run);

/* Once the run has ended: *output gets the answer text (NULL when it did
** not answer) and *result_json (either may be NULL) an object with
** "status" ("done", "failed", "cancelled"), "stop_reason", "output",
** "usage", "pending", "messages" (the history, to continue it) and, for
** failures, "error": {"kind", "message"}. Valid until lash_run_free.
** LASH_EBUSY while the run is going. */
LASH_API int lash_run_result(const lash_Run *run, const char **output,
                    const char **result_json);

/* Cancel the run: its current wait ends with a "cancelled" error, its
** toolsets close, and it ends as LASH_RUN_CANCELLED after the next step(s).
** LASH_EGONE if it had ended already. Async-signal-unsafe (see lash_close). */
LASH_API int lash_run_cancel(lash_Run *run);

/* Answer an approval_request event of this run: allow, or deny with
** message for the model (NULL: a default). LASH_EARG for an id the run
** did not ask about or an approval answered already; LASH_EGONE once the
** run ended. May be called before the run waits for it (e.g. from the
** event callback). */
LASH_API int lash_run_approve(lash_Run *run, const char *call_id, int allow,
                     const char *message);

/* Release the handle. A run still going is cancelled and its memory freed
** when it has unwound; the handle and its calls are invalid at once
** either way, and no more events arrive for it. */
LASH_API int lash_run_free(lash_Run *run);

#ifdef __cplusplus
}
#endif

#endif
