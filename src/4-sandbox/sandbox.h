/*
** sandbox.h: the sandbox backend contract. A backend (local bubblewrap
** jails, Modal, a fake written in Lua for tests) is a set of operations;
** sandbox.c owns everything generic on top of them -- argument checks,
** defaults, the reserved lash_ tags stamped at create, the lifecycle of
** sandbox objects (owned / attached / session), attach and release with
** owner and holder marks -- and exposes it all to Lua as `lash.sandbox`.
** A backend never sees a Lua sandbox object, only ids.
**
** ---- calling convention ---------------------------------------------------
** Every slot is a lua_CFunction called like a Lua function, through
** lua_callk, so it MAY WAIT: yield with lash_wait_yield (runtime.h), chain
** its own steps with lua_callk/lua_pcallk continuations, or (for a Lua
** backend) call any waiting lash function. Arguments arrive on the stack;
** results are returned the ordinary way. Argument 1 is always `cfg`, a
** table holding the backend's config options as the user gave them (see
** config_options) plus `backend` = the backend's name; a backend may cache
** per-state things elsewhere (the registry), never in cfg.
**
**   create(cfg, spec)                   -> id (string)
**       spec is a fresh table, already checked and defaulted:
**         workdir     absolute normalized path, or nil (no default_workdir)
**         env         {string = string} (maybe empty)
**         timeout     integer >= 1: the sandbox's lifetime in seconds
**         expires_at  integer: wall-clock seconds when it ends, computed
**                     before the call (so it errs early)
**         network     {block_network = bool, allow_egress_to = {strings},
**                      allow_egress_to_cidrs = {strings}}
**         owner       string or nil
**         ephemeral   true: the object creating it destroys it, at the
**                     latest when this process ends (a crash leaves it to
**                     gc); records that matter only to a sandbox outliving
**                     the process may skip syncing to disk (see persist)
**         tags        {string = string}: the user's tags plus the stamped
**                     lash_owner, lash_expires_at, lash_network, lash_workdir
**         and every create_options / config_options key the user set,
**         unchecked (the backend validates its own options).
**       A backend that cannot enforce or record a field (an allow-list, an
**       owner) must refuse it here, before creating anything.
**   exec(cfg, id, argv, opts)          -> result
**       argv: {string, ...} non-empty. opts, checked and defaulted:
**         timeout (integer >= 1, seconds), max_output_bytes (integer >= 0,
**         per stream), cwd (string or nil: the workdir), env ({k = v} or
**         nil, merged over the sandbox's), stdin (string or nil).
**       result: {stdout = string, stderr = string, stdout_truncated = bool,
**         stderr_truncated = bool, exit_code = integer, timed_out = bool,
**         applied_timeout = integer}. Output must go through a tail ring
**         (output.h, lash_ring_*) as it arrives: memory bounded by
**         max_output_bytes per stream. A timed-out command is killed with
**         everything it started; exit_code is then meaningless (the local
**         backend reports 137). applied_timeout is the deadline actually
**         used (a backend may shorten it to the sandbox's remaining life).
**         A command that does not start (no such executable, bad cwd) is a
**         recoverable error, not an exit code.
**   stat(cfg, id, path)                -> {kind = "file"|"dir"|"symlink"|
**                                          "other", size =, mode =, mtime =}
**   read_file(cfg, id, path, max_bytes) -> bytes
**       refuses a file over max_bytes before reading (code "too_large",
**       fields size, max_bytes, path) and again when more than max_bytes
**       arrive (the file grew).
**   write_file(cfg, id, path, bytes)   -> (nothing); creates parent dirs
**   list_dir(cfg, id, path)            -> {{name =, kind =}, ...} (any order;
**                                          kinds as in stat, not followed)
**   read_tags(cfg, id)                 -> {string = string}
**   write_tags(cfg, id, tags)          -> (nothing); replaces the whole map
**   poll(cfg, id)                      -> {running = bool, status = "running"
**                                          | "expired" | "gone" | "terminated",
**                                          exit_code = int|nil,
**                                          expires_at = int|nil}
**   destroy(cfg, id, timeout)          -> (nothing). Idempotent: a sandbox
**                                          already gone is success. Waits at
**                                          most `timeout` seconds (number)
**                                          for confirmation, then returns.
** Optional:
**   cas_tags(cfg, id, expect, tags)    -> true | false, current_tags
**       atomically: if every key of expect has that value in the current
**       tags (false = absent), replace the map with tags. Backends with it
**       get atomic claims; the others get read, write, read back.
**   list(cfg)                          -> {{id =, expires_at =, tags =,
**                                           status =}, ...}
**   gc(cfg)                            -> {removed ids}
**   probe(cfg)                         -> true | false, reason
**   snapshot(cfg, id)                  -> snapshot id: the sandbox's files as
**       they are now, from which `create{from_snapshot = id}` starts a new
**       sandbox (modal: an image id; local: a copy of the workspace).
**   drop_snapshot(cfg, snap)           -> (nothing): remove a snapshot
**       snapshot() made (local: its copy); one already gone is success.
**   spawn(cfg, id, argv, opts)         -> a lash.proc handle (proc.h): a
**       long-lived process in the sandbox whose stdin, stdout and stderr
**       are streams on the loop (an MCP server run jailed). argv as exec's;
**       opts: cwd, env as exec's. No deadline; the process ends when the
**       handle is closed or the sandbox is destroyed.
**   persist(cfg, id)                   -> (nothing): called by detach, when
**       an ephemeral sandbox becomes one that outlives this process: make
**       durable what create left unsynced.
** Relative paths are the backend's to resolve, against the sandbox's
** workdir.
**
** ---- errors ----------------------------------------------------------------
** Slots raise typed errors (lash_sandbox_raise). Lua sees an error object
** (lash.is_error) with kind, message, retryable, terminal and code:
**   "sandbox"     SandboxError, recoverable: a missing file, a failed
**                 command start, a file too large. retryable = true (the
**                 model can try again differently), terminal = false.
**   "unavailable" SandboxTerminalError: the sandbox is gone, terminated or
**                 expired, or the backend cannot be reached.
**   "auth"        SandboxTerminalError: credentials refused.
**   "refused"     SandboxTerminalError raised by attach: wrong or missing
**                 owner, held by another holder, a claim lost to a race.
**   "config"      SandboxTerminalError: the backend is misconfigured (e.g. a
**                 TLS certificate that cannot be verified); retrying cannot help.
** Terminal errors have retryable = false, terminal = true. `code` is a
** short machine-readable reason ("not_found", "too_large", "expired", ...).
** Misuse (a bad argument) raises a plain error string instead.
**
** ---- registering -------------------------------------------------------------
** A C backend defines `const lash_sandbox_backend lash_sandbox_backend_NAME`
** and adds X(NAME) to LASH_SANDBOX_BACKENDS in src/6-lua/lsandbox.c, the
** layer that registers them (a strong reference: a weak one would not pull
** the backend's object out of liblash.a). Lua
** backends use lash.sandbox.register_backend(name, {slot = function, ...,
** create_options = {...}, config_options = {...}, default_workdir = "..."}),
** with the same slots and conventions.
*/
#ifndef lash_sandbox_h
#define lash_sandbox_h

#include "lua.h"
#include "lauxlib.h"
#include "loop.h"

#include <stddef.h>

#include "sandbox_path.h"   /* paths, the same for every backend */

#define LASH_SB_ERROR       "sandbox"
#define LASH_SB_UNAVAILABLE "unavailable"
#define LASH_SB_AUTH        "auth"
#define LASH_SB_REFUSED     "refused"
#define LASH_SB_CONFIG      "config"   /* terminal: fix the configuration */

/* Reserved tags (the prefix "lash_" is refused in user tags). */
#define LASH_SB_TAG_PREFIX     "lash_"
#define LASH_SB_TAG_OWNER      "lash_owner"
#define LASH_SB_TAG_HOLDER     "lash_holder"
#define LASH_SB_TAG_EXPIRES_AT "lash_expires_at"
#define LASH_SB_TAG_NETWORK    "lash_network"
#define LASH_SB_TAG_WORKDIR    "lash_workdir"

typedef struct lash_sandbox_backend {
  const char *name;
  /* NULL-terminated option names (NULL: none). create_options apply only
  ** when creating (e.g. "rootfs", "image") and are refused when attaching
  ** by id; config_options say where and how to reach the backend (e.g.
  ** "state_root") and are accepted everywhere. */
  const char *const *create_options;
  const char *const *config_options;
  const char *default_workdir;   /* used when spec.workdir is nil; may be NULL */
  lua_CFunction create, exec, stat, read_file, write_file, list_dir,
                read_tags, write_tags, poll, destroy;
  lua_CFunction cas_tags, list, gc, probe;   /* optional (NULL) */
  lua_CFunction snapshot;                    /* optional (NULL) */
  lua_CFunction spawn;                       /* optional (NULL) */
  lua_CFunction persist;                     /* optional (NULL) */
  /* connect(cfg, id, port) -> fd: a TCP connection to port inside the
  ** sandbox (what sandbox:publish relays to); the caller owns the fd.
  ** Optional (NULL); C backends only. */
  lua_CFunction connect;
  /* drop_snapshot(cfg, snap) -> (nothing): remove a snapshot snapshot()
  ** made; one already gone is success. Optional (NULL): a backend without
  ** it keeps its snapshots (modal's images are the platform's to expire). */
  lua_CFunction drop_snapshot;
  /* tunnels(cfg, id, timeout) -> {{port =, url =, host =, tls_port =,
  ** tcp_host =, tcp_port =}, ...}: where the ports the sandbox was created
  ** with (spec.publish) are reachable from the internet, for backends that
  ** tunnel them (Modal), waiting at most timeout seconds for the sandbox
  ** to run. Optional (NULL). */
  lua_CFunction tunnels;
} lash_sandbox_backend;

/* Push a sandbox error object: kind (LASH_SB_*), code (may be NULL),
** message; retryable and terminal follow from the kind. */
void lash_sandbox_push_error(lua_State *L, const char *kind, const char *code,
                             const char *message);
/* Push one (message from fmt, lua_pushfstring style) and raise it. */
int  lash_sandbox_raise(lua_State *L, const char *kind, const char *code,
                        const char *fmt, ...);

/* ---- what the core owns for every backend ------------------------------------
** Backends call these instead of writing their own: one owner each. */

/* The defaults, the one place they are set (`describe` shows them as
** `defaults`, under these names). */
#define LASH_SB_DEFAULT_LIFETIME     300                 /* lifetime, s */
#define LASH_SB_DEFAULT_EXEC_TIMEOUT 60                  /* exec_timeout, s */
#define LASH_SB_DEFAULT_MAX_OUTPUT   (1024 * 1024)       /* max_output_bytes,
                                                         ** per stream */
#define LASH_SB_DEFAULT_MAX_READ     (5 * 1024 * 1024)   /* max_read_bytes */
#define LASH_SB_DEFAULT_DESTROY      30                  /* destroy_timeout, s */
#define LASH_SB_MAX_SECONDS          1000000000          /* any duration */

/* Expiry stamps are wall time: lash_wall_now (loop.h), the one wall clock. */

/* The deadline of one command in whole seconds: `requested` (>= 1, as the
** core checked it), no later than the sandbox's end when expires_at > 0
** (wall seconds), at most ceiling when ceiling > 0, and at least 1. */
lua_Integer lash_sandbox_deadline(lua_Integer requested, double expires_at,
                                  lua_Integer ceiling);

struct lash_ring;
/* Push exec's result table (see exec above) from the two tail rings. */
void lash_sandbox_push_exec_result(lua_State *L, struct lash_ring *out,
                                   struct lash_ring *err, lua_Integer exit_code,
                                   int timed_out, lua_Integer applied_timeout);

/* Raise the "sandbox" error of code "too_large" for path: with size >= 0,
** "'path' is <size>, over the <max_bytes> read limit" and the fields size,
** max_bytes and path; with size < 0 (the backend knows no size) the reason
** `why` instead, and the fields it knows. */
int lash_sandbox_raise_too_large(lua_State *L, const char *path,
                                 lua_Integer size, lua_Integer max_bytes,
                                 const char *why);

/* Raise the "sandbox" error of a file operation that failed on path for
** one of these reasons, with the same code and wording on every backend
** (so the tools read the same): not_found, is_dir, not_dir (also for a
** parent that is not a directory), not_regular. */
enum { LASH_SB_PATH_NOT_FOUND, LASH_SB_PATH_IS_DIR, LASH_SB_PATH_NOT_DIR,
       LASH_SB_PATH_PARENT_NOT_DIR, LASH_SB_PATH_NOT_REGULAR };
int lash_sandbox_raise_path(lua_State *L, int why, const char *path);

/* lash's JSON codec (json.h) in a protected call, so a backend can clean up
** before it raises. encode pushes the text of the value at idx (canonical:
** sorted keys); decode pushes the value of s. Both return 1, or 0 with the
** error message pushed instead. */
int lash_sandbox_json_encode(lua_State *L, int idx, int canonical);
int lash_sandbox_json_decode(lua_State *L, const char *s, size_t len);

#endif
