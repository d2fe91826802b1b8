/*
** sandbox_modal_cmd.c: the Modal backend's command engine (prefix msb_,
** declared in sandbox_modal_int.h): the client of a configuration (cached
** per state), operations and their waits (a unary RPC that modal_rpc.c
** retries, a sleep), the mapping of failures to sandbox.h's kinds (a
** failure that could be a gone sandbox is classified by polling it once),
** the router preparation (task id, access), and whole commands:
** TaskExecStart, stdout and stderr read by offset (a dropped stream
** resumes exactly), stdin, and TaskExecWait, all concurrent on the router
** connection and driven by loop callbacks; the fs-tools commands that the
** file slots run go through it too.
*/
#include "sandbox_modal_int.h"
#include "outq.h"
#include "json.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* lash_sandbox_raise with printf formatting (lua_pushfstring knows no
** precision or size modifiers). */
int msb_sb_raise(lua_State *L, const char *kind, const char *code,
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
modal_client *msb_get_client(lua_State *L, int cfg) {
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
    msb_sb_raise(L, LASH_SB_AUTH, "no_credentials", "%s", err);
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
mop *msb_op_new(lua_State *L, int cfg, const char *what) {
  modal_client *cl = msb_get_client(L, cfg);
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

char *msb_op_strdup(lua_State *L, mop *op, const char *s, size_t n) {
  char *d = pb_arena_strdup(op->arena, s, n);
  if (!d) luaL_error(L, "modal backend: out of memory");
  return d;
}

int msb_op_wait(lua_State *L, mop *op, lua_KFunction k) {
  lash_wait_init(&op->w, op_cancel);
  return lash_wait_yield(L, &op->w, (lua_KContext)op, k);
}

static void on_sleep(lash_loop *loop, lash_timer *t) {
  (void)loop;
  lash_wait_done(&((mop *)t->data)->w);
}

int msb_op_sleep(lua_State *L, mop *op, double secs, lua_KFunction k) {
  lash_timer_start(modal_client_loop(op->cl), &op->timer, (uint64_t)(secs * 1e9),
                   on_sleep, op);
  return msb_op_wait(L, op, k);
}

int msb_op_call(lua_State *L, mop *op, const char *method, unsigned flags,
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
    return msb_sb_raise(L, LASH_SB_ERROR, "bad_request", "Modal %s: %s", method,
                              r->message);
  return msb_op_wait(L, op, k);
}

/* Sandbox RPCs come in pairs, NAME and NAMEV2 (the latter needing the V2
** router flag); the sandbox's own v2 bit picks which one to send. */

/* ---- errors ----------------------------------------------------------------------- */

void msb_lower_code(int code, char *out, size_t n) {
  const char *s = code < 0 ? "local_failure" : grpc_code_name(code);
  size_t i;
  for (i = 0; s[i] && i + 1 < n; i++) out[i] = (char)tolower((unsigned char)s[i]);
  out[i] = 0;
}

static int raise_auth(lua_State *L, int code, const char *msg) {
  if (code == GRPC_PERMISSION_DENIED)
    return msb_sb_raise(L, LASH_SB_AUTH, "permission_denied",
                              "Modal refused the request (%s). %s", msg, MODAL_AUTH_MESSAGE);
  return msb_sb_raise(L, LASH_SB_AUTH, "unauthenticated", "%s", MODAL_AUTH_MESSAGE);
}

static int raise_tls(lua_State *L, mop *op, const char *msg) {
  const modal_config *cfg = modal_client_config(op->cl);
  return msb_sb_raise(L, LASH_SB_CONFIG, "tls_verify",
                  "cannot verify the TLS certificate of Modal at %s (%s). This is a "
                  "configuration problem, not an outage: point ca_file at "
                  "the CA that signed the server's certificate, or fix server_url",
                  op->rpc.sbx && op->rpc.flags & MODAL_RPC_ROUTER ? "its command router"
                                                                   : cfg->server_url, msg);
}

static int raise_gone(lua_State *L, mop *op, const char *detail) {
  return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "not_found",
                            "Modal sandbox %s is gone (terminated, expired or never "
                            "existed): %s", op->sbx ? op->sbx->id : "?", detail);
}

static int classify_k(lua_State *L, int status, lua_KContext ctx);

/* The RPC in op->rpc failed: raise the right kind of error. `targeted`:
** the call was about op->sbx, so NOT_FOUND means the sandbox is gone and
** an ambiguous failure is classified by polling the sandbox once. */
int msb_op_fail(lua_State *L, mop *op, int targeted) {
  modal_rpc *r = &op->rpc;
  int code = r->code;
  char lc[32];
  if (code == GRPC_UNAUTHENTICATED || code == GRPC_PERMISSION_DENIED)
    return raise_auth(L, code, r->message);
  if (code == GRPC_LOCAL_TLS) return raise_tls(L, op, r->message);
  if (code == GRPC_NOT_FOUND && targeted) return raise_gone(L, op, r->message);
  msb_lower_code(code, lc, sizeof lc);
  if (code >= 0 && modal_rpc_transient(code)) {
    if (!targeted || !op->sbx)
      return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
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
  return msb_sb_raise(L, LASH_SB_ERROR, lc, "Modal %s failed for %s: %s: %s",
                            r->method, op->what, grpc_code_name(code), r->message);
}

const char *msb_result_status(int status) {
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
      return msb_sb_raise(L, LASH_SB_UNAVAILABLE, msb_result_status(w->result->status),
                                "Modal sandbox %s has %s (%.*s); %s", op->sbx->id,
                                w->result->status == MODAL_STATUS_TIMEOUT
                                  ? "reached the end of its lifetime" : "finished",
                                (int)w->result->exception.n, w->result->exception.p,
                                op->saved);
    if (op->saved_code == GRPC_FAILED_PRECONDITION)
      return msb_sb_raise(L, LASH_SB_ERROR, "start_failed", "%s", op->saved);
    return msb_sb_raise(L, LASH_SB_ERROR, "transient",
                              "%s; the sandbox is still running, so this may work "
                              "if tried again", op->saved);
  }
  if (r->code == GRPC_NOT_FOUND) return raise_gone(L, op, op->saved);
  if (r->code == GRPC_UNAUTHENTICATED || r->code == GRPC_PERMISSION_DENIED)
    return raise_auth(L, r->code, r->message);
  return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                            "%s, and polling the sandbox failed too (%s: %s)",
                            op->saved, grpc_code_name(r->code), r->message);
}

/* ---- the sandbox's router: task id and access ---------------------------- */

void msb_set_str_field(char **dst, pb_str v) {
  char *s = strndup(v.p ? v.p : "", v.n);
  if (!s) return;
  free(*dst);
  *dst = s;
}

/* Steps that make op->sbx ready for router calls (task id, router access)
** and, when op needs it, its workdir. Returns PREP_CONTINUE when ready (op->
** step is then op->after_prep), else the yield of the next wait. */
int msb_prep_step(lua_State *L, mop *op, lua_KFunction k, int need_workdir) {
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
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
        const modal_SandboxGetTaskIdResponse *t = r->resp;
        if (t->has_task_id && t->task_id.n) {
          msb_set_str_field(&s->task_id, t->task_id);
          op->step = PREP_ACCESS;
          continue;
        }
        if (t->task_result)
          return msb_sb_raise(L, LASH_SB_UNAVAILABLE,
                                    msb_result_status(t->task_result->status),
                                    "Modal sandbox %s has already finished: %.*s", s->id,
                                    (int)t->task_result->exception.n,
                                    t->task_result->exception.p);
        if (modal_now() - op->t_start > TASK_ID_WAIT)
          return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "not_scheduled",
                                    "Modal sandbox %s was not scheduled within %.0f s",
                                    s->id, TASK_ID_WAIT);
        op->step = PREP_TASK;
        return msb_op_sleep(L, op, TASK_ID_POLL, k);
      }
      case PREP_ACCESS:
        if (s->router_url && s->router_jwt) { op->step = op->after_prep; return PREP_CONTINUE; }
        op->step = PREP_ACCESS_CHECK;
        if (s->v2) {
          modal_SandboxGetCommandRouterAccessRequest req = {
            .has_sandbox_id = true, .sandbox_id = pb_cstr(s->id) };
          return msb_op_call(L, op, "SandboxGetCommandRouterAccess", MODAL_RPC_V2,
                         &modal_SandboxGetCommandRouterAccessRequest_desc, &req,
                         &modal_SandboxGetCommandRouterAccessResponse_desc, 30, k);
        } else {
          modal_TaskGetCommandRouterAccessRequest req = { pb_cstr(s->task_id) };
          return msb_op_call(L, op, "TaskGetCommandRouterAccess", 0,
                         &modal_TaskGetCommandRouterAccessRequest_desc, &req,
                         &modal_TaskGetCommandRouterAccessResponse_desc, 30, k);
        }
      case PREP_ACCESS_CHECK: {
        modal_rpc *r = &op->rpc;
        if (r->code == GRPC_FAILED_PRECONDITION || r->code == GRPC_NOT_FOUND)
          return raise_gone(L, op, r->message);
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
        const modal_TaskGetCommandRouterAccessResponse *a = r->resp;  /* {jwt, url} */
        if (!a->jwt.n || !a->url.n)
          return msb_sb_raise(L, LASH_SB_ERROR, "no_router",
                                    "Modal gave no command router access for %s", s->id);
        msb_set_str_field(&s->router_jwt, a->jwt);
        msb_set_str_field(&s->router_url, a->url);
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
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
        const modal_SandboxTagsGetResponse *t = r->resp;
        pb_str wd = pb_cstr("/");
        for (size_t i = 0; i < t->tags_n; i++)
          if (t->tags[i].tag_name.n == strlen(LASH_SB_TAG_WORKDIR) &&
              !memcmp(t->tags[i].tag_name.p, LASH_SB_TAG_WORKDIR, t->tags[i].tag_name.n) &&
              t->tags[i].tag_value.n && t->tags[i].tag_value.p[0] == '/')
            wd = t->tags[i].tag_value;
        msb_set_str_field(&s->workdir, wd);
        need_workdir = 0;
        op->step = PREP_TASK;
        continue;
      }
      default:
        return luaL_error(L, "modal backend: bad step %d", op->step);
    }
  }
}

/* Set up r as one call on the sandbox's router connection. */
static void router_rpc(modal_rpc *r, const char *method, unsigned flags,
                       const pb_msgdesc *resp, modal_sbx *sbx, double timeout,
                       void (*done)(modal_rpc *), void *ud) {
  r->method = method;
  r->flags = MODAL_RPC_ROUTER | flags;
  r->resp_desc = resp;
  r->sbx = sbx;
  r->timeout = timeout;
  r->done = done;
  r->ud = ud;
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
      /* a command's output streams as it comes (on_output); a file
      ** tool's is the backend's own */
      if (s->op->outq && !s->op->x.fs)
        lash_outq_push(s->op->outq, s->fd ? 2 : 1, (const char *)p, (size_t)len);
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
    router_rpc(&s->refresh, "TaskExecPoll", 0, &modal_TaskExecPollResponse_desc,
               op->sbx, 30, stream_refreshed, s);
    if (modal_rpc_start(&s->refresh, &modal_TaskExecPollRequest_desc, &req) == 0) return;
  }
  if (modal_rpc_transient(st->code) && s->retries < STREAM_RETRIES) {
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
  s->call = modal_rpc_stream_start(op->cl, "TaskExecStdioRead", MODAL_RPC_ROUTER, op->sbx,
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
  router_rpc(&x->in, "TaskExecStdinWrite", 0, &modal_TaskExecStdinWriteResponse_desc,
             op->sbx, 60, stdin_written, op);
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
  router_rpc(&x->wait, "TaskExecWait", MODAL_RPC_LONGPOLL, &modal_TaskExecWaitResponse_desc,
             op->sbx, 60, waited, op);
  x->wait.deadline = x->t0 + x->timeout + EXEC_GRACE;
  if (modal_rpc_start(&x->wait, &modal_TaskExecWaitRequest_desc, &req) < 0)
    exec_fatal(op, "wait", -1, x->wait.message);
}

/* Start a command in op->sbx (router ready); the op then waits once for all
** of it. argv/env point at memory alive until exec_started runs. */
int msb_exec_begin(lua_State *L, mop *op, pb_str *argv, size_t argc,
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
  modal_rpc_uuid4(x->exec_id);
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
    return msb_sb_raise(L, LASH_SB_ERROR, "bad_command", "cannot send the command: %s",
                              x->start.message);
  return msb_op_wait(L, op, k);
}

/* After the exec's wait: raise a fatal failure (classifying ambiguous
** ones by a poll, through op->rpc), or return 0. */
int msb_exec_check(lua_State *L, mop *op, lua_KFunction k) {
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
    return msb_sb_raise(L, LASH_SB_ERROR, "start_failed",
                              "the command did not start: %s", x->fatal_msg);
  if (x->fatal_code == GRPC_FAILED_PRECONDITION && !strcmp(x->fatal_where, "start")) {
    /* could be a bad command or a finished sandbox: poll to tell */
    op->saved_code = x->fatal_code;
    snprintf(op->saved, sizeof op->saved, "the command did not start (%s)", x->fatal_msg);
    modal_SandboxWaitRequest req = { pb_cstr(op->sbx->id), 0 };
    return SBX_CALL(L, op, op->sbx, "SandboxWait", &modal_SandboxWaitRequest_desc,
                    &req, &modal_SandboxWaitResponse_desc, 10, classify_k);
  }
  return msb_op_fail(L, op, 1);
}

/* Push the ring's bytes as a Lua string. */
void msb_push_ring(lua_State *L, lash_ring *r) {
  size_t n;
  const char *p = lash_ring_view(r, &n);
  lua_pushlstring(L, p ? p : "", n);
}

/* ---- paths and JSON ------------------------------------------------------------- */

/* Resolve path against the sandbox workdir and normalize "." and "..". */
const char *msb_abs_path(lua_State *L, mop *op, const char *path) {
  const char *base = op->sbx->workdir ? op->sbx->workdir : "/";
  size_t n = strlen(path) + strlen(base) + 3;
  char *out = pb_arena_alloc(op->arena, n);
  if (!out) luaL_error(L, "modal backend: out of memory");
  if (lash_sandbox_path_join(base, path, out, n) != 0)
    luaL_error(L, "path '%s' is too long to resolve against the workdir %s; use "
               "a shorter path", path, base);
  return out;
}

/* The fs-tools argument for op on path, e.g. {"Stat":{"path":"/x"}}, in
** lash's JSON (json.h); kept in the arena. */
const char *msb_fs_command(lua_State *L, mop *op, const char *cmd, const char *path) {
  size_t n;
  const char *s, *d;
  lua_createtable(L, 0, 1);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, path);
  lua_setfield(L, -2, "path");
  lua_setfield(L, -2, cmd);
  lash_json_encode(L, -1, LASH_JSON_CANONICAL);
  s = lua_tolstring(L, -1, &n);
  d = msb_op_strdup(L, op, s, n);
  lua_pop(L, 2);
  return d;
}

int msb_fs_begin(lua_State *L, mop *op, const char *json, const char *stdin_data,
                    size_t stdin_len, size_t max_out, lua_KFunction k) {
  int no_stdout = stdin_data != NULL;   /* WriteFile prints nothing */
  pb_str *argv = pb_arena_alloc(op->arena, 2 * sizeof *argv);
  if (!argv) luaL_error(L, "modal backend: out of memory");
  argv[0] = pb_cstr(FS_TOOLS);
  argv[1] = pb_cstr(json);
  return msb_exec_begin(L, op, argv, 2, NULL, 0, NULL, stdin_data, stdin_len, max_out,
                    64 * 1024, FS_TIMEOUT, 1, no_stdout, max_out, k);
}

/* Decode JSON text at the top of the stack with cjson: replaces it with the
** value, or returns 0 (popping it) when it does not parse. */
int msb_json_decode(lua_State *L) {
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
int msb_fs_raise(lua_State *L, mop *op, const char *action) {
  mexec *x = &op->x;
  int exit_code = x->has_code ? x->code : 128 + x->sig;
  msb_push_ring(L, &x->err.ring);
  const char *kind = NULL, *msg = NULL;
  if (msb_json_decode(L) && lua_istable(L, -1)) {
    lua_getfield(L, -1, "error_kind");
    lua_getfield(L, -2, "message");
    kind = lua_tostring(L, -2);
    msg = lua_tostring(L, -1);
  }
  if (!kind || !msg) {
    msb_push_ring(L, &x->err.ring);
    return msb_sb_raise(L, LASH_SB_ERROR, "fs_error",
                    "'%s': cannot %s it (modal-sandbox-fs-tools exited %d: %s)", op->path,
                    action, exit_code, lua_tostring(L, -1));
  }
  /* the core's codes and wording, so tools read the same on every backend */
  if (!strcmp(kind, "NotFound"))
    return lash_sandbox_raise_path(L, LASH_SB_PATH_NOT_FOUND, op->path);
  if (!strcmp(kind, "IsDirectory"))
    return lash_sandbox_raise_path(L, LASH_SB_PATH_IS_DIR, op->path);
  if (!strcmp(kind, "NotDirectory") || !strcmp(kind, "IsFile"))
    return lash_sandbox_raise_path(L, LASH_SB_PATH_NOT_DIR, op->path);
  if (!strcmp(kind, "PermissionDenied"))
    return msb_sb_raise(L, LASH_SB_ERROR, "denied", "'%s': Permission denied (%s)", op->path, msg);
  if (!strcmp(kind, "AlreadyExists") || !strcmp(kind, "PathAlreadyExists"))
    return lash_sandbox_raise_path(L, LASH_SB_PATH_PARENT_NOT_DIR, op->path);
  if (!strcmp(kind, "FileTooLarge"))
    return lash_sandbox_raise_too_large(L, op->path, -1, -1, msg);
  return msb_sb_raise(L, LASH_SB_ERROR, "fs_error", "'%s': cannot %s it: %s", op->path, action, msg);
}

const char *msb_kind_of(const char *t) {
  if (!t) return "other";
  if (!strcmp(t, "file")) return "file";
  if (!strcmp(t, "directory")) return "dir";
  if (!strcmp(t, "symlink")) return "symlink";
  return "other";
}

