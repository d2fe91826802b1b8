/*
** sandbox_claim.c: owner and holder marks on a sandbox's tags (prefix
** lash_sandbox_claim_): write_tags keeping the reserved lash_ tags, attach
** (refuse a missing or different owner or another holder, write the
** holder mark, read it back) and release (clear only our own mark), one
** implementation for every backend, atomic where the backend has
** cas_tags. Each step calls the backend with lua_callk, so it may wait.
*/
#include "sandbox.h"
#include "sandbox_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Copy the table at idx into a new table (pushed). */
static void copy_table(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_newtable(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, -4);
  }
}

static const char *tag(lua_State *L, int tags, const char *key) {
  const char *v = NULL;
  if (lua_istable(L, tags) && lua_getfield(L, tags, key) == LUA_TSTRING)
    v = lua_tostring(L, -1);   /* anchored in tags */
  if (lua_istable(L, tags)) lua_pop(L, 1);
  return v && *v ? v : NULL;
}

/* Begin cas_tags(cfg, id, {lash_holder = expect or false}, <new tags at
** idx>): the replacement happens only while the holder mark is as read. */
static void push_cas(lua_State *L, const char *expect, int idx) {
  lash_sandbox_push_call(L, "cas_tags");
  lua_createtable(L, 0, 1);
  if (expect) lua_pushstring(L, expect);
  else lua_pushboolean(L, 0);
  lua_setfield(L, -2, LASH_SB_TAG_HOLDER);
  lua_pushvalue(L, idx);
}

/* Begin write_tags(cfg, id, <new tags at idx>). */
static void push_write(lua_State *L, int idx) {
  lash_sandbox_push_call(L, "write_tags");
  lua_pushvalue(L, idx);
}

/* write_tags: 1 self, 2 user tags (checked copy), then per attempt:
** 3 current, 4 new, [5 ok, 6 cur]. ctx: attempt*4 + step. */
static int wtags_k(lua_State *L, int status, lua_KContext ctx) {
  int attempt = (int)(ctx / 4), step = (int)(ctx % 4);
  (void)status;
  for (;;) {
    if (step == 0) {
      lua_settop(L, 2);
      lash_sandbox_push_call(L, "read_tags");
      lua_callk(L, 2, 1, attempt * 4 + 1, wtags_k);
      step = 1;
    }
    if (step == 1) {
      const char *holder;
      lua_settop(L, 3);
      if (!lua_istable(L, 3)) luaL_error(L, "read_tags returned no table");
      copy_table(L, 2);                                  /* 4 new */
      lua_pushnil(L);
      while (lua_next(L, 3)) {
        if (lua_type(L, -2) == LUA_TSTRING &&
            strncmp(lua_tostring(L, -2), LASH_SB_TAG_PREFIX,
                    sizeof LASH_SB_TAG_PREFIX - 1) == 0) {
          lua_pushvalue(L, -2);
          lua_insert(L, -2);
          lua_rawset(L, 4);
        } else {
          lua_pop(L, 1);
        }
      }
      if (lash_sandbox_has_slot(L, 1, "cas_tags")) {
        holder = tag(L, 3, LASH_SB_TAG_HOLDER);
        push_cas(L, holder, 4);
        lua_callk(L, 4, 2, attempt * 4 + 2, wtags_k);
        step = 2;
      } else {
        push_write(L, 4);
        lua_callk(L, 3, 0, attempt * 4 + 3, wtags_k);
        step = 3;
      }
    }
    if (step == 2) {
      if (lua_toboolean(L, 5)) step = 3;
      else if (++attempt >= 10)
        return lash_sandbox_raise(L, LASH_SB_ERROR, "conflict",
                                  "the tags kept changing under this write; "
                                  "try again");
      else {
        step = 0;
        continue;
      }
    }
    lua_settop(L, 1);
    lua_pushboolean(L, 1);
    return 1;
  }
}

int lash_sandbox_claim_write_tags(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_claim_need_tags(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  lash_sandbox_opt_string_map(L, 2, "tags", 0, 1);
  lua_replace(L, 2);
  return wtags_k(L, LUA_OK, 0);
}

/* The attach result from the tags at idx (read before the claim). */
static void push_attached(lua_State *L, int tags, int atomic) {
  const char *exp = tag(L, tags, LASH_SB_TAG_EXPIRES_AT);
  lua_createtable(L, 0, 8);
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "owner");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "holder");
  if (exp) {
    char *end;
    double e = strtod(exp, &end);
    if (end != exp && *end == '\0' && isfinite(e)) {
      double left = e - lash_wall_now();
      lua_pushnumber(L, left > 0 ? left : 0);
      lua_setfield(L, -2, "remaining_lifetime");
      lua_pushinteger(L, (lua_Integer)floor(e));
      lua_setfield(L, -2, "expires_at");
    }
  }
  lua_getfield(L, tags, LASH_SB_TAG_NETWORK);
  if (!lua_isnil(L, -1)) {
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "network_stamp");
  }
  lash_sandbox_network_decode(L, -1);
  lua_setfield(L, -3, "network");
  lua_pop(L, 1);
  if (tag(L, tags, LASH_SB_TAG_WORKDIR)) {
    lua_getfield(L, tags, LASH_SB_TAG_WORKDIR);
    lua_setfield(L, -2, "workdir");
  }
  lua_pushboolean(L, atomic);
  lua_setfield(L, -2, "atomic");
  copy_table(L, tags);
  lua_setfield(L, -2, "tags");
}

static int raise_claimed(lua_State *L, const char *other) {
  lash_sandbox_field(L, 1, "id");
  return lash_sandbox_raise(
      L, LASH_SB_REFUSED, "claimed",
      "Sandbox '%s' was claimed by '%s' while '%s' was attaching to it. Two "
      "runs asked for the same sandbox at once; provision one per run, or "
      "run them in sequence.", lua_tostring(L, -1),
      other ? other : "(nobody: the mark vanished)", lua_tostring(L, 3));
}

/* attach: 1 self, 2 owner, 3 holder, 4 tags read, 5 new tags, 6.. results.
** ctx = step. */
static int attach_k(lua_State *L, int status, lua_KContext ctx) {
  int step = (int)ctx;
  (void)status;
  if (step == 1) {
    const char *owner, *held, *id;
    lua_settop(L, 4);
    if (!lua_istable(L, 4)) luaL_error(L, "read_tags returned no table");
    lash_sandbox_field(L, 1, "id");
    id = lua_tostring(L, -1);
    owner = tag(L, 4, LASH_SB_TAG_OWNER);
    if (!owner)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "no_owner",
          "Sandbox '%s' is not owned by '%s': it carries no owner. Only a "
          "sandbox created with an owner can be attached to; create it with "
          "one (lash sandbox create --owner '%s'), or let this run provision "
          "its own.", id, lua_tostring(L, 2), lua_tostring(L, 2));
    if (strcmp(owner, lua_tostring(L, 2)) != 0)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "wrong_owner",
          "Sandbox '%s' is not owned by '%s': it carries owner '%s'. Attach "
          "with the owner the provisioning step stamped, or check that the "
          "handle is the one meant for this run.", id, lua_tostring(L, 2),
          owner);
    held = tag(L, 4, LASH_SB_TAG_HOLDER);
    if (held && strcmp(held, lua_tostring(L, 3)) != 0)
      return lash_sandbox_raise(
          L, LASH_SB_REFUSED, "held",
          "Sandbox '%s' is already held by '%s', and one run uses a sandbox "
          "at a time. Provision a sandbox per run that needs its own "
          "workspace, or run the steps in sequence.", id, held);
    lua_settop(L, 4);
    if (held) {   /* our own mark (a retry of this holder): nothing to write */
      push_attached(L, 4, lash_sandbox_has_slot(L, 1, "cas_tags"));
      return 1;
    }
    copy_table(L, 4);                                        /* 5 */
    lua_pushvalue(L, 3);
    lua_setfield(L, 5, LASH_SB_TAG_HOLDER);
    if (lash_sandbox_has_slot(L, 1, "cas_tags")) {
      push_cas(L, NULL, 5);
      lua_callk(L, 4, 2, 2, attach_k);
      step = 2;
    } else {
      push_write(L, 5);
      lua_callk(L, 3, 0, 3, attach_k);
      step = 3;
    }
  }
  if (step == 2) {   /* 6 ok, 7 current tags */
    if (!lua_toboolean(L, 6))
      return raise_claimed(L, tag(L, 7, LASH_SB_TAG_HOLDER));
    lua_settop(L, 4);
    push_attached(L, 4, 1);
    return 1;
  }
  if (step == 3) {
    lua_settop(L, 5);
    lash_sandbox_push_call(L, "read_tags");
    lua_callk(L, 2, 1, 4, attach_k);
    step = 4;
  }
  /* step 4: 6 tags read back */
  {
    const char *back = tag(L, 6, LASH_SB_TAG_HOLDER);
    if (!back || strcmp(back, lua_tostring(L, 3)) != 0)
      return raise_claimed(L, back);
  }
  lua_settop(L, 4);
  push_attached(L, 4, 0);
  return 1;
}

int lash_sandbox_claim_attach(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_identity(L, 2, "owner");
  lash_sandbox_opt_identity(L, 3, "holder");
  lash_sandbox_claim_need_tags(L);
  lua_settop(L, 3);
  lash_sandbox_push_call(L, "read_tags");
  lua_callk(L, 2, 1, 1, attach_k);
  return attach_k(L, LUA_OK, 1);
}

/* release: 1 self, 2 holder, 3 tags, 4 new, 5 ok */
static int release_k(lua_State *L, int status, lua_KContext ctx) {
  int step = (int)ctx;
  (void)status;
  if (step == 1) {
    const char *held;
    lua_settop(L, 3);
    held = tag(L, 3, LASH_SB_TAG_HOLDER);
    if (!held || strcmp(held, lua_tostring(L, 2)) != 0) {
      lua_pushboolean(L, 0);   /* not ours: never cleared */
      return 1;
    }
    copy_table(L, 3);
    lua_pushnil(L);
    lua_setfield(L, 4, LASH_SB_TAG_HOLDER);
    if (lash_sandbox_has_slot(L, 1, "cas_tags")) {
      push_cas(L, lua_tostring(L, 2), 4);
      lua_callk(L, 4, 1, 2, release_k);
      return release_k(L, LUA_OK, 2);
    }
    push_write(L, 4);
    lua_callk(L, 3, 0, 3, release_k);
    step = 3;
  }
  if (step == 2) {
    lua_pushboolean(L, lua_toboolean(L, 5));
    return 1;
  }
  lua_settop(L, 4);
  lua_pushboolean(L, 1);
  return 1;
}

int lash_sandbox_claim_release(lua_State *L) {
  lash_sandbox_checkopen(L, 1);
  lash_sandbox_opt_identity(L, 2, "holder");
  lash_sandbox_claim_need_tags(L);
  lua_settop(L, 2);
  lash_sandbox_push_call(L, "read_tags");
  lua_callk(L, 2, 1, 1, release_k);
  return release_k(L, LUA_OK, 1);
}

void lash_sandbox_claim_need_tags(lua_State *L) {
  lash_sandbox_need_slot(L, "read_tags", "hold tags");
}
