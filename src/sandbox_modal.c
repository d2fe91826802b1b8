/*
** sandbox_modal.c: the "modal" sandbox backend (contract: sandbox.h).
** Sandboxes are Modal Sandboxes, V2 by default (V1 with sandbox_v2 =
** false; an existing id's shape says which). Each slot is one operation
** object (userdata on the calling thread's stack) that runs a sequence of
** steps, each step one wait: a unary RPC (modal_rpc.c retries it), a
** sleep, or a whole command (TaskExecStart, then stdout and stderr read
** by offset -- a dropped stream resumes exactly -- stdin, and TaskExecWait,
** all concurrent on the router connection, driven by loop callbacks).
** Files go through the in-sandbox modal-sandbox-fs-tools, as Modal's SDKs
** do. Errors map to sandbox.h's kinds: refused credentials are `auth`, a
** sandbox that is gone, terminated or expired is `unavailable`, and a
** failure that could be either is classified by polling the sandbox once,
** after the failure.
*/
#include "modal.h"
#include "output.h"
#include "runtime.h"
#include "sandbox.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLIENTS_KEY "lash.modal.clients"
#define CLIENT_MT "lash.modal.client"
#define OP_MT "lash.modal.op"

#define FS_TOOLS "/__modal/.bin/modal-sandbox-fs-tools"
#define DEFAULT_IMAGE "python:3.12-slim"
#define DEFAULT_APP "lash"
#define MAX_LIFETIME 86400
#define EXEC_GRACE 30.0            /* past the command's own timeout */
#define STDIN_CHUNK (1u << 20)
#define STDIN_EOF_GRACE 2.0        /* seconds before a stdin-less command gets EOF */
#define STREAM_RETRIES 10
#define FS_TIMEOUT 120
#define TASK_ID_POLL 0.5
#define TASK_ID_WAIT 300.0         /* scheduling wait for a V1 sandbox */
#define IMAGE_BUILD_WAIT 3600.0

/* app_name and create_app_if_missing are the sandbox capability's names. */
static const char *const create_options[] = {
  "image", "app_name", "create_app_if_missing", "cpu", "memory", "gpu", "idle_timeout",
  NULL
};

/* Stamped on every sandbox lash creates, so list and gc find only lash's
** (SandboxList filters on it). */
#define MADE_BY_TAG "lash_made_by"
#define MADE_BY_VALUE "lash"
static const char *const config_options[] = {
  "server_url", "environment", "profile", "config_path", "ca_file", "sandbox_v2", NULL
};

/* lash_sandbox_raise with printf formatting (lua_pushfstring knows no
** precision or size modifiers). */
static int sb_raise(lua_State *L, const char *kind, const char *code,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int sb_raise(lua_State *L, const char *kind, const char *code,
                    const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return lash_sandbox_raise(L, kind, code, "%s", buf);
}

/* ---- the client of a configuration (cached per state) -------------------- */

typedef struct client_ud { modal_client *cl; } client_ud;

static int client_gc(lua_State *L) {
  client_ud *u = luaL_checkudata(L, 1, CLIENT_MT);
  modal_client_free(u->cl);
  u->cl = NULL;
  return 0;
}

static const char *cfg_string(lua_State *L, int cfg, const char *k) {
  const char *s = NULL;
  int t = lua_getfield(L, cfg, k);
  if (t != LUA_TNIL) {
    if (t != LUA_TSTRING)
      luaL_error(L, "modal backend: option '%s' must be a string, got %s", k,
                 luaL_typename(L, -1));
    s = lua_tostring(L, -1);   /* stays alive in cfg */
  }
  lua_pop(L, 1);
  return s;
}

/* The client for cfg, created on first use. Raises auth/config errors. */
static modal_client *get_client(lua_State *L, int cfg) {
  modal_config_in in = { NULL, NULL, NULL, NULL, NULL, -1 };
  char err[512];
  cfg = lua_absindex(L, cfg);
  in.server_url = cfg_string(L, cfg, "server_url");
  in.environment = cfg_string(L, cfg, "environment");
  in.profile = cfg_string(L, cfg, "profile");
  in.config_path = cfg_string(L, cfg, "config_path");
  in.ca_file = cfg_string(L, cfg, "ca_file");
  int t = lua_getfield(L, cfg, "sandbox_v2");
  if (t == LUA_TBOOLEAN) in.sandbox_v2 = lua_toboolean(L, -1);
  else if (t != LUA_TNIL) luaL_error(L, "modal backend: option 'sandbox_v2' must be a boolean");
  lua_pop(L, 1);
  lua_pushfstring(L, "%s\1%s\1%s\1%s\1%s\1%d", in.server_url ? in.server_url : "",
                  in.environment ? in.environment : "\2", in.profile ? in.profile : "",
                  in.config_path ? in.config_path : "", in.ca_file ? in.ca_file : "",
                  in.sandbox_v2);
  if (lua_getfield(L, LUA_REGISTRYINDEX, CLIENTS_KEY) != LUA_TTABLE) {
    lua_pop(L, 1);
    lash_runtime_get(L);   /* the runtime (and its loop) must predate clients */
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CLIENTS_KEY);
  }
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) == LUA_TUSERDATA) {
    client_ud *u = lua_touserdata(L, -1);
    lua_pop(L, 3);
    return u->cl;
  }
  lua_pop(L, 1);
  modal_config c;
  int rc = modal_config_load(&c, &in, err, sizeof err);
  if (rc == MODAL_CONFIG_NO_CREDENTIALS)
    sb_raise(L, LASH_SB_AUTH, "no_credentials", "%s", err);
  if (rc != MODAL_CONFIG_OK) luaL_error(L, "modal backend: %s", err);
  client_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->cl = NULL;
  if (luaL_newmetatable(L, CLIENT_MT)) {
    lua_pushcfunction(L, client_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  u->cl = modal_client_new(lash_runtime_loop(L), &c);
  if (!u->cl) {
    modal_config_free(&c);
    luaL_error(L, "modal backend: out of memory");
  }
  lua_pushvalue(L, -3);    /* key */
  lua_pushvalue(L, -2);
  lua_rawset(L, -4);
  lua_pop(L, 3);
  return u->cl;
}

/* ---- operations ---------------------------------------------------------------- */

typedef struct mop mop;

typedef struct mstream {
  mop *op;
  int fd;                      /* 0 stdout, 1 stderr */
  grpc_call *call;
  uint64_t offset;             /* bytes received (the resume cursor) */
  lash_ring ring;
  int done, retries, opened;
  int malformed;               /* a message that is not TaskExecStdioReadResponse */
  uint64_t cap;                /* stop reading past this many bytes (0: never) */
  int capped;
  lash_timer timer;
  modal_rpc refresh;           /* a poll that refreshes router access */
} mstream;

typedef struct mexec {
  int active;
  char exec_id[37];
  mstream out, err;
  modal_rpc start, wait, in;
  const char *stdin_data;
  size_t stdin_len, stdin_off;
  int started, stdin_done, wait_done, finished;
  int has_code, code, has_signal, sig;
  double t0;
  uint32_t timeout;
  int timed_out_local;
  lash_timer deadline;
  /* Modal's SDKs read stdout while the command runs, stderr too for a
  ** command (but only after a failed exit for a file tool, as they do),
  ** and write stdin only when there is some. A command given no stdin gets
  ** end-of-file only if it is still running after STDIN_EOF_GRACE, so a
  ** command that reads stdin cannot hang while quick ones cost no write. */
  int fs;                      /* a fs-tools command: stderr after a failure */
  int no_stdout;               /* nothing to read on stdout (WriteFile) */
  lash_timer eof_timer;
  int fatal_code;              /* grpc code of the first fatal failure */
  char fatal_where[32];
  char fatal_msg[512];
} mexec;

struct mop {
  lash_wait w;                 /* first: the cancel callback casts back */
  modal_client *cl;
  modal_sbx *sbx;
  int step, after_prep;
  modal_rpc rpc;
  lash_timer timer;
  mexec x;
  pb_arena *arena;             /* request pieces built across steps */
  double t_start, deadline;
  int count;
  /* saved for classification */
  int saved_code;
  char saved[600];
  char what[64];
  /* create */
  const char *app_name, *image_tag, *app_id, *image_id, *ibv, *secret_id;
  int create_app;
  char last_entry[64];
  int image_done, image_status;
  char image_exc[256];
  grpc_call *stream;
  int stream_retries;
  /* list and gc */
  double before;               /* SandboxList page cursor */
  int pages, gc, idx;
  /* file operations */
  const char *path;            /* absolute (arena) */
  int64_t max_bytes;
  void *args;                  /* create: its request pieces (arena) */
};

static void exec_stop(mexec *x, lash_loop *loop);

static void op_stop(mop *op) {
  lash_loop *loop = op->cl ? modal_client_loop(op->cl) : NULL;
  modal_rpc_cancel(&op->rpc);
  if (op->stream) { grpc_call_cancel(op->stream); op->stream = NULL; }
  if (loop) {
    lash_timer_stop(loop, &op->timer);
    exec_stop(&op->x, loop);
  }
}

static int op_gc(lua_State *L) {
  mop *op = luaL_checkudata(L, 1, OP_MT);
  op_stop(op);
  lash_ring_free(&op->x.out.ring);
  lash_ring_free(&op->x.err.ring);
  pb_arena_free(op->arena);
  op->arena = NULL;
  return 0;
}

static void op_cancel(lash_wait *w) { op_stop((mop *)w); }

static void rpc_done(modal_rpc *r) { lash_wait_done(&((mop *)r->ud)->w); }

static void op_rpc_init(mop *op, modal_rpc *r) {
  modal_rpc_init(r, op->cl);
  r->ud = op;
  r->done = rpc_done;
}

/* Push a new operation on L's stack, bound to the client of cfg. */
static mop *op_new(lua_State *L, int cfg, const char *what) {
  modal_client *cl = get_client(L, cfg);
  mop *op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  lash_timer_init(&op->timer);
  lash_timer_init(&op->x.deadline);
  lash_timer_init(&op->x.eof_timer);
  lash_timer_init(&op->x.out.timer);
  lash_timer_init(&op->x.err.timer);
  if (luaL_newmetatable(L, OP_MT)) {
    lua_pushcfunction(L, op_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  op->cl = cl;
  op_rpc_init(op, &op->rpc);
  op->arena = pb_arena_new();
  if (!op->arena) luaL_error(L, "modal backend: out of memory");
  op->t_start = modal_now();
  snprintf(op->what, sizeof op->what, "%s", what);
  return op;
}

static char *op_strdup(lua_State *L, mop *op, const char *s, size_t n) {
  char *d = pb_arena_strdup(op->arena, s, n);
  if (!d) luaL_error(L, "modal backend: out of memory");
  return d;
}

static int op_wait(lua_State *L, mop *op, lua_KFunction k) {
  lash_wait_init(&op->w, op_cancel);
  return lash_wait_yield(L, &op->w, (lua_KContext)op, k);
}

static void on_sleep(lash_loop *loop, lash_timer *t) {
  (void)loop;
  lash_wait_done(&((mop *)t->data)->w);
}

static int op_sleep(lua_State *L, mop *op, double secs, lua_KFunction k) {
  lash_timer_start(modal_client_loop(op->cl), &op->timer, (uint64_t)(secs * 1e9),
                   on_sleep, op);
  return op_wait(L, op, k);
}

static int op_call(lua_State *L, mop *op, const char *method, unsigned flags,
                   const pb_msgdesc *reqd, const void *req,
                   const pb_msgdesc *respd, double timeout, lua_KFunction k) {
  modal_rpc *r = &op->rpc;
  r->method = method;
  r->flags = flags;
  r->resp_desc = respd;
  r->sbx = op->sbx;
  r->timeout = timeout;
  r->deadline = 0;
  if (modal_rpc_start(r, reqd, req) < 0)
    return sb_raise(L, LASH_SB_ERROR, "bad_request", "Modal %s: %s", method,
                              r->message);
  return op_wait(L, op, k);
}

/* Sandbox RPCs come in pairs, NAME and NAMEV2 (the latter needing the V2
** router flag); the sandbox's own v2 bit picks which one to send. */
#define SBX_METHOD(s, name) ((s)->v2 ? name "V2" : name)
#define SBX_FLAGS(s) ((s)->v2 ? MODAL_RPC_V2 : 0u)
#define SBX_CALL(L, op, s, name, ...) \
  op_call(L, op, SBX_METHOD(s, name), SBX_FLAGS(s), __VA_ARGS__)

/* ---- errors ----------------------------------------------------------------------- */

static void lower_code(int code, char *out, size_t n) {
  const char *s = code < 0 ? "local_failure" : grpc_code_name(code);
  size_t i;
  for (i = 0; s[i] && i + 1 < n; i++) out[i] = (char)tolower((unsigned char)s[i]);
  out[i] = 0;
}

static int raise_auth(lua_State *L, int code, const char *msg) {
  if (code == GRPC_PERMISSION_DENIED)
    return sb_raise(L, LASH_SB_AUTH, "permission_denied",
                              "Modal refused the request (%s). %s", msg, MODAL_AUTH_MESSAGE);
  return sb_raise(L, LASH_SB_AUTH, "unauthenticated", "%s", MODAL_AUTH_MESSAGE);
}

static int raise_tls(lua_State *L, mop *op, const char *msg) {
  const modal_config *cfg = modal_client_config(op->cl);
  return sb_raise(L, LASH_SB_CONFIG, "tls_verify",
                  "cannot verify the TLS certificate of Modal at %s (%s). This is a "
                  "configuration problem, not an outage: point ca_file at "
                  "the CA that signed the server's certificate, or fix server_url",
                  op->rpc.sbx && op->rpc.flags & MODAL_RPC_ROUTER ? "its command router"
                                                                   : cfg->server_url, msg);
}

static int raise_gone(lua_State *L, mop *op, const char *detail) {
  return sb_raise(L, LASH_SB_UNAVAILABLE, "not_found",
                            "Modal sandbox %s is gone (terminated, expired or never "
                            "existed): %s", op->sbx ? op->sbx->id : "?", detail);
}

static int classify_k(lua_State *L, int status, lua_KContext ctx);

/* The RPC in op->rpc failed: raise the right kind of error. `targeted`:
** the call was about op->sbx, so NOT_FOUND means the sandbox is gone and
** an ambiguous failure is classified by polling the sandbox once. */
static int op_fail(lua_State *L, mop *op, int targeted) {
  modal_rpc *r = &op->rpc;
  int code = r->code;
  char lc[32];
  if (code == GRPC_UNAUTHENTICATED || code == GRPC_PERMISSION_DENIED)
    return raise_auth(L, code, r->message);
  if (code == GRPC_LOCAL_TLS) return raise_tls(L, op, r->message);
  if (code == GRPC_NOT_FOUND && targeted) return raise_gone(L, op, r->message);
  lower_code(code, lc, sizeof lc);
  if (code >= 0 && modal_code_transient(code)) {
    if (!targeted || !op->sbx)
      return sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                                "Modal did not answer %s (%s: %s)", r->method,
                                grpc_code_name(code), r->message);
    /* ambiguous: is the sandbox still there? */
    op->saved_code = code;
    snprintf(op->saved, sizeof op->saved, "%s failed (%s: %s)", r->method,
             grpc_code_name(code), r->message);
    modal_SandboxWaitRequest req = { pb_cstr(op->sbx->id), 0 };
    return SBX_CALL(L, op, op->sbx, "SandboxWait", &modal_SandboxWaitRequest_desc,
                    &req, &modal_SandboxWaitResponse_desc, 10, classify_k);
  }
  return sb_raise(L, LASH_SB_ERROR, lc, "Modal %s failed for %s: %s: %s",
                            r->method, op->what, grpc_code_name(code), r->message);
}

static const char *result_status(int status) {
  return status == MODAL_STATUS_TIMEOUT ? "expired" : "terminated";
}

static int classify_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  modal_rpc *r = &op->rpc;
  if (r->code == GRPC_OK) {
    const modal_SandboxWaitResponse *w = r->resp;
    if (w->result && w->result->status != MODAL_STATUS_UNSPECIFIED)
      return sb_raise(L, LASH_SB_UNAVAILABLE, result_status(w->result->status),
                                "Modal sandbox %s has %s (%.*s); %s", op->sbx->id,
                                w->result->status == MODAL_STATUS_TIMEOUT
                                  ? "reached the end of its lifetime" : "finished",
                                (int)w->result->exception.n, w->result->exception.p,
                                op->saved);
    if (op->saved_code == GRPC_FAILED_PRECONDITION)
      return sb_raise(L, LASH_SB_ERROR, "start_failed", "%s", op->saved);
    return sb_raise(L, LASH_SB_ERROR, "transient",
                              "%s; the sandbox is still running, so this may work "
                              "if tried again", op->saved);
  }
  if (r->code == GRPC_NOT_FOUND) return raise_gone(L, op, op->saved);
  if (r->code == GRPC_UNAUTHENTICATED || r->code == GRPC_PERMISSION_DENIED)
    return raise_auth(L, r->code, r->message);
  return sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                            "%s, and polling the sandbox failed too (%s: %s)",
                            op->saved, grpc_code_name(r->code), r->message);
}

/* ---- the sandbox's router: task id and access ---------------------------- */

enum { PREP_TASK = 100, PREP_TASK_CHECK, PREP_ACCESS, PREP_ACCESS_CHECK,
       PREP_TAGS, PREP_TAGS_CHECK, PREP_CONTINUE = -1 };

static void set_str_field(char **dst, pb_str v) {
  char *s = strndup(v.p ? v.p : "", v.n);
  if (!s) return;
  free(*dst);
  *dst = s;
}

/* Steps that make op->sbx ready for router calls (task id, router access)
** and, when op needs it, its workdir. Returns PREP_CONTINUE when ready (op->
** step is then op->after_prep), else the yield of the next wait. */
static int prep_step(lua_State *L, mop *op, lua_KFunction k, int need_workdir) {
  modal_sbx *s = op->sbx;
  for (;;) {
    switch (op->step) {
      case PREP_TASK:
        if (need_workdir && !s->workdir) { op->step = PREP_TAGS; continue; }
        if (s->task_id) { op->step = PREP_ACCESS; continue; }
        {
          modal_SandboxGetTaskIdRequest req = { .sandbox_id = pb_cstr(s->id) };
          op->step = PREP_TASK_CHECK;
          return SBX_CALL(L, op, s, "SandboxGetTaskId", &modal_SandboxGetTaskIdRequest_desc,
                          &req, &modal_SandboxGetTaskIdResponse_desc, 30, k);
        }
      case PREP_TASK_CHECK: {
        modal_rpc *r = &op->rpc;
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        const modal_SandboxGetTaskIdResponse *t = r->resp;
        if (t->has_task_id && t->task_id.n) {
          set_str_field(&s->task_id, t->task_id);
          op->step = PREP_ACCESS;
          continue;
        }
        if (t->task_result)
          return sb_raise(L, LASH_SB_UNAVAILABLE,
                                    result_status(t->task_result->status),
                                    "Modal sandbox %s has already finished: %.*s", s->id,
                                    (int)t->task_result->exception.n,
                                    t->task_result->exception.p);
        if (modal_now() - op->t_start > TASK_ID_WAIT)
          return sb_raise(L, LASH_SB_UNAVAILABLE, "not_scheduled",
                                    "Modal sandbox %s was not scheduled within %.0f s",
                                    s->id, TASK_ID_WAIT);
        op->step = PREP_TASK;
        return op_sleep(L, op, TASK_ID_POLL, k);
      }
      case PREP_ACCESS:
        if (s->router_url && s->router_jwt) { op->step = op->after_prep; return PREP_CONTINUE; }
        op->step = PREP_ACCESS_CHECK;
        if (s->v2) {
          modal_SandboxGetCommandRouterAccessRequest req = {
            .has_sandbox_id = true, .sandbox_id = pb_cstr(s->id) };
          return op_call(L, op, "SandboxGetCommandRouterAccess", MODAL_RPC_V2,
                         &modal_SandboxGetCommandRouterAccessRequest_desc, &req,
                         &modal_SandboxGetCommandRouterAccessResponse_desc, 30, k);
        } else {
          modal_TaskGetCommandRouterAccessRequest req = { pb_cstr(s->task_id) };
          return op_call(L, op, "TaskGetCommandRouterAccess", 0,
                         &modal_TaskGetCommandRouterAccessRequest_desc, &req,
                         &modal_TaskGetCommandRouterAccessResponse_desc, 30, k);
        }
      case PREP_ACCESS_CHECK: {
        modal_rpc *r = &op->rpc;
        if (r->code == GRPC_FAILED_PRECONDITION || r->code == GRPC_NOT_FOUND)
          return raise_gone(L, op, r->message);
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        const modal_TaskGetCommandRouterAccessResponse *a = r->resp;  /* {jwt, url} */
        if (!a->jwt.n || !a->url.n)
          return sb_raise(L, LASH_SB_ERROR, "no_router",
                                    "Modal gave no command router access for %s", s->id);
        set_str_field(&s->router_jwt, a->jwt);
        set_str_field(&s->router_url, a->url);
        op->step = op->after_prep;
        return PREP_CONTINUE;
      }
      case PREP_TAGS: {
        modal_SandboxTagsGetRequest req = { pb_cstr(s->id) };
        op->step = PREP_TAGS_CHECK;
        return SBX_CALL(L, op, s, "SandboxTagsGet", &modal_SandboxTagsGetRequest_desc, &req,
                        &modal_SandboxTagsGetResponse_desc, 30, k);
      }
      case PREP_TAGS_CHECK: {
        modal_rpc *r = &op->rpc;
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        const modal_SandboxTagsGetResponse *t = r->resp;
        pb_str wd = pb_cstr("/");
        for (size_t i = 0; i < t->tags_n; i++)
          if (t->tags[i].tag_name.n == strlen(LASH_SB_TAG_WORKDIR) &&
              !memcmp(t->tags[i].tag_name.p, LASH_SB_TAG_WORKDIR, t->tags[i].tag_name.n) &&
              t->tags[i].tag_value.n && t->tags[i].tag_value.p[0] == '/')
            wd = t->tags[i].tag_value;
        set_str_field(&s->workdir, wd);
        need_workdir = 0;
        op->step = PREP_TASK;
        continue;
      }
      default:
        return luaL_error(L, "modal backend: bad step %d", op->step);
    }
  }
}

/* ---- commands: start, stdio by offset, stdin, wait ------------------------- */

static void exec_stop(mexec *x, lash_loop *loop) {
  modal_rpc_cancel(&x->start);
  modal_rpc_cancel(&x->wait);
  modal_rpc_cancel(&x->in);
  mstream *ss[2] = { &x->out, &x->err };
  for (int i = 0; i < 2; i++) {
    if (ss[i]->call) { grpc_call_cancel(ss[i]->call); ss[i]->call = NULL; }
    lash_timer_stop(loop, &ss[i]->timer);
    modal_rpc_cancel(&ss[i]->refresh);
  }
  lash_timer_stop(loop, &x->deadline);
  lash_timer_stop(loop, &x->eof_timer);
}

static void exec_finish(mop *op) {
  mexec *x = &op->x;
  if (x->finished) return;
  x->finished = 1;
  exec_stop(x, modal_client_loop(op->cl));
  lash_wait_done(&op->w);
}

static void exec_fatal(mop *op, const char *where, int code, const char *msg) {
  mexec *x = &op->x;
  if (!x->fatal_code && !x->finished) {
    x->fatal_code = code ? code : GRPC_UNKNOWN;
    snprintf(x->fatal_where, sizeof x->fatal_where, "%s", where);
    snprintf(x->fatal_msg, sizeof x->fatal_msg, "%s", msg);
  }
  exec_finish(op);
}

static void stream_open(mstream *s);

static void exec_check_done(mop *op) {
  mexec *x = &op->x;
  if (!(x->out.done && x->wait_done && x->stdin_done)) return;
  if (!x->err.done && x->fs && !x->err.opened) {
    /* a file tool's stderr holds its error report: read it only after a
    ** failed exit (the worker keeps output, so nothing is lost) */
    if (x->has_code && x->code == 0) x->err.done = 1;
    else { stream_open(&x->err); return; }
  }
  if (x->err.done) exec_finish(op);
}

static int stream_msg(void *ud, const uint8_t *m, size_t n) {
  mstream *s = ud;
  /* TaskExecStdioReadResponse { bytes data = 1; }: read it in place */
  const uint8_t *p = m, *end = m + n;
  while (p < end) {
    uint64_t tag, len;
    if (pb_varint_get(&p, end, &tag) < 0) return s->malformed = 1;
    int wt = (int)(tag & 7);
    if (wt == 0) {
      if (pb_varint_get(&p, end, &len) < 0) return s->malformed = 1;
      continue;
    }
    if (wt == 1 || wt == 5) {
      size_t w = wt == 1 ? 8 : 4;
      if ((size_t)(end - p) < w) return s->malformed = 1;
      p += w;
      continue;
    }
    if (wt != 2 || pb_varint_get(&p, end, &len) < 0 || len > (uint64_t)(end - p))
      return s->malformed = 1;
    if ((tag >> 3) == 1) {
      if (lash_ring_feed(&s->ring, p, (size_t)len) < 0) return s->malformed = 1;
      s->offset += len;
      s->retries = 0;
    }
    p += len;
  }
  if (s->cap && s->offset > s->cap) return s->capped = 1;   /* enough: stop */
  return 0;
}

static void stream_retry_timer(lash_loop *loop, lash_timer *t) {
  (void)loop;
  stream_open(t->data);
}

static void stream_refreshed(modal_rpc *r) {
  mstream *s = r->ud;
  int code = r->code;
  char msg[512];
  snprintf(msg, sizeof msg, "%s", r->message);
  modal_rpc_clear(r);
  if (code == GRPC_OK) stream_open(s);
  else exec_fatal(s->op, s->fd ? "stderr" : "stdout", code, msg);
}

static void stream_done(void *ud, const grpc_status *st) {
  mstream *s = ud;
  mop *op = s->op;
  mexec *x = &op->x;
  s->call = NULL;
  if (s->malformed) {
    exec_fatal(op, s->fd ? "stderr" : "stdout", GRPC_INTERNAL,
               "the router sent an undecodable output message (or memory ran out)");
    return;
  }
  if (st->code == GRPC_OK || s->capped) {
    s->done = 1;
    exec_check_done(op);
    return;
  }
  if (st->code == GRPC_UNAUTHENTICATED && s->retries < STREAM_RETRIES) {
    /* the router JWT expired: a unary poll refreshes access, then resume */
    modal_TaskExecWaitRequest req = { pb_cstr(op->sbx->task_id), pb_cstr(x->exec_id) };
    s->retries++;
    s->refresh.method = "TaskExecPoll";
    s->refresh.flags = MODAL_RPC_ROUTER;
    s->refresh.resp_desc = &modal_TaskExecPollResponse_desc;
    s->refresh.sbx = op->sbx;
    s->refresh.timeout = 30;
    s->refresh.done = stream_refreshed;
    s->refresh.ud = s;
    if (modal_rpc_start(&s->refresh, &modal_TaskExecPollRequest_desc, &req) == 0) return;
  }
  if (modal_code_transient(st->code) && s->retries < STREAM_RETRIES) {
    /* resume exactly where the bytes stopped */
    double d = 0.01 * pow(2, s->retries);
    s->retries++;
    lash_timer_start(modal_client_loop(op->cl), &s->timer, (uint64_t)(d * 1e9),
                     stream_retry_timer, s);
    return;
  }
  exec_fatal(op, s->fd ? "stderr" : "stdout", st->code, st->message);
}

static void stream_open(mstream *s) {
  mop *op = s->op;
  char err[256];
  s->opened = 1;
  modal_TaskExecStdioReadRequest req = {
    pb_cstr(op->sbx->task_id), pb_cstr(op->x.exec_id), s->offset,
    s->fd ? MODAL_STDIO_STDERR : MODAL_STDIO_STDOUT };
  s->call = modal_stream_start(op->cl, "TaskExecStdioRead", MODAL_RPC_ROUTER, op->sbx,
                               &modal_TaskExecStdioReadRequest_desc, &req, 0, stream_msg,
                               stream_done, s, err, sizeof err);
  if (!s->call) exec_fatal(op, s->fd ? "stderr" : "stdout", GRPC_UNAVAILABLE, err);
}

static void stdin_next(mop *op);

static void stdin_written(modal_rpc *r) {
  mop *op = r->ud;
  mexec *x = &op->x;
  int code = r->code;
  if (code == GRPC_OK) {
    modal_rpc_clear(r);
    if (x->stdin_off >= x->stdin_len) {
      x->stdin_done = 1;
      exec_check_done(op);
    } else {
      stdin_next(op);
    }
    return;
  }
  if (code == GRPC_FAILED_PRECONDITION || code == GRPC_ABORTED) {
    /* the command exited before reading all of its input */
    modal_rpc_clear(r);
    x->stdin_done = 1;
    exec_check_done(op);
    return;
  }
  exec_fatal(op, "stdin", code, r->message);
}

static void stdin_next(mop *op) {
  mexec *x = &op->x;
  size_t n = x->stdin_len - x->stdin_off;
  if (n > STDIN_CHUNK) n = STDIN_CHUNK;
  modal_TaskExecStdinWriteRequest req = {
    pb_cstr(op->sbx->task_id), pb_cstr(x->exec_id), x->stdin_off,
    { x->stdin_data ? x->stdin_data + x->stdin_off : "", n },
    x->stdin_off + n >= x->stdin_len };
  x->in.method = "TaskExecStdinWrite";
  x->in.flags = MODAL_RPC_ROUTER;
  x->in.resp_desc = &modal_TaskExecStdinWriteResponse_desc;
  x->in.sbx = op->sbx;
  x->in.timeout = 60;
  x->in.done = stdin_written;
  x->in.ud = op;
  x->stdin_off += n;
  if (modal_rpc_start(&x->in, &modal_TaskExecStdinWriteRequest_desc, &req) < 0)
    exec_fatal(op, "stdin", -1, x->in.message);
}

static void stdin_eof_timer(lash_loop *loop, lash_timer *t) {
  mop *op = t->data;
  (void)loop;
  if (op->x.finished || op->x.wait_done) return;
  op->x.stdin_done = 0;
  stdin_next(op);   /* an empty write with eof */
}

static void waited(modal_rpc *r) {
  mop *op = r->ud;
  mexec *x = &op->x;
  if (r->code == GRPC_OK) {
    const modal_TaskExecWaitResponse *w = r->resp;
    x->has_code = w->has_code;
    x->code = w->code;
    x->has_signal = w->has_signal;
    x->sig = w->signal;
    x->wait_done = 1;
    modal_rpc_clear(r);
    exec_check_done(op);
    return;
  }
  if (r->code == GRPC_DEADLINE_EXCEEDED &&
      (x->timed_out_local || modal_now() >= x->t0 + x->timeout + EXEC_GRACE - 1)) {
    /* past the command's deadline and grace: it timed out */
    x->timed_out_local = 1;
    exec_finish(op);
    return;
  }
  exec_fatal(op, "wait", r->code, r->message);
}

static void exec_deadline(lash_loop *loop, lash_timer *t) {
  mop *op = t->data;
  (void)loop;
  op->x.timed_out_local = 1;
  exec_finish(op);
}

static void exec_started(modal_rpc *r) {
  mop *op = r->ud;
  mexec *x = &op->x;
  if (r->code != GRPC_OK) { exec_fatal(op, "start", r->code, r->message); return; }
  modal_rpc_clear(r);
  x->started = 1;
  lash_loop *loop = modal_client_loop(op->cl);
  lash_timer_start(loop, &x->deadline, (uint64_t)((x->timeout + EXEC_GRACE) * 1e9),
                   exec_deadline, op);
  if (x->no_stdout) x->out.done = 1;
  else stream_open(&x->out);
  if (x->finished) return;
  if (!x->fs) stream_open(&x->err);
  if (x->finished) return;
  if (x->stdin_data) stdin_next(op);
  else {
    x->stdin_done = 1;
    if (!x->fs)
      lash_timer_start(loop, &x->eof_timer, (uint64_t)(STDIN_EOF_GRACE * 1e9),
                       stdin_eof_timer, op);
  }
  if (x->finished) return;
  modal_TaskExecWaitRequest req = { pb_cstr(op->sbx->task_id), pb_cstr(x->exec_id) };
  x->wait.method = "TaskExecWait";
  x->wait.flags = MODAL_RPC_ROUTER | MODAL_RPC_LONGPOLL;
  x->wait.resp_desc = &modal_TaskExecWaitResponse_desc;
  x->wait.sbx = op->sbx;
  x->wait.timeout = 60;
  x->wait.deadline = x->t0 + x->timeout + EXEC_GRACE;
  x->wait.done = waited;
  x->wait.ud = op;
  if (modal_rpc_start(&x->wait, &modal_TaskExecWaitRequest_desc, &req) < 0)
    exec_fatal(op, "wait", -1, x->wait.message);
}

/* Start a command in op->sbx (router ready); the op then waits once for all
** of it. argv/env point at memory alive until exec_started runs. */
static int exec_begin(lua_State *L, mop *op, pb_str *argv, size_t argc,
                      pb_kv *env, size_t envn, const char *cwd,
                      const char *stdin_data, size_t stdin_len,
                      size_t max_out, size_t max_err, uint32_t timeout,
                      int fs, int no_stdout, uint64_t out_cap, lua_KFunction k) {
  mexec *x = &op->x;
  lash_loop *loop = modal_client_loop(op->cl);
  exec_stop(x, loop);
  lash_ring_free(&x->out.ring);
  lash_ring_free(&x->err.ring);
  memset(x, 0, sizeof *x);
  lash_timer_init(&x->deadline);
  lash_timer_init(&x->eof_timer);
  lash_timer_init(&x->out.timer);
  lash_timer_init(&x->err.timer);
  op_rpc_init(op, &x->start);
  op_rpc_init(op, &x->wait);
  op_rpc_init(op, &x->in);
  modal_rpc_init(&x->out.refresh, op->cl);
  modal_rpc_init(&x->err.refresh, op->cl);
  x->out.op = x->err.op = op;
  x->err.fd = 1;
  lash_ring_init(&x->out.ring, max_out);
  lash_ring_init(&x->err.ring, max_err);
  x->active = 1;
  x->fs = fs;
  x->no_stdout = no_stdout;
  x->out.cap = out_cap;
  x->stdin_data = stdin_data;
  x->stdin_len = stdin_len;
  x->timeout = timeout;
  x->t0 = modal_now();
  modal_uuid4(x->exec_id);
  modal_TaskExecStartRequest req = {
    .task_id = pb_cstr(op->sbx->task_id), .exec_id = pb_cstr(x->exec_id),
    .command_args = argv, .command_args_n = argc,
    .stdout_config = MODAL_EXEC_OUT_PIPE, .stderr_config = MODAL_EXEC_OUT_PIPE,
    .has_timeout_secs = true, .timeout_secs = timeout,
    .env = env, .env_n = envn };
  if (cwd) { req.has_workdir = true; req.workdir = pb_cstr(cwd); }
  x->start.method = "TaskExecStart";
  x->start.flags = MODAL_RPC_ROUTER;
  x->start.resp_desc = &modal_TaskExecStartResponse_desc;
  x->start.sbx = op->sbx;
  x->start.timeout = 30;
  x->start.done = exec_started;
  if (modal_rpc_start(&x->start, &modal_TaskExecStartRequest_desc, &req) < 0)
    return sb_raise(L, LASH_SB_ERROR, "bad_command", "cannot send the command: %s",
                              x->start.message);
  return op_wait(L, op, k);
}

/* After the exec's wait: raise a fatal failure (classifying ambiguous
** ones by a poll, through op->rpc), or return 0. */
static int exec_check(lua_State *L, mop *op, lua_KFunction k) {
  mexec *x = &op->x;
  if (!x->fatal_code) return 0;
  modal_rpc *r = &op->rpc;
  r->code = x->fatal_code;
  snprintf(r->message, sizeof r->message, "%s", x->fatal_msg);
  r->method = !strcmp(x->fatal_where, "start") ? "TaskExecStart"
            : !strcmp(x->fatal_where, "wait") ? "TaskExecWait"
            : !strcmp(x->fatal_where, "stdin") ? "TaskExecStdinWrite" : "TaskExecStdioRead";
  (void)k;
  if (x->fatal_code == GRPC_INVALID_ARGUMENT && !strcmp(x->fatal_where, "start"))
    return sb_raise(L, LASH_SB_ERROR, "start_failed",
                              "the command did not start: %s", x->fatal_msg);
  if (x->fatal_code == GRPC_FAILED_PRECONDITION && !strcmp(x->fatal_where, "start")) {
    /* could be a bad command or a finished sandbox: poll to tell */
    op->saved_code = x->fatal_code;
    snprintf(op->saved, sizeof op->saved, "the command did not start (%s)", x->fatal_msg);
    modal_SandboxWaitRequest req = { pb_cstr(op->sbx->id), 0 };
    return SBX_CALL(L, op, op->sbx, "SandboxWait", &modal_SandboxWaitRequest_desc,
                    &req, &modal_SandboxWaitResponse_desc, 10, classify_k);
  }
  return op_fail(L, op, 1);
}

/* Push the ring's bytes as a Lua string. */
static void push_ring(lua_State *L, lash_ring *r) {
  size_t n;
  const char *p = lash_ring_view(r, &n);
  lua_pushlstring(L, p ? p : "", n);
}

/* ---- paths and JSON ------------------------------------------------------------- */

/* Resolve path against the sandbox workdir and normalize "." and "..". */
static const char *abs_path(lua_State *L, mop *op, const char *path) {
  const char *base = op->sbx->workdir ? op->sbx->workdir : "/";
  size_t n = strlen(path) + strlen(base) + 2;
  char *joined = pb_arena_alloc(op->arena, n), *out = pb_arena_alloc(op->arena, n + 1);
  if (!joined || !out) luaL_error(L, "modal backend: out of memory");
  if (path[0] == '/') snprintf(joined, n, "%s", path);
  else snprintf(joined, n, "%s/%s", base, path);
  size_t o = 0;
  const char *p = joined;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 1 && p[0] == '.') { /* skip */ }
    else if (len == 2 && p[0] == '.' && p[1] == '.') {
      while (o > 0 && out[o - 1] != '/') o--;
      if (o > 0) o--;
    } else {
      out[o++] = '/';
      memcpy(out + o, p, len);
      o += len;
    }
    p += len;
  }
  if (o == 0) out[o++] = '/';
  out[o] = 0;
  return out;
}

static void json_str(luaL_Buffer *b, const char *s) {
  luaL_addchar(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') { luaL_addchar(b, '\\'); luaL_addchar(b, (char)*p); }
    else if (*p < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      luaL_addstring(b, esc);
    } else luaL_addchar(b, (char)*p);
  }
  luaL_addchar(b, '"');
}

/* The fs-tools argument for op on path, e.g. {"Stat":{"path":"/x"}}; kept in
** the arena. */
static const char *fs_command(lua_State *L, mop *op, const char *cmd, const char *path,
                              const char *extra) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "{\"");
  luaL_addstring(&b, cmd);
  luaL_addstring(&b, "\":{\"path\":");
  json_str(&b, path);
  if (extra) luaL_addstring(&b, extra);
  luaL_addstring(&b, "}}");
  luaL_pushresult(&b);
  size_t n;
  const char *s = lua_tolstring(L, -1, &n);
  const char *d = op_strdup(L, op, s, n);
  lua_pop(L, 1);
  return d;
}

static int fs_begin(lua_State *L, mop *op, const char *json, const char *stdin_data,
                    size_t stdin_len, size_t max_out, lua_KFunction k) {
  int no_stdout = stdin_data != NULL;   /* WriteFile prints nothing */
  pb_str *argv = pb_arena_alloc(op->arena, 2 * sizeof *argv);
  if (!argv) luaL_error(L, "modal backend: out of memory");
  argv[0] = pb_cstr(FS_TOOLS);
  argv[1] = pb_cstr(json);
  return exec_begin(L, op, argv, 2, NULL, 0, NULL, stdin_data, stdin_len, max_out,
                    64 * 1024, FS_TIMEOUT, 1, no_stdout, max_out, k);
}

/* Decode JSON text at the top of the stack with cjson: replaces it with the
** value, or returns 0 (popping it) when it does not parse. */
static int json_decode(lua_State *L) {
  int s = lua_gettop(L);
  size_t len;
  const char *text = lua_tolstring(L, s, &len);
  int ok = text && lash_sandbox_json_decode(L, text, len);
  if (!ok) { lua_settop(L, s - 1); return 0; }
  lua_replace(L, s);
  lua_settop(L, s);
  return 1;
}

/* A failed fs-tools command: raise a sandbox error from its JSON report. */
static int fs_raise(lua_State *L, mop *op, const char *action) {
  mexec *x = &op->x;
  int exit_code = x->has_code ? x->code : 128 + x->sig;
  push_ring(L, &x->err.ring);
  const char *kind = NULL, *msg = NULL;
  if (json_decode(L) && lua_istable(L, -1)) {
    lua_getfield(L, -1, "error_kind");
    lua_getfield(L, -2, "message");
    kind = lua_tostring(L, -2);
    msg = lua_tostring(L, -1);
  }
  if (!kind || !msg) {
    push_ring(L, &x->err.ring);
    return sb_raise(L, LASH_SB_ERROR, "fs_error",
                    "'%s': cannot %s it (modal-sandbox-fs-tools exited %d: %s)", op->path,
                    action, exit_code, lua_tostring(L, -1));
  }
  /* the local backend's codes and wording, so tools read the same */
  if (!strcmp(kind, "NotFound"))
    return sb_raise(L, LASH_SB_ERROR, "not_found", "'%s': No such file or directory", op->path);
  if (!strcmp(kind, "IsDirectory"))
    return sb_raise(L, LASH_SB_ERROR, "is_dir", "'%s' is a directory", op->path);
  if (!strcmp(kind, "NotDirectory") || !strcmp(kind, "IsFile"))
    return sb_raise(L, LASH_SB_ERROR, "not_dir", "'%s': Not a directory", op->path);
  if (!strcmp(kind, "PermissionDenied"))
    return sb_raise(L, LASH_SB_ERROR, "denied", "'%s': Permission denied (%s)", op->path, msg);
  if (!strcmp(kind, "AlreadyExists") || !strcmp(kind, "PathAlreadyExists"))
    return sb_raise(L, LASH_SB_ERROR, "not_dir", "'%s': a parent is not a directory", op->path);
  if (!strcmp(kind, "FileTooLarge"))
    return lash_sandbox_raise_too_large(L, op->path, -1, -1, msg);
  return sb_raise(L, LASH_SB_ERROR, "fs_error", "'%s': cannot %s it: %s", op->path, action, msg);
}

static const char *kind_of(const char *t) {
  if (!t) return "other";
  if (!strcmp(t, "file")) return "file";
  if (!strcmp(t, "directory")) return "dir";
  if (!strcmp(t, "symlink")) return "symlink";
  return "other";
}

/* ---- slots ----------------------------------------------------------------------- */

static modal_sbx *op_sbx(lua_State *L, mop *op, int idx) {
  const char *id = luaL_checkstring(L, idx);
  if (!*id) luaL_argerror(L, idx, "empty sandbox id");
  op->sbx = modal_client_sbx(op->cl, id);
  if (!op->sbx) luaL_error(L, "modal backend: out of memory");
  return op->sbx;
}

/* ---- create ---- */

enum { C_APP = 1, C_APP_CHECK, C_ENV, C_ENV_CHECK, C_IMAGE, C_IMAGE_CHECK, C_JOIN,
       C_JOIN_CHECK, C_SECRET, C_SECRET_CHECK, C_CREATE, C_CREATE_CHECK };

typedef struct create_args {
  modal_Sandbox def;
  modal_NetworkAccess net;
  modal_Resources res;
  modal_PortSpecs ports;
  modal_GPUConfig gpu;
  modal_SandboxTag *tags;
  size_t ntags;
  pb_kv *env;
  size_t nenv;
  modal_StringMap envmap;
  pb_str secret;
} create_args;

static int create_k(lua_State *L, int status, lua_KContext ctx);

static void join_msg_state(mop *op, const uint8_t *m, size_t n) {
  pb_arena *a = pb_arena_new();
  modal_ImageJoinStreamingResponse resp;
  pb_err e;
  if (a && pb_decode(&modal_ImageJoinStreamingResponse_desc, &resp, m, n, a, &e) == 0) {
    if (resp.entry_id.n && resp.entry_id.n < sizeof op->last_entry)
      snprintf(op->last_entry, sizeof op->last_entry, "%.*s", (int)resp.entry_id.n,
               resp.entry_id.p);
    if (resp.result && resp.result->status != MODAL_STATUS_UNSPECIFIED) {
      op->image_done = 1;
      op->image_status = resp.result->status;
      snprintf(op->image_exc, sizeof op->image_exc, "%.*s", (int)resp.result->exception.n,
               resp.result->exception.p);
    }
  }
  pb_arena_free(a);
}

static int join_on_msg(void *ud, const uint8_t *m, size_t n) {
  join_msg_state(ud, m, n);
  return 0;
}

static void join_on_done(void *ud, const grpc_status *st) {
  mop *op = ud;
  op->stream = NULL;
  op->rpc.code = st->code;
  snprintf(op->rpc.message, sizeof op->rpc.message, "%s", st->message);
  lash_wait_done(&op->w);
}

static int image_result(lua_State *L, mop *op, int status, const char *exc) {
  if (status == MODAL_STATUS_SUCCESS) {
    char key[600];
    snprintf(key, sizeof key, "image\1%s\1%s", op->image_tag, op->ibv ? op->ibv : "");
    modal_client_cache_put(op->cl, key, op->image_id);
    return 0;
  }
  return sb_raise(L, LASH_SB_ERROR, "image_failed",
                            "Modal could not build image %s (%s): %s", op->image_tag,
                            status == MODAL_STATUS_TIMEOUT ? "timed out" : "build failed",
                            exc && *exc ? exc : "no details");
}

static int create_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  create_args *ca = op->args;
  const modal_config *cfg = modal_client_config(op->cl);
  char key[600];
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    modal_rpc *r = &op->rpc;
    switch (op->step) {
      case C_APP: {
        snprintf(key, sizeof key, "app\1%s\1%s", cfg->environment, op->app_name);
        if ((op->app_id = modal_client_cache_get(op->cl, key))) { op->step = C_ENV; continue; }
        modal_AppGetOrCreateRequest req = {
          pb_cstr(op->app_name), pb_cstr(cfg->environment),
          op->create_app ? MODAL_OBJECT_CREATION_CREATE_IF_MISSING
                         : MODAL_OBJECT_CREATION_UNSPECIFIED };
        op->step = C_APP_CHECK;
        return op_call(L, op, "AppGetOrCreate", 0, &modal_AppGetOrCreateRequest_desc, &req,
                       &modal_AppGetOrCreateResponse_desc, 30, create_k);
      }
      case C_APP_CHECK: {
        if (r->code == GRPC_NOT_FOUND)
          return sb_raise(L, LASH_SB_ERROR, "app_not_found", "Modal app '%s' does not exist%s%s; "
                          "create it (create_app_if_missing = true) or name an existing app",
                          op->app_name, *cfg->environment ? " in environment " : "",
                          cfg->environment);
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_AppGetOrCreateResponse *a = r->resp;
        op->app_id = op_strdup(L, op, a->app_id.p, a->app_id.n);
        snprintf(key, sizeof key, "app\1%s\1%s", cfg->environment, op->app_name);
        modal_client_cache_put(op->cl, key, op->app_id);
        op->step = C_ENV;
        continue;
      }
      case C_ENV: {
        if (op->image_id) { op->step = C_SECRET; continue; }   /* from_snapshot: built */
        op->ibv = cfg->image_builder_version;
        snprintf(key, sizeof key, "ibv\1%s", cfg->environment);
        if (!op->ibv) op->ibv = modal_client_cache_get(op->cl, key);
        if (op->ibv) { op->step = C_IMAGE; continue; }
        modal_EnvironmentGetOrCreateRequest req = { pb_cstr(cfg->environment), 0 };
        op->step = C_ENV_CHECK;
        return op_call(L, op, "EnvironmentGetOrCreate", 0,
                       &modal_EnvironmentGetOrCreateRequest_desc, &req,
                       &modal_EnvironmentGetOrCreateResponse_desc, 30, create_k);
      }
      case C_ENV_CHECK: {
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_EnvironmentGetOrCreateResponse *e = r->resp;
        if (e->metadata && e->metadata->settings && e->metadata->settings->image_builder_version.n) {
          const pb_str *v = &e->metadata->settings->image_builder_version;
          op->ibv = op_strdup(L, op, v->p, v->n);
          snprintf(key, sizeof key, "ibv\1%s", cfg->environment);
          modal_client_cache_put(op->cl, key, op->ibv);
        }
        op->step = C_IMAGE;
        continue;
      }
      case C_IMAGE: {
        if (op->image_id) { op->step = C_SECRET; continue; }   /* from_snapshot */
        snprintf(key, sizeof key, "image\1%s\1%s", op->image_tag, op->ibv ? op->ibv : "");
        if ((op->image_id = modal_client_cache_get(op->cl, key))) { op->step = C_SECRET; continue; }
        char from[600];
        snprintf(from, sizeof from, "FROM %s", op->image_tag);
        pb_str cmd = pb_cstr(from);
        modal_Image img = { .dockerfile_commands = &cmd, .dockerfile_commands_n = 1 };
        modal_ImageGetOrCreateRequest req = { .image = &img, .app_id = pb_cstr(op->app_id),
                                              .builder_version = pb_cstr(op->ibv) };
        op->step = C_IMAGE_CHECK;
        return op_call(L, op, "ImageGetOrCreate", 0, &modal_ImageGetOrCreateRequest_desc,
                       &req, &modal_ImageGetOrCreateResponse_desc, 60, create_k);
      }
      case C_IMAGE_CHECK: {
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_ImageGetOrCreateResponse *i = r->resp;
        op->image_id = op_strdup(L, op, i->image_id.p, i->image_id.n);
        if (i->result && i->result->status != MODAL_STATUS_UNSPECIFIED) {
          char exc[256];
          snprintf(exc, sizeof exc, "%.*s", (int)i->result->exception.n, i->result->exception.p);
          image_result(L, op, i->result->status, exc);
          op->step = C_SECRET;
          continue;
        }
        op->last_entry[0] = 0;
        op->step = C_JOIN;
        continue;
      }
      case C_JOIN: {
        char err[256];
        modal_ImageJoinStreamingRequest req = { pb_cstr(op->image_id), 55,
                                                pb_cstr(op->last_entry), false };
        op->image_done = 0;
        op->stream = modal_stream_start(op->cl, "ImageJoinStreaming", 0, NULL,
                                        &modal_ImageJoinStreamingRequest_desc, &req, 65,
                                        join_on_msg, join_on_done, op, err, sizeof err);
        if (!op->stream)
          return sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                                    "cannot follow the image build: %s", err);
        op->step = C_JOIN_CHECK;
        return op_wait(L, op, create_k);
      }
      case C_JOIN_CHECK:
        if (op->image_done) {
          image_result(L, op, op->image_status, op->image_exc);
          op->step = C_SECRET;
          continue;
        }
        if (r->code != GRPC_OK && !modal_code_transient(r->code)) {
          r->method = "ImageJoinStreaming";
          return op_fail(L, op, 0);
        }
        if (r->code != GRPC_OK && ++op->stream_retries > STREAM_RETRIES)
          return sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                                    "lost the image build stream %d times (%s: %s)",
                                    STREAM_RETRIES, grpc_code_name(r->code), r->message);
        if (modal_now() - op->t_start > IMAGE_BUILD_WAIT)
          return sb_raise(L, LASH_SB_ERROR, "image_failed",
                                    "image %s did not finish building within %.0f s",
                                    op->image_tag, IMAGE_BUILD_WAIT);
        /* the stream ended without a result (or dropped): resume after the
        ** last entry seen */
        op->step = C_JOIN;
        if (r->code != GRPC_OK) return op_sleep(L, op, 0.1 * op->stream_retries, create_k);
        continue;
      case C_SECRET: {
        /* V1 carries env in an ephemeral secret; V2 inline */
        if (ca->nenv == 0 || op->count) { op->step = C_CREATE; continue; }
        modal_SecretGetOrCreateRequest req = {
          .environment_name = pb_cstr(cfg->environment),
          .object_creation_type = MODAL_OBJECT_CREATION_EPHEMERAL,
          .env_dict = ca->env, .env_dict_n = ca->nenv };
        op->step = C_SECRET_CHECK;
        return op_call(L, op, "SecretGetOrCreate", 0, &modal_SecretGetOrCreateRequest_desc,
                       &req, &modal_SecretGetOrCreateResponse_desc, 30, create_k);
      }
      case C_SECRET_CHECK: {
        if (r->code == GRPC_INVALID_ARGUMENT || r->code == GRPC_FAILED_PRECONDITION)
          return sb_raise(L, LASH_SB_ERROR, "bad_env", "Modal refused the sandbox "
                                    "env: %s", r->message);
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_SecretGetOrCreateResponse *s = r->resp;
        op->secret_id = op_strdup(L, op, s->secret_id.p, s->secret_id.n);
        ca->secret = pb_cstr(op->secret_id);
        ca->def.secret_ids = &ca->secret;
        ca->def.secret_ids_n = 1;
        op->step = C_CREATE;
        continue;
      }
      case C_CREATE: {
        ca->def.image_id = pb_cstr(op->image_id);
        op->step = C_CREATE_CHECK;
        if (op->count) {   /* V2 */
          modal_SandboxCreateV2Request req = { .app_id = pb_cstr(op->app_id),
                                               .definition = &ca->def, .tags = ca->tags,
                                               .tags_n = ca->ntags };
          if (ca->nenv) {
            ca->envmap.contents = ca->env;
            ca->envmap.contents_n = ca->nenv;
            req.ephemeral_secrets = &ca->envmap;
          }
          return op_call(L, op, "SandboxCreateV2", MODAL_RPC_V2,
                         &modal_SandboxCreateV2Request_desc, &req,
                         &modal_SandboxCreateV2Response_desc, 120, create_k);
        }
        modal_SandboxCreateRequest req = { .app_id = pb_cstr(op->app_id),
                                           .definition = &ca->def, .tags = ca->tags,
                                           .tags_n = ca->ntags };
        return op_call(L, op, "SandboxCreate", 0, &modal_SandboxCreateRequest_desc, &req,
                       &modal_SandboxCreateResponse_desc, 120, create_k);
      }
      case C_CREATE_CHECK: {
        if (r->code == GRPC_INVALID_ARGUMENT || r->code == GRPC_FAILED_PRECONDITION ||
            r->code == GRPC_RESOURCE_EXHAUSTED || r->code == GRPC_ALREADY_EXISTS) {
          char lc[32];
          lower_code(r->code, lc, sizeof lc);
          return sb_raise(L, LASH_SB_ERROR, lc, "Modal refused to create the "
                                    "sandbox: %s", r->message);
        }
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        pb_str id;
        const modal_SandboxCreateV2Response *v2 = op->count ? r->resp : NULL;
        if (v2) id = v2->sandbox_id;
        else id = ((const modal_SandboxCreateResponse *)r->resp)->sandbox_id;
        if (!id.n)
          return sb_raise(L, LASH_SB_ERROR, "bad_reply",
                                    "Modal created a sandbox but sent no id");
        char *sid = op_strdup(L, op, id.p, id.n);
        modal_sbx *s = modal_client_sbx(op->cl, sid);
        if (s) {
          if (v2 && v2->task_id.n) set_str_field(&s->task_id, v2->task_id);
          if (v2 && v2->command_router_access && v2->command_router_access->jwt.n) {
            set_str_field(&s->router_jwt, v2->command_router_access->jwt);
            set_str_field(&s->router_url, v2->command_router_access->url);
          }
          set_str_field(&s->workdir, ca->def.has_workdir ? ca->def.workdir : pb_cstr("/"));
        }
        lua_pushlstring(L, id.p, id.n);
        return 1;
      }
      default:
        return luaL_error(L, "modal backend: bad create step %d", op->step);
    }
  }
}

static int map_to_kv(lua_State *L, mop *op, int t, pb_kv **out, size_t *n) {
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 8;
      pb_kv *na = pb_arena_alloc(op->arena, nc * sizeof *na);
      if (!na) luaL_error(L, "modal backend: out of memory");
      if (*n) memcpy(na, *out, *n * sizeof *na);
      *out = na;
      cap = nc;
    }
    size_t kl, vl;
    const char *k = lua_tolstring(L, -2, &kl), *v = lua_tolstring(L, -1, &vl);
    if (!k || !v) luaL_error(L, "modal backend: env and tags must map strings to strings");
    /* the strings live in the spec table, on the stack for the whole op */
    (*out)[*n].key = (pb_str){ k, kl };
    (*out)[*n].value = (pb_str){ v, vl };
    (*n)++;
    lua_pop(L, 1);
  }
  return 0;
}

static int s_create(lua_State *L) {
  /* 1 cfg, 2 spec */
  luaL_checktype(L, 2, LUA_TTABLE);
  mop *op = op_new(L, 1, "create");
  const modal_config *cfg = modal_client_config(op->cl);
  create_args *ca = pb_arena_alloc(op->arena, sizeof *ca);
  if (!ca) luaL_error(L, "modal backend: out of memory");
  op->args = ca;
  op->count = cfg->sandbox_v2 ? 1 : 0;   /* 1: V2 */

  lua_Integer timeout = 300;
  if (lua_getfield(L, 2, "timeout") == LUA_TNUMBER) timeout = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (timeout < 1 || timeout > MAX_LIFETIME)
    return sb_raise(L, LASH_SB_ERROR, "bad_timeout", "Modal sandboxes live at most "
                              "%d seconds (24 hours); timeout %lld is out of range",
                              MAX_LIFETIME, (long long)timeout);
  ca->def.timeout_secs = (uint32_t)timeout;
  if (lua_getfield(L, 2, "idle_timeout") == LUA_TNUMBER) {
    lua_Integer it = lua_tointeger(L, -1);
    if (it < 1 || it > MAX_LIFETIME)
      return sb_raise(L, LASH_SB_ERROR, "bad_timeout", "idle_timeout must be "
                                "between 1 and %d seconds", MAX_LIFETIME);
    ca->def.has_idle_timeout_secs = true;
    ca->def.idle_timeout_secs = (uint32_t)it;
  } else if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) {
    luaL_error(L, "idle_timeout must be a number of seconds");
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "workdir") == LUA_TSTRING) {
    ca->def.has_workdir = true;
    ca->def.workdir = pb_cstr(lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  /* network: all three forms map onto Modal's NetworkAccess */
  ca->net.network_access_type = MODAL_NETWORK_OPEN;
  if (lua_getfield(L, 2, "network") == LUA_TTABLE) {
    int net = lua_gettop(L);
    lua_getfield(L, net, "block_network");
    int block = lua_toboolean(L, -1);
    lua_pop(L, 1);
    const char *lists[2] = { "allow_egress_to", "allow_egress_to_cidrs" };
    pb_str **dst[2] = { &ca->net.allowed_domains, &ca->net.allowed_cidrs };
    size_t *dn[2] = { &ca->net.allowed_domains_n, &ca->net.allowed_cidrs_n };
    for (int i = 0; i < 2; i++) {
      if (lua_getfield(L, net, lists[i]) == LUA_TTABLE) {
        size_t n = lua_rawlen(L, -1);
        if (n) {
          *dst[i] = pb_arena_alloc(op->arena, n * sizeof(pb_str));
          if (!*dst[i]) luaL_error(L, "modal backend: out of memory");
          for (size_t j = 0; j < n; j++) {
            lua_rawgeti(L, -1, (lua_Integer)j + 1);
            size_t l;
            const char *s = lua_tolstring(L, -1, &l);
            if (!s) luaL_error(L, "network allow lists hold strings");
            (*dst[i])[j] = (pb_str){ s, l };   /* alive in spec.network */
            lua_pop(L, 1);
          }
          *dn[i] = n;
        }
      }
      lua_pop(L, 1);
    }
    if (ca->net.allowed_domains_n || ca->net.allowed_cidrs_n)
      ca->net.network_access_type = MODAL_NETWORK_ALLOWLIST;
    else if (block)
      ca->net.network_access_type = MODAL_NETWORK_BLOCKED;
  }
  lua_pop(L, 1);
  ca->def.network_access = &ca->net;
  ca->def.open_ports = &ca->ports;
  /* resources */
  if (lua_getfield(L, 2, "cpu") != LUA_TNIL) {
    double c = lua_tonumber(L, -1);
    if (!lua_isnumber(L, -1) || !(c > 0) || c > 1024)
      luaL_error(L, "modal backend: option 'cpu' must be a number of cores (e.g. 0.5, 2)");
    ca->res.milli_cpu = (uint32_t)ceil(c * 1000);
    ca->def.resources = &ca->res;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "memory") != LUA_TNIL) {
    lua_Integer m = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || m < 1 || m > 4 * 1024 * 1024)
      luaL_error(L, "modal backend: option 'memory' must be an integer number of MiB");
    ca->res.memory_mb = (uint32_t)m;
    ca->def.resources = &ca->res;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "gpu") != LUA_TNIL) {
    /* "A10G", "h100:2": the type upper-cased and a count, as Modal's SDKs
    ** parse it; V2 sandboxes have no GPUs, so a GPU makes it a V1 sandbox */
    size_t l;
    const char *g = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &l) : NULL;
    const char *colon = g ? strchr(g, ':') : NULL;
    size_t tl = colon ? (size_t)(colon - g) : (g ? l : 0);
    long count = 1;
    if (colon) {
      char *end;
      count = strtol(colon + 1, &end, 10);
      if (end == colon + 1 || *end || count < 1 || count > 64) count = -1;
    }
    if (!g || tl == 0 || tl > 64 || count < 1)
      luaL_error(L, "modal backend: option 'gpu' must be a GPU type with an optional "
                    "count, e.g. \"A10G\" or \"H100:2\"");
    char *t = op_strdup(L, op, g, tl);
    for (char *c = t; *c; c++) *c = (char)toupper((unsigned char)*c);
    ca->gpu.gpu_type = pb_cstr(t);
    ca->gpu.count = (uint32_t)count;
    ca->res.gpu_config = &ca->gpu;
    ca->def.resources = &ca->res;
    op->count = 0;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "from_snapshot") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING || strncmp(lua_tostring(L, -1), "im-", 3) ||
        !lua_tostring(L, -1)[3])
      luaL_error(L, "modal backend: option 'from_snapshot' must be the image id a "
                    "snapshot printed (im-...)");
    op->image_id = lua_tostring(L, -1);   /* alive in spec */
    if (lua_getfield(L, 2, "image") != LUA_TNIL)
      luaL_error(L, "modal backend: give 'image' or 'from_snapshot', not both (a "
                    "snapshot is an image)");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  /* env and tags (strings stay alive in spec, argument 2) */
  if (lua_getfield(L, 2, "env") == LUA_TTABLE) map_to_kv(L, op, lua_gettop(L), &ca->env, &ca->nenv);
  lua_pop(L, 1);
  if (lua_getfield(L, 2, "tags") == LUA_TTABLE) {
    pb_kv *kv;
    size_t n;
    map_to_kv(L, op, lua_gettop(L), &kv, &n);
    /* SandboxTag has the same layout as a map entry: two strings */
    ca->tags = pb_arena_alloc(op->arena, (n + 1) * sizeof *ca->tags);
    if (!ca->tags) luaL_error(L, "modal backend: out of memory");
    for (size_t i = 0; i < n; i++) {
      ca->tags[i].tag_name = kv[i].key;
      ca->tags[i].tag_value = kv[i].value;
    }
    ca->ntags = n;
  }
  lua_pop(L, 1);
  if (!ca->tags) {
    ca->tags = pb_arena_alloc(op->arena, sizeof *ca->tags);
    if (!ca->tags) luaL_error(L, "modal backend: out of memory");
  }
  ca->tags[ca->ntags].tag_name = pb_cstr(MADE_BY_TAG);
  ca->tags[ca->ntags].tag_value = pb_cstr(MADE_BY_VALUE);
  ca->ntags++;
  /* image and app */
  op->image_tag = DEFAULT_IMAGE;
  if (lua_getfield(L, 2, "image") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING || !*lua_tostring(L, -1))
      luaL_error(L, "modal backend: option 'image' must be a registry tag, e.g. \"python:3.12-slim\"");
    op->image_tag = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  op->app_name = DEFAULT_APP;
  if (lua_getfield(L, 2, "app_name") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING || !*lua_tostring(L, -1))
      luaL_error(L, "modal backend: option 'app_name' must be a non-empty string");
    op->app_name = lua_tostring(L, -1);   /* alive in spec */
  }
  lua_pop(L, 1);
  op->create_app = 1;
  if (lua_getfield(L, 2, "create_app_if_missing") != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      luaL_error(L, "modal backend: option 'create_app_if_missing' must be true or false");
    op->create_app = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  op->step = C_APP;
  return create_k(L, LUA_OK, (lua_KContext)op);
}

/* ---- exec ---- */

enum { E_RUN = 1, E_CHECK, E_DONE };

static int exec_k(lua_State *L, int status, lua_KContext ctx);

static int exec_run(lua_State *L, mop *op) {
  /* 1 cfg, 2 id, 3 argv, 4 opts, 5 op */
  size_t argc = lua_rawlen(L, 3);
  pb_str *argv = pb_arena_alloc(op->arena, (argc ? argc : 1) * sizeof *argv);
  if (!argv) luaL_error(L, "modal backend: out of memory");
  size_t total = 0;
  for (size_t i = 0; i < argc; i++) {
    lua_rawgeti(L, 3, (lua_Integer)i + 1);
    size_t l;
    const char *s = lua_tolstring(L, -1, &l);
    if (!s) luaL_error(L, "argv elements must be strings");
    argv[i] = (pb_str){ s, l };   /* alive in the argv table */
    total += l + 1;
    lua_pop(L, 1);
  }
  if (total > 65536)
    return sb_raise(L, LASH_SB_ERROR, "too_long", "the command line is %zu bytes; "
                              "Modal takes at most 65536 (write long inputs to a file or "
                              "pass them on stdin)", total);
  /* the core checked and defaulted both (sandbox.h) */
  lua_getfield(L, 4, "timeout");
  lua_getfield(L, 4, "max_output_bytes");
  lua_Integer timeout = lash_sandbox_deadline(lua_tointeger(L, -2), 0, MAX_LIFETIME);
  lua_Integer maxout = lua_tointeger(L, -1);
  lua_pop(L, 2);
  const char *cwd = NULL;
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) cwd = abs_path(L, op, lua_tostring(L, -1));
  lua_pop(L, 1);
  pb_kv *env = NULL;
  size_t nenv = 0;
  if (lua_getfield(L, 4, "env") == LUA_TTABLE) map_to_kv(L, op, lua_gettop(L), &env, &nenv);
  lua_pop(L, 1);
  const char *in = NULL;
  size_t inlen = 0;
  if (lua_getfield(L, 4, "stdin") == LUA_TSTRING) in = lua_tolstring(L, -1, &inlen);
  lua_pop(L, 1);   /* the string stays alive in opts */
  op->count = (int)timeout;
  op->step = E_CHECK;
  return exec_begin(L, op, argv, argc, env, nenv, cwd, in, inlen, (size_t)maxout,
                    (size_t)maxout, (uint32_t)timeout, 0, 0, 0, exec_k);
}

static int exec_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    if (op->step >= PREP_TASK) {
      int r = prep_step(L, op, exec_k, 0);
      if (r != PREP_CONTINUE) return r;
      continue;
    }
    switch (op->step) {
      case E_RUN:
        return exec_run(L, op);
      case E_CHECK: {
        mexec *x = &op->x;
        op->step = E_DONE;
        if (x->fatal_code) return exec_check(L, op, exec_k);
        double took = modal_now() - x->t0;
        int timed_out = x->timed_out_local;
        int code;
        if (timed_out) code = 137;
        else if (x->has_signal) code = 128 + x->sig;
        else code = x->code;
        /* Modal kills a command at timeout_secs; it reports the kill as
        ** signal 9 (or exit 137) */
        if (!timed_out && (code == 137 || (x->has_signal && x->sig == 9)) &&
            took >= x->timeout - 0.5)
          timed_out = 1;
        lash_sandbox_push_exec_result(L, &x->out.ring, &x->err.ring, code,
                                      timed_out, x->timeout);
        return 1;
      }
      default:
        return luaL_error(L, "modal backend: bad exec step %d", op->step);
    }
  }
}

static int s_exec(lua_State *L) {
  lua_settop(L, 4);
  luaL_checktype(L, 3, LUA_TTABLE);
  if (lua_isnil(L, 4)) { lua_newtable(L); lua_replace(L, 4); }
  mop *op = op_new(L, 1, "exec");
  op_sbx(L, op, 2);
  int need_wd = 0;
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) need_wd = lua_tostring(L, -1)[0] != '/';
  lua_pop(L, 1);
  op->after_prep = E_RUN;
  op->step = PREP_TASK;
  if (need_wd && !op->sbx->workdir) {
    int r = prep_step(L, op, exec_k, 1);
    if (r != PREP_CONTINUE) return r;
  }
  return exec_k(L, LUA_OK, (lua_KContext)op);
}

/* ---- files ---- */

enum { F_STAT = 1, F_STAT_CHECK, F_READ, F_READ_CHECK, F_WRITE, F_WRITE_CHECK, F_LIST,
       F_LIST_CHECK };

/* push {kind, size, mode, mtime} from a decoded fs-tools FileInfo at idx */
static void push_stat(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 4);
  lua_getfield(L, idx, "type");
  lua_pushstring(L, kind_of(lua_tostring(L, -1)));
  lua_setfield(L, -3, "kind");
  lua_pop(L, 1);
  static const char *const nums[][2] = { { "size", "size" }, { "mode", "mode" },
                                         { "modified_time", "mtime" } };
  for (int i = 0; i < 3; i++) {
    lua_getfield(L, idx, nums[i][0]);
    if (lua_isnumber(L, -1)) {
      lua_Number v = lua_tonumber(L, -1);
      lua_pop(L, 1);
      if (i < 2) lua_pushinteger(L, (lua_Integer)v);
      else lua_pushnumber(L, v);
      lua_setfield(L, -2, nums[i][1]);
    } else {
      lua_pop(L, 1);
    }
  }
}

static int file_k(lua_State *L, int status, lua_KContext ctx);

/* The fs-tools command ended: fatal RPC failure, or non-zero exit. */
static int fs_done(lua_State *L, mop *op, const char *action) {
  mexec *x = &op->x;
  if (x->fatal_code) return exec_check(L, op, file_k);
  if (x->timed_out_local)
    return sb_raise(L, LASH_SB_ERROR, "timeout", "cannot %s %s: no answer "
                              "within %d s", action, op->path, FS_TIMEOUT);
  if (!x->has_code || x->code != 0) return fs_raise(L, op, action);
  return 0;
}

static int file_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    if (op->step >= PREP_TASK) {
      int r = prep_step(L, op, file_k, 0);
      if (r != PREP_CONTINUE) return r;
      if (!op->path) {
        /* the path needed the workdir; resolve it now (arg 3) */
        op->path = abs_path(L, op, lua_tostring(L, 3));
      }
      continue;
    }
    switch (op->step) {
      case F_STAT:
        op->step = F_STAT_CHECK;
        return fs_begin(L, op, fs_command(L, op, "Stat", op->path, NULL), NULL, 0,
                        1 << 20, file_k);
      case F_STAT_CHECK: {
        int r;
        if ((r = fs_done(L, op, strcmp(op->what, "read_file") ? "stat" : "read")) != 0)
          return r;
        push_ring(L, &op->x.out.ring);
        if (!json_decode(L) || !lua_istable(L, -1))
          return sb_raise(L, LASH_SB_ERROR, "bad_reply",
                                    "cannot stat %s: unreadable reply", op->path);
        if (!strcmp(op->what, "read_file")) {
          lua_getfield(L, -1, "type");
          const char *t = lua_tostring(L, -1);
          if (t && !strcmp(t, "directory"))
            return sb_raise(L, LASH_SB_ERROR, "is_dir", "'%s' is a directory", op->path);
          lua_pop(L, 1);
          lua_getfield(L, -1, "size");
          lua_Integer size = (lua_Integer)lua_tonumber(L, -1);
          lua_pop(L, 2);
          if (size <= op->max_bytes) {
            /* sizing after a read came out too big: it shrank meanwhile */
            char b[32];
            lash_format_size((uint64_t)op->max_bytes, b, sizeof b);
            return sb_raise(L, LASH_SB_ERROR, "changed", "'%s' changed size while it "
                            "was read (over the %s read limit, now %lld bytes); read it "
                            "again", op->path, b, (long long)size);
          }
          return lash_sandbox_raise_too_large(L, op->path, size, op->max_bytes,
                                              NULL);
        }
        push_stat(L, -1);
        return 1;
      }
      case F_READ:
        op->step = F_READ_CHECK;
        return fs_begin(L, op, fs_command(L, op, "ReadFile", op->path, NULL), NULL, 0,
                        (size_t)op->max_bytes + 1, file_k);
      case F_READ_CHECK: {
        int r;
        if ((r = fs_done(L, op, "read")) != 0) return r;
        uint64_t total = lash_ring_total(&op->x.out.ring);
        if (total > (uint64_t)op->max_bytes) {
          /* too big: the read stopped early; a stat names the size. (Like
          ** Modal's SDKs, lash reads without a stat first: one command, not
          ** two, for every file that fits.) */
          op->step = F_STAT;
          continue;
        }
        size_t got;
        luaL_Buffer b;
        char *dst = luaL_buffinitsize(L, &b, (size_t)total);
        got = lash_ring_copy(&op->x.out.ring, dst);
        luaL_pushresultsize(&b, got);
        return 1;
      }
      case F_WRITE: {
        size_t n;
        const char *data = lua_tolstring(L, 4, &n);
        op->step = F_WRITE_CHECK;
        return fs_begin(L, op, fs_command(L, op, "WriteFile", op->path, NULL), data, n,
                        64 * 1024, file_k);
      }
      case F_WRITE_CHECK: {
        int r;
        if ((r = fs_done(L, op, "write")) != 0) return r;
        return 0;
      }
      case F_LIST:
        op->step = F_LIST_CHECK;
        return fs_begin(L, op, fs_command(L, op, "ListFiles", op->path, NULL), NULL, 0,
                        64 << 20, file_k);
      case F_LIST_CHECK: {
        int r;
        if ((r = fs_done(L, op, "list")) != 0) return r;
        if (lash_ring_dropped(&op->x.out.ring))
          return lash_sandbox_raise_too_large(L, op->path, -1, 64 << 20,
                                              "its listing is larger than 64 MiB");
        push_ring(L, &op->x.out.ring);
        if (!json_decode(L) || !lua_istable(L, -1))
          return sb_raise(L, LASH_SB_ERROR, "bad_reply",
                                    "cannot list %s: unreadable reply", op->path);
        int arr = lua_gettop(L);
        lua_Integer n = (lua_Integer)lua_rawlen(L, arr);
        lua_createtable(L, (int)n, 0);
        for (lua_Integer i = 1; i <= n; i++) {
          lua_rawgeti(L, arr, i);
          lua_createtable(L, 0, 2);
          lua_getfield(L, -2, "name");
          lua_setfield(L, -2, "name");
          lua_getfield(L, -2, "type");
          lua_pushstring(L, kind_of(lua_tostring(L, -1)));
          lua_setfield(L, -3, "kind");
          lua_pop(L, 1);
          lua_rawseti(L, arr + 1, i);
          lua_pop(L, 1);
        }
        return 1;
      }
      default:
        return luaL_error(L, "modal backend: bad file step %d", op->step);
    }
  }
}

/* Common start of the file slots: 1 cfg, 2 id, 3 path, 4 data or max. */
static int file_start(lua_State *L, const char *what, int first_step,
                      int64_t max_bytes) {
  const char *path = luaL_checkstring(L, 3);
  lua_settop(L, 4);
  mop *op = op_new(L, 1, what);   /* slot 5 for the whole operation */
  op->max_bytes = max_bytes;
  op_sbx(L, op, 2);
  op->after_prep = first_step;
  op->step = PREP_TASK;
  if (path[0] == '/') {
    op->path = abs_path(L, op, path);
    return file_k(L, LUA_OK, (lua_KContext)op);
  }
  op->path = NULL;   /* resolved once the workdir is known */
  if (op->sbx->workdir) op->path = abs_path(L, op, path);
  int r = prep_step(L, op, file_k, op->path == NULL);
  if (r != PREP_CONTINUE) return r;
  if (!op->path) op->path = abs_path(L, op, path);
  return file_k(L, LUA_OK, (lua_KContext)op);
}

static int s_stat(lua_State *L) {
  lua_settop(L, 3);
  return file_start(L, "stat", F_STAT, 0);
}

static int s_read_file(lua_State *L) {
  lua_Integer max = luaL_checkinteger(L, 4);
  if (max < 0) luaL_argerror(L, 4, "max_bytes must be >= 0");
  return file_start(L, "read_file", F_READ, max);
}

static int s_write_file(lua_State *L) {
  luaL_checktype(L, 4, LUA_TSTRING);
  /* WriteFile makes the parent directories itself */
  return file_start(L, "write_file", F_WRITE, 0);
}

static int s_list_dir(lua_State *L) {
  lua_settop(L, 3);
  return file_start(L, "list_dir", F_LIST, 0);
}

/* ---- tags, poll, destroy ---- */

enum { T_READ = 1, T_READ_CHECK, T_WRITE_CHECK, P_CHECK, D_TERM_CHECK, D_WAIT, D_WAIT_CHECK,
       PR_CHECK };

static int simple_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  modal_rpc *r = &op->rpc;
  modal_sbx *s = op->sbx;
  for (;;) {
    switch (op->step) {
      case T_READ_CHECK: {
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        const modal_SandboxTagsGetResponse *t = r->resp;
        lua_createtable(L, 0, (int)t->tags_n);
        for (size_t i = 0; i < t->tags_n; i++) {
          lua_pushlstring(L, t->tags[i].tag_name.p, t->tags[i].tag_name.n);
          lua_pushlstring(L, t->tags[i].tag_value.p, t->tags[i].tag_value.n);
          lua_rawset(L, -3);
        }
        return 1;
      }
      case T_WRITE_CHECK:
        if (r->code == GRPC_INVALID_ARGUMENT)
          return sb_raise(L, LASH_SB_ERROR, "bad_tags", "Modal refused the tags: %s",
                                    r->message);
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        return 0;
      case P_CHECK: {
        if (r->code == GRPC_NOT_FOUND) {
          lua_createtable(L, 0, 2);
          lua_pushboolean(L, 0);
          lua_setfield(L, -2, "running");
          lua_pushliteral(L, "gone");
          lua_setfield(L, -2, "status");
          return 1;
        }
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_SandboxWaitResponse *w = r->resp;
        int done = w->result && w->result->status != MODAL_STATUS_UNSPECIFIED;
        lua_createtable(L, 0, 4);
        lua_pushboolean(L, !done);
        lua_setfield(L, -2, "running");
        lua_pushstring(L, done ? result_status(w->result->status) : "running");
        lua_setfield(L, -2, "status");
        if (done) {
          int st = w->result->status;
          lua_pushinteger(L, st == MODAL_STATUS_TIMEOUT ? 124
                             : st == MODAL_STATUS_TERMINATED ? 137 : w->result->exitcode);
          lua_setfield(L, -2, "exit_code");
        }
        if (s->expires_at) {
          lua_pushinteger(L, (lua_Integer)s->expires_at);
          lua_setfield(L, -2, "expires_at");
        }
        return 1;
      }
      case D_TERM_CHECK:
        if (r->code == GRPC_NOT_FOUND) return 0;   /* already gone: success */
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        op->step = D_WAIT;
        continue;
      case D_WAIT: {
        double left = op->deadline - modal_now();
        if (left <= 0) return 0;   /* bounded: the sandbox's lifetime is the backstop */
        modal_SandboxWaitRequest req = { pb_cstr(s->id), (float)fmin(10.0, left) };
        op->step = D_WAIT_CHECK;
        r->method = SBX_METHOD(s, "SandboxWait");
        r->flags = SBX_FLAGS(s);
        r->resp_desc = &modal_SandboxWaitResponse_desc;
        r->sbx = s;
        r->timeout = fmin(10.0, left) + 5;
        if (modal_rpc_start(r, &modal_SandboxWaitRequest_desc, &req) < 0) return 0;
        r->deadline = 0;
        return op_wait(L, op, simple_k);
      }
      case D_WAIT_CHECK: {
        if (r->code == GRPC_NOT_FOUND) return 0;
        if (r->code == GRPC_OK) {
          const modal_SandboxWaitResponse *w = r->resp;
          if (w->result && w->result->status != MODAL_STATUS_UNSPECIFIED) return 0;
        } else if (!modal_code_transient(r->code)) {
          return op_fail(L, op, 0);
        }
        op->step = D_WAIT;
        continue;
      }
      case PR_CHECK:
        if (r->code == GRPC_OK) {
          lua_pushboolean(L, 1);
          return 1;
        }
        lua_pushboolean(L, 0);
        if (r->code == GRPC_UNAUTHENTICATED || r->code == GRPC_PERMISSION_DENIED)
          lua_pushstring(L, MODAL_AUTH_MESSAGE);
        else
          lua_pushfstring(L, "cannot reach Modal at %s (%s: %s)",
                          modal_client_config(op->cl)->server_url,
                          grpc_code_name(r->code), r->message);
        return 2;
      default:
        return luaL_error(L, "modal backend: bad step %d", op->step);
    }
  }
}

static int s_read_tags(lua_State *L) {
  lua_settop(L, 2);
  mop *op = op_new(L, 1, "read_tags");
  modal_sbx *s = op_sbx(L, op, 2);
  modal_SandboxTagsGetRequest req = { pb_cstr(s->id) };
  op->step = T_READ_CHECK;
  return SBX_CALL(L, op, s, "SandboxTagsGet", &modal_SandboxTagsGetRequest_desc, &req,
                  &modal_SandboxTagsGetResponse_desc, 30, simple_k);
}

static int s_write_tags(lua_State *L) {
  lua_settop(L, 3);
  luaL_checktype(L, 3, LUA_TTABLE);
  mop *op = op_new(L, 1, "write_tags");
  modal_sbx *s = op_sbx(L, op, 2);
  pb_kv *kv;
  size_t n;
  map_to_kv(L, op, 3, &kv, &n);
  modal_SandboxTag *tags = pb_arena_alloc(op->arena, (n ? n : 1) * sizeof *tags);
  if (!tags) luaL_error(L, "modal backend: out of memory");
  for (size_t i = 0; i < n; i++) {
    tags[i].tag_name = kv[i].key;
    tags[i].tag_value = kv[i].value;
  }
  modal_SandboxTagsSetRequest req = { .sandbox_id = pb_cstr(s->id), .tags = tags, .tags_n = n };
  if (!s->v2) req.environment_name = pb_cstr(modal_client_config(op->cl)->environment);
  op->step = T_WRITE_CHECK;
  return SBX_CALL(L, op, s, "SandboxTagsSet", &modal_SandboxTagsSetRequest_desc, &req,
                  &modal_Empty_desc, 30, simple_k);
}

static int s_poll(lua_State *L) {
  lua_settop(L, 2);
  mop *op = op_new(L, 1, "poll");
  modal_sbx *s = op_sbx(L, op, 2);
  modal_SandboxWaitRequest req = { pb_cstr(s->id), 0 };
  op->step = P_CHECK;
  return SBX_CALL(L, op, s, "SandboxWait", &modal_SandboxWaitRequest_desc, &req,
                  &modal_SandboxWaitResponse_desc, 30, simple_k);
}

static int s_destroy(lua_State *L) {
  lua_settop(L, 3);
  double timeout = luaL_optnumber(L, 3, 30);
  mop *op = op_new(L, 1, "destroy");
  modal_sbx *s = op_sbx(L, op, 2);
  op->deadline = modal_now() + (timeout > 0 ? timeout : 0);
  modal_SandboxTerminateRequest req = { pb_cstr(s->id) };
  op->step = D_TERM_CHECK;
  return SBX_CALL(L, op, s, "SandboxTerminate", &modal_SandboxTerminateRequest_desc, &req,
                  &modal_SandboxTerminateResponse_desc, 30, simple_k);
}

static int probe_client(lua_State *L) {
  get_client(L, 1);
  return 0;
}

static int s_probe(lua_State *L) {
  lua_settop(L, 1);
  /* missing credentials are an answer here, not an error */
  lua_pushcfunction(L, probe_client);
  lua_pushvalue(L, 1);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    lua_pushboolean(L, 0);
    if (lua_istable(L, -2)) lua_getfield(L, -2, "message");
    else lua_pushvalue(L, -2);
    return 2;
  }
  mop *op = op_new(L, 1, "probe");
  modal_Empty req = { 0 };
  op->step = PR_CHECK;
  modal_rpc *r = &op->rpc;
  r->method = "ClientHello";
  r->flags = 0;
  r->resp_desc = &modal_ClientHelloResponse_desc;
  r->sbx = NULL;
  r->timeout = 10;
  r->deadline = modal_now() + 20;
  if (modal_rpc_start(r, &modal_Empty_desc, &req) < 0) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, r->message);
    return 2;
  }
  return op_wait(L, op, simple_k);
}

/* ---- snapshot ---- */

#define SNAPSHOT_TTL (30 * 24 * 3600)   /* the SDKs' default image lifetime */

enum { S_V2 = 1, S_CHECK };

static int snap_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  modal_rpc *r = &op->rpc;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    if (op->step >= PREP_TASK) {
      int rc = prep_step(L, op, snap_k, 0);
      if (rc != PREP_CONTINUE) return rc;
      continue;
    }
    switch (op->step) {
      case S_V2: {
        /* V2 (and every current SDK): the router snapshots the task */
        char sid[37];
        modal_uuid4(sid);
        modal_TaskSnapshotFilesystemRequest req = {
          pb_cstr(op->sbx->task_id), pb_cstr(op_strdup(L, op, sid, strlen(sid))), true,
          SNAPSHOT_TTL };
        op->step = S_CHECK;
        return op_call(L, op, "TaskSnapshotFilesystem", MODAL_RPC_ROUTER,
                       &modal_TaskSnapshotFilesystemRequest_desc, &req,
                       &modal_TaskSnapshotFilesystemResponse_desc, 65, snap_k);
      }
      case S_CHECK: {
        if (r->code != GRPC_OK) return op_fail(L, op, 1);
        pb_str id;
        if (op->sbx->v2) {
          id = ((const modal_TaskSnapshotFilesystemResponse *)r->resp)->image_id;
        } else {
          const modal_SandboxSnapshotFsResponse *f = r->resp;
          if (f->result && f->result->status != MODAL_STATUS_SUCCESS)
            return sb_raise(L, LASH_SB_ERROR, "snapshot_failed",
                            "Modal could not snapshot sandbox %s: %.*s", op->sbx->id,
                            (int)f->result->exception.n, f->result->exception.p);
          id = f->image_id;
        }
        if (!id.n)
          return sb_raise(L, LASH_SB_ERROR, "bad_reply",
                          "Modal snapshotted sandbox %s but sent no image id", op->sbx->id);
        lua_pushlstring(L, id.p, id.n);
        return 1;
      }
      default:
        return luaL_error(L, "modal backend: bad snapshot step %d", op->step);
    }
  }
}

static int s_snapshot(lua_State *L) {
  lua_settop(L, 2);
  mop *op = op_new(L, 1, "snapshot");
  modal_sbx *s = op_sbx(L, op, 2);
  if (s->v2) {
    op->after_prep = S_V2;
    op->step = PREP_TASK;
    return snap_k(L, LUA_OK, (lua_KContext)op);
  }
  /* V1: the control plane's SandboxSnapshotFs (V1 only, as the SDKs say) */
  modal_SandboxSnapshotFsRequest req = { pb_cstr(s->id), 55 };
  op->step = S_CHECK;
  return op_call(L, op, "SandboxSnapshotFs", 0, &modal_SandboxSnapshotFsRequest_desc, &req,
                 &modal_SandboxSnapshotFsResponse_desc, 65, snap_k);
}

/* ---- list and gc: the sandboxes lash made (tag lash_made_by) ---- */

#define LIST_MAX_PAGES 1000

enum { L_PAGE = 1, L_PAGE_CHECK, L_TERM, L_TERM_CHECK };

static int list_k(lua_State *L, int status, lua_KContext ctx) {
  /* stack: 1 cfg, 2 op, 3 result list, 4 gc: ids to terminate */
  mop *op = (mop *)ctx;
  modal_rpc *r = &op->rpc;
  const modal_config *cfg = modal_client_config(op->cl);
  int v2 = cfg->sandbox_v2;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    switch (op->step) {
      case L_PAGE: {
        modal_SandboxTag tag = { pb_cstr(MADE_BY_TAG), pb_cstr(MADE_BY_VALUE) };
        modal_SandboxListRequest req = { .before_timestamp = op->before,
                                         .environment_name = pb_cstr(cfg->environment),
                                         .tags = &tag, .tags_n = 1 };
        op->step = L_PAGE_CHECK;
        /* SandboxListV2 lists V1 and V2 sandboxes; SandboxList only V1 */
        return op_call(L, op, v2 ? "SandboxListV2" : "SandboxList", v2 ? MODAL_RPC_V2 : 0,
                       &modal_SandboxListRequest_desc, &req, &modal_SandboxListResponse_desc,
                       30, list_k);
      }
      case L_PAGE_CHECK: {
        if (r->code != GRPC_OK) return op_fail(L, op, 0);
        const modal_SandboxListResponse *resp = r->resp;
        double now = (double)time(NULL);
        for (size_t i = 0; i < resp->sandboxes_n; i++) {
          const modal_SandboxInfo *in = &resp->sandboxes[i];
          lua_Integer expires = 0;
          lua_createtable(L, 0, 4);
          lua_pushlstring(L, in->id.p, in->id.n);
          lua_setfield(L, -2, "id");
          lua_createtable(L, 0, (int)in->tags_n);
          for (size_t j = 0; j < in->tags_n; j++) {
            const modal_SandboxTag *t = &in->tags[j];
            if (t->tag_name.n == strlen(LASH_SB_TAG_EXPIRES_AT) &&
                !memcmp(t->tag_name.p, LASH_SB_TAG_EXPIRES_AT, t->tag_name.n))
              expires = (lua_Integer)strtoll(t->tag_value.p, NULL, 10);
            lua_pushlstring(L, t->tag_name.p, t->tag_name.n);
            lua_pushlstring(L, t->tag_value.p, t->tag_value.n);
            lua_rawset(L, -3);
          }
          lua_setfield(L, -2, "tags");
          int done = in->task_info && in->task_info->result &&
                     in->task_info->result->status != MODAL_STATUS_UNSPECIFIED;
          int expired = expires && expires <= now;
          lua_pushstring(L, done ? result_status(in->task_info->result->status)
                                 : expired ? "expired" : "running");
          lua_setfield(L, -2, "status");
          if (expires) {
            lua_pushinteger(L, expires);
            lua_setfield(L, -2, "expires_at");
          }
          if (op->gc && (expired || done)) {
            lua_getfield(L, -1, "id");
            lua_rawseti(L, 4, (lua_Integer)lua_rawlen(L, 4) + 1);
          }
          lua_rawseti(L, 3, (lua_Integer)lua_rawlen(L, 3) + 1);
        }
        if (resp->sandboxes_n && ++op->pages < LIST_MAX_PAGES) {
          double last = resp->sandboxes[resp->sandboxes_n - 1].created_at;
          if (last > 0 && (op->before == 0 || last < op->before)) {
            op->before = last;
            op->step = L_PAGE;
            continue;
          }
        }
        if (!op->gc) { lua_settop(L, 3); return 1; }
        op->idx = 0;
        op->step = L_TERM;
        continue;
      }
      case L_TERM: {
        /* gc: terminate the expired ones Modal still lists */
        if (op->idx >= (int)lua_rawlen(L, 4)) { lua_settop(L, 4); return 1; }
        lua_rawgeti(L, 4, op->idx + 1);
        op->sbx = modal_client_sbx(op->cl, lua_tostring(L, -1));
        lua_pop(L, 1);   /* the string stays in the table */
        if (!op->sbx) luaL_error(L, "modal backend: out of memory");
        modal_SandboxTerminateRequest req = { pb_cstr(op->sbx->id) };
        op->step = L_TERM_CHECK;
        return SBX_CALL(L, op, op->sbx, "SandboxTerminate", &modal_SandboxTerminateRequest_desc,
                        &req, &modal_SandboxTerminateResponse_desc, 30, list_k);
      }
      case L_TERM_CHECK:
        if (r->code != GRPC_OK && r->code != GRPC_NOT_FOUND) return op_fail(L, op, 0);
        op->idx++;
        op->step = L_TERM;
        continue;
      default:
        return luaL_error(L, "modal backend: bad list step %d", op->step);
    }
  }
}

static int list_start(lua_State *L, int gc) {
  lua_settop(L, 1);
  mop *op = op_new(L, 1, gc ? "gc" : "list");   /* 2 */
  lua_newtable(L);                              /* 3 */
  lua_newtable(L);                              /* 4 */
  op->gc = gc;
  op->step = L_PAGE;
  return list_k(L, LUA_OK, (lua_KContext)op);
}

static int s_list(lua_State *L) { return list_start(L, 0); }
static int s_gc(lua_State *L) { return list_start(L, 1); }

const lash_sandbox_backend lash_sandbox_backend_modal = {
  "modal", create_options, config_options, NULL,
  s_create, s_exec, s_stat, s_read_file, s_write_file, s_list_dir,
  s_read_tags, s_write_tags, s_poll, s_destroy,
  NULL, s_list, s_gc, s_probe, s_snapshot,
  NULL   /* spawn: no streaming exec on Modal yet (sandbox.c says so) */
};
