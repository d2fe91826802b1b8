/*
** sandbox_modal.c: the "modal" sandbox backend, its slots of sandbox.h
** (the command engine under them is sandbox_modal_cmd.c).
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
#include "sandbox_modal_int.h"
#include "outq.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* app_name and create_app_if_missing are the sandbox capability's names. */
static const char *const create_options[] = {
  "image", "app_name", "create_app_if_missing", "cpu", "memory", "gpu", "idle_timeout",
  "publish", NULL
};

static const char *const config_options[] = {
  "server_url", "environment", "profile", "config_path", "ca_file", "sandbox_v2", NULL
};

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
  return msb_sb_raise(L, LASH_SB_ERROR, "image_failed",
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
        return msb_op_call(L, op, "AppGetOrCreate", 0, &modal_AppGetOrCreateRequest_desc, &req,
                       &modal_AppGetOrCreateResponse_desc, 30, create_k);
      }
      case C_APP_CHECK: {
        if (r->code == GRPC_NOT_FOUND)
          return msb_sb_raise(L, LASH_SB_ERROR, "app_not_found", "Modal app '%s' does not exist%s%s; "
                          "create it (create_app_if_missing = true) or name an existing app",
                          op->app_name, *cfg->environment ? " in environment " : "",
                          cfg->environment);
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        const modal_AppGetOrCreateResponse *a = r->resp;
        op->app_id = msb_op_strdup(L, op, a->app_id.p, a->app_id.n);
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
        return msb_op_call(L, op, "EnvironmentGetOrCreate", 0,
                       &modal_EnvironmentGetOrCreateRequest_desc, &req,
                       &modal_EnvironmentGetOrCreateResponse_desc, 30, create_k);
      }
      case C_ENV_CHECK: {
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        const modal_EnvironmentGetOrCreateResponse *e = r->resp;
        if (e->metadata && e->metadata->settings && e->metadata->settings->image_builder_version.n) {
          const pb_str *v = &e->metadata->settings->image_builder_version;
          op->ibv = msb_op_strdup(L, op, v->p, v->n);
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
        return msb_op_call(L, op, "ImageGetOrCreate", 0, &modal_ImageGetOrCreateRequest_desc,
                       &req, &modal_ImageGetOrCreateResponse_desc, 60, create_k);
      }
      case C_IMAGE_CHECK: {
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        const modal_ImageGetOrCreateResponse *i = r->resp;
        op->image_id = msb_op_strdup(L, op, i->image_id.p, i->image_id.n);
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
        op->stream = modal_rpc_stream_start(op->cl, "ImageJoinStreaming", 0, NULL,
                                        &modal_ImageJoinStreamingRequest_desc, &req, 65,
                                        join_on_msg, join_on_done, op, err, sizeof err);
        if (!op->stream)
          return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                                    "cannot follow the image build: %s", err);
        op->step = C_JOIN_CHECK;
        return msb_op_wait(L, op, create_k);
      }
      case C_JOIN_CHECK:
        if (op->image_done) {
          image_result(L, op, op->image_status, op->image_exc);
          op->step = C_SECRET;
          continue;
        }
        if (r->code != GRPC_OK && !modal_rpc_transient(r->code)) {
          r->method = "ImageJoinStreaming";
          return msb_op_fail(L, op, 0);
        }
        if (r->code != GRPC_OK && ++op->stream_retries > STREAM_RETRIES)
          return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "unreachable",
                                    "lost the image build stream %d times (%s: %s)",
                                    STREAM_RETRIES, grpc_code_name(r->code), r->message);
        if (modal_now() - op->t_start > IMAGE_BUILD_WAIT)
          return msb_sb_raise(L, LASH_SB_ERROR, "image_failed",
                                    "image %s did not finish building within %.0f s",
                                    op->image_tag, IMAGE_BUILD_WAIT);
        /* the stream ended without a result (or dropped): resume after the
        ** last entry seen */
        op->step = C_JOIN;
        if (r->code != GRPC_OK) return msb_op_sleep(L, op, 0.1 * op->stream_retries, create_k);
        continue;
      case C_SECRET: {
        /* V1 carries env in an ephemeral secret; V2 inline */
        if (ca->nenv == 0 || op->count) { op->step = C_CREATE; continue; }
        modal_SecretGetOrCreateRequest req = {
          .environment_name = pb_cstr(cfg->environment),
          .object_creation_type = MODAL_OBJECT_CREATION_EPHEMERAL,
          .env_dict = ca->env, .env_dict_n = ca->nenv };
        op->step = C_SECRET_CHECK;
        return msb_op_call(L, op, "SecretGetOrCreate", 0, &modal_SecretGetOrCreateRequest_desc,
                       &req, &modal_SecretGetOrCreateResponse_desc, 30, create_k);
      }
      case C_SECRET_CHECK: {
        if (r->code == GRPC_INVALID_ARGUMENT || r->code == GRPC_FAILED_PRECONDITION)
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_env", "Modal refused the sandbox "
                                    "env: %s", r->message);
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        const modal_SecretGetOrCreateResponse *s = r->resp;
        op->secret_id = msb_op_strdup(L, op, s->secret_id.p, s->secret_id.n);
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
          return msb_op_call(L, op, "SandboxCreateV2", MODAL_RPC_V2,
                         &modal_SandboxCreateV2Request_desc, &req,
                         &modal_SandboxCreateV2Response_desc, 120, create_k);
        }
        modal_SandboxCreateRequest req = { .app_id = pb_cstr(op->app_id),
                                           .definition = &ca->def, .tags = ca->tags,
                                           .tags_n = ca->ntags };
        return msb_op_call(L, op, "SandboxCreate", 0, &modal_SandboxCreateRequest_desc, &req,
                       &modal_SandboxCreateResponse_desc, 120, create_k);
      }
      case C_CREATE_CHECK: {
        if (r->code == GRPC_INVALID_ARGUMENT || r->code == GRPC_FAILED_PRECONDITION ||
            r->code == GRPC_RESOURCE_EXHAUSTED || r->code == GRPC_ALREADY_EXISTS) {
          char lc[32];
          msb_lower_code(r->code, lc, sizeof lc);
          return msb_sb_raise(L, LASH_SB_ERROR, lc, "Modal refused to create the "
                                    "sandbox: %s", r->message);
        }
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        pb_str id;
        const modal_SandboxCreateV2Response *v2 = op->count ? r->resp : NULL;
        if (v2) id = v2->sandbox_id;
        else id = ((const modal_SandboxCreateResponse *)r->resp)->sandbox_id;
        if (!id.n)
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_reply",
                                    "Modal created a sandbox but sent no id");
        char *sid = msb_op_strdup(L, op, id.p, id.n);
        modal_sbx *s = modal_client_sbx(op->cl, sid);
        if (s) {
          if (v2 && v2->task_id.n) msb_set_str_field(&s->task_id, v2->task_id);
          if (v2 && v2->command_router_access && v2->command_router_access->jwt.n) {
            msb_set_str_field(&s->router_jwt, v2->command_router_access->jwt);
            msb_set_str_field(&s->router_url, v2->command_router_access->url);
          }
          msb_set_str_field(&s->workdir, ca->def.has_workdir ? ca->def.workdir : pb_cstr("/"));
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
  mop *op = msb_op_new(L, 1, "create");
  const modal_config *cfg = modal_client_config(op->cl);
  create_args *ca = pb_arena_alloc(op->arena, sizeof *ca);
  if (!ca) luaL_error(L, "modal backend: out of memory");
  op->args = ca;
  op->count = cfg->sandbox_v2 ? 1 : 0;   /* 1: V2 */

  lua_Integer timeout = 300;
  if (lua_getfield(L, 2, "timeout") == LUA_TNUMBER) timeout = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (timeout < 1 || timeout > MAX_LIFETIME)
    return msb_sb_raise(L, LASH_SB_ERROR, "bad_timeout", "Modal sandboxes live at most "
                              "%d seconds (24 hours); timeout %lld is out of range",
                              MAX_LIFETIME, (long long)timeout);
  ca->def.timeout_secs = (uint32_t)timeout;
  if (lua_getfield(L, 2, "idle_timeout") == LUA_TNUMBER) {
    lua_Integer it = lua_tointeger(L, -1);
    if (it < 1 || it > MAX_LIFETIME)
      return msb_sb_raise(L, LASH_SB_ERROR, "bad_timeout", "idle_timeout must be "
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
  msb_publish_parse(L, op, 2, &ca->ports);   /* sandbox_modal_ports.c */
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
    char *t = msb_op_strdup(L, op, g, tl);
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
    return msb_sb_raise(L, LASH_SB_ERROR, "too_long", "the command line is %zu bytes; "
                              "Modal takes at most 65536 (write long inputs to a file or "
                              "pass them on stdin)", total);
  /* the core checked and defaulted both (sandbox.h) */
  lua_getfield(L, 4, "timeout");
  lua_getfield(L, 4, "max_output_bytes");
  lua_Integer timeout = lash_sandbox_deadline(lua_tointeger(L, -2), 0, MAX_LIFETIME);
  lua_Integer maxout = lua_tointeger(L, -1);
  lua_pop(L, 2);
  const char *cwd = NULL;
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) cwd = msb_abs_path(L, op, lua_tostring(L, -1));
  lua_pop(L, 1);
  pb_kv *env = NULL;
  size_t nenv = 0;
  if (lua_getfield(L, 4, "env") == LUA_TTABLE) map_to_kv(L, op, lua_gettop(L), &env, &nenv);
  lua_pop(L, 1);
  const char *in = NULL;
  size_t inlen = 0;
  if (lua_getfield(L, 4, "stdin") == LUA_TSTRING) in = lua_tolstring(L, -1, &inlen);
  lua_pop(L, 1);   /* the string stays alive in opts */
  if (lua_getfield(L, 4, "on_output") != LUA_TNIL) op->outq = lash_outq_test(L, -1);
  lua_pop(L, 1);   /* the queue stays alive in opts */
  op->count = (int)timeout;
  op->step = E_CHECK;
  return msb_exec_begin(L, op, argv, argc, env, nenv, cwd, in, inlen, (size_t)maxout,
                    (size_t)maxout, (uint32_t)timeout, 0, 0, 0, exec_k);
}

static int exec_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    if (op->step >= PREP_TASK) {
      int r = msb_prep_step(L, op, exec_k, 0);
      if (r != PREP_CONTINUE) return r;
      continue;
    }
    switch (op->step) {
      case E_RUN:
        return exec_run(L, op);
      case E_CHECK: {
        mexec *x = &op->x;
        op->step = E_DONE;
        if (x->fatal_code) return msb_exec_check(L, op, exec_k);
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
  mop *op = msb_op_new(L, 1, "exec");
  op_sbx(L, op, 2);
  int need_wd = 0;
  if (lua_getfield(L, 4, "cwd") == LUA_TSTRING) need_wd = lua_tostring(L, -1)[0] != '/';
  lua_pop(L, 1);
  op->after_prep = E_RUN;
  op->step = PREP_TASK;
  if (need_wd && !op->sbx->workdir) {
    int r = msb_prep_step(L, op, exec_k, 1);
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
  lua_pushstring(L, msb_kind_of(lua_tostring(L, -1)));
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
  if (x->fatal_code) return msb_exec_check(L, op, file_k);
  if (x->timed_out_local)
    return msb_sb_raise(L, LASH_SB_ERROR, "timeout", "cannot %s %s: no answer "
                              "within %d s", action, op->path, FS_TIMEOUT);
  if (!x->has_code || x->code != 0) return msb_fs_raise(L, op, action);
  return 0;
}

static int file_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  (void)status;
  lash_wait_check(L, &op->w);
  for (;;) {
    if (op->step >= PREP_TASK) {
      int r = msb_prep_step(L, op, file_k, 0);
      if (r != PREP_CONTINUE) return r;
      if (!op->path) {
        /* the path needed the workdir; resolve it now (arg 3) */
        op->path = msb_abs_path(L, op, lua_tostring(L, 3));
      }
      continue;
    }
    switch (op->step) {
      case F_STAT:
        op->step = F_STAT_CHECK;
        return msb_fs_begin(L, op, msb_fs_command(L, op, "Stat", op->path), NULL, 0,
                        1 << 20, file_k);
      case F_STAT_CHECK: {
        int r;
        if ((r = fs_done(L, op, strcmp(op->what, "read_file") ? "stat" : "read")) != 0)
          return r;
        msb_push_ring(L, &op->x.out.ring);
        if (!msb_json_decode(L) || !lua_istable(L, -1))
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_reply",
                                    "cannot stat %s: unreadable reply", op->path);
        if (!strcmp(op->what, "read_file")) {
          lua_getfield(L, -1, "type");
          const char *t = lua_tostring(L, -1);
          if (t && !strcmp(t, "directory"))
            return lash_sandbox_raise_path(L, LASH_SB_PATH_IS_DIR, op->path);
          lua_pop(L, 1);
          lua_getfield(L, -1, "size");
          lua_Integer size = (lua_Integer)lua_tonumber(L, -1);
          lua_pop(L, 2);
          if (size <= op->max_bytes) {
            /* sizing after a read came out too big: it shrank meanwhile */
            char b[32];
            lash_format_size((uint64_t)op->max_bytes, b, sizeof b);
            return msb_sb_raise(L, LASH_SB_ERROR, "changed", "'%s' changed size while it "
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
        return msb_fs_begin(L, op, msb_fs_command(L, op, "ReadFile", op->path), NULL, 0,
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
        return msb_fs_begin(L, op, msb_fs_command(L, op, "WriteFile", op->path), data, n,
                        64 * 1024, file_k);
      }
      case F_WRITE_CHECK: {
        int r;
        if ((r = fs_done(L, op, "write")) != 0) return r;
        return 0;
      }
      case F_LIST:
        op->step = F_LIST_CHECK;
        return msb_fs_begin(L, op, msb_fs_command(L, op, "ListFiles", op->path), NULL, 0,
                        64 << 20, file_k);
      case F_LIST_CHECK: {
        int r;
        if ((r = fs_done(L, op, "list")) != 0) return r;
        if (lash_ring_dropped(&op->x.out.ring))
          return lash_sandbox_raise_too_large(L, op->path, -1, 64 << 20,
                                              "its listing is larger than 64 MiB");
        msb_push_ring(L, &op->x.out.ring);
        if (!msb_json_decode(L) || !lua_istable(L, -1))
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_reply",
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
          lua_pushstring(L, msb_kind_of(lua_tostring(L, -1)));
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
  mop *op = msb_op_new(L, 1, what);   /* slot 5 for the whole operation */
  op->max_bytes = max_bytes;
  op_sbx(L, op, 2);
  op->after_prep = first_step;
  op->step = PREP_TASK;
  if (path[0] == '/') {
    op->path = msb_abs_path(L, op, path);
    return file_k(L, LUA_OK, (lua_KContext)op);
  }
  op->path = NULL;   /* resolved once the workdir is known */
  if (op->sbx->workdir) op->path = msb_abs_path(L, op, path);
  int r = msb_prep_step(L, op, file_k, op->path == NULL);
  if (r != PREP_CONTINUE) return r;
  if (!op->path) op->path = msb_abs_path(L, op, path);
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
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
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
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_tags", "Modal refused the tags: %s",
                                    r->message);
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
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
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
        const modal_SandboxWaitResponse *w = r->resp;
        int done = w->result && w->result->status != MODAL_STATUS_UNSPECIFIED;
        lua_createtable(L, 0, 4);
        lua_pushboolean(L, !done);
        lua_setfield(L, -2, "running");
        lua_pushstring(L, done ? msb_result_status(w->result->status) : "running");
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
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
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
        return msb_op_wait(L, op, simple_k);
      }
      case D_WAIT_CHECK: {
        if (r->code == GRPC_NOT_FOUND) return 0;
        if (r->code == GRPC_OK) {
          const modal_SandboxWaitResponse *w = r->resp;
          if (w->result && w->result->status != MODAL_STATUS_UNSPECIFIED) return 0;
        } else if (!modal_rpc_transient(r->code)) {
          return msb_op_fail(L, op, 0);
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
  mop *op = msb_op_new(L, 1, "read_tags");
  modal_sbx *s = op_sbx(L, op, 2);
  modal_SandboxTagsGetRequest req = { pb_cstr(s->id) };
  op->step = T_READ_CHECK;
  return SBX_CALL(L, op, s, "SandboxTagsGet", &modal_SandboxTagsGetRequest_desc, &req,
                  &modal_SandboxTagsGetResponse_desc, 30, simple_k);
}

static int s_write_tags(lua_State *L) {
  lua_settop(L, 3);
  luaL_checktype(L, 3, LUA_TTABLE);
  mop *op = msb_op_new(L, 1, "write_tags");
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
  mop *op = msb_op_new(L, 1, "poll");
  modal_sbx *s = op_sbx(L, op, 2);
  modal_SandboxWaitRequest req = { pb_cstr(s->id), 0 };
  op->step = P_CHECK;
  return SBX_CALL(L, op, s, "SandboxWait", &modal_SandboxWaitRequest_desc, &req,
                  &modal_SandboxWaitResponse_desc, 30, simple_k);
}

static int s_destroy(lua_State *L) {
  lua_settop(L, 3);
  double timeout = luaL_optnumber(L, 3, 30);
  mop *op = msb_op_new(L, 1, "destroy");
  modal_sbx *s = op_sbx(L, op, 2);
  op->deadline = modal_now() + (timeout > 0 ? timeout : 0);
  modal_SandboxTerminateRequest req = { pb_cstr(s->id) };
  op->step = D_TERM_CHECK;
  return SBX_CALL(L, op, s, "SandboxTerminate", &modal_SandboxTerminateRequest_desc, &req,
                  &modal_SandboxTerminateResponse_desc, 30, simple_k);
}

static int probe_client(lua_State *L) {
  msb_get_client(L, 1);
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
  mop *op = msb_op_new(L, 1, "probe");
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
  return msb_op_wait(L, op, simple_k);
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
      int rc = msb_prep_step(L, op, snap_k, 0);
      if (rc != PREP_CONTINUE) return rc;
      continue;
    }
    switch (op->step) {
      case S_V2: {
        /* V2 (and every current SDK): the router snapshots the task */
        char sid[37];
        modal_rpc_uuid4(sid);
        modal_TaskSnapshotFilesystemRequest req = {
          pb_cstr(op->sbx->task_id), pb_cstr(msb_op_strdup(L, op, sid, strlen(sid))), true,
          SNAPSHOT_TTL };
        op->step = S_CHECK;
        return msb_op_call(L, op, "TaskSnapshotFilesystem", MODAL_RPC_ROUTER,
                       &modal_TaskSnapshotFilesystemRequest_desc, &req,
                       &modal_TaskSnapshotFilesystemResponse_desc, 65, snap_k);
      }
      case S_CHECK: {
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
        pb_str id;
        if (op->sbx->v2) {
          id = ((const modal_TaskSnapshotFilesystemResponse *)r->resp)->image_id;
        } else {
          const modal_SandboxSnapshotFsResponse *f = r->resp;
          if (f->result && f->result->status != MODAL_STATUS_SUCCESS)
            return msb_sb_raise(L, LASH_SB_ERROR, "snapshot_failed",
                            "Modal could not snapshot sandbox %s: %.*s", op->sbx->id,
                            (int)f->result->exception.n, f->result->exception.p);
          id = f->image_id;
        }
        if (!id.n)
          return msb_sb_raise(L, LASH_SB_ERROR, "bad_reply",
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
  mop *op = msb_op_new(L, 1, "snapshot");
  modal_sbx *s = op_sbx(L, op, 2);
  if (s->v2) {
    op->after_prep = S_V2;
    op->step = PREP_TASK;
    return snap_k(L, LUA_OK, (lua_KContext)op);
  }
  /* V1: the control plane's SandboxSnapshotFs (V1 only, as the SDKs say) */
  modal_SandboxSnapshotFsRequest req = { pb_cstr(s->id), 55 };
  op->step = S_CHECK;
  return msb_op_call(L, op, "SandboxSnapshotFs", 0, &modal_SandboxSnapshotFsRequest_desc, &req,
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
        return msb_op_call(L, op, v2 ? "SandboxListV2" : "SandboxList", v2 ? MODAL_RPC_V2 : 0,
                       &modal_SandboxListRequest_desc, &req, &modal_SandboxListResponse_desc,
                       30, list_k);
      }
      case L_PAGE_CHECK: {
        if (r->code != GRPC_OK) return msb_op_fail(L, op, 0);
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
          lua_pushstring(L, done ? msb_result_status(in->task_info->result->status)
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
        if (r->code != GRPC_OK && r->code != GRPC_NOT_FOUND) return msb_op_fail(L, op, 0);
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
  mop *op = msb_op_new(L, 1, gc ? "gc" : "list");   /* 2 */
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
  NULL,  /* spawn: no streaming exec on Modal yet (sandbox.c says so) */
  NULL,  /* persist: Modal keeps its sandboxes' records itself */
  NULL,  /* connect: Modal reaches ports through tunnels made at create (tunnels) */
  NULL,  /* drop_snapshot: a snapshot is an image, which Modal's API has no call to delete */
  msb_tunnels
};

