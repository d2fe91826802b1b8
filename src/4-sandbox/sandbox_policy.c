/*
** sandbox_policy.c: the network policy of a sandbox (prefix
** lash_sandbox_network_): "off", "on" or a policy table normalized into
** {block_network, allow_egress_to, allow_egress_to_cidrs}, and its
** lash_network stamp (lash's canonical JSON, so every process writes the
** same bytes) read back into a policy. One owner for every backend; the
** backends enforce it.
*/
#include "sandbox.h"
#include "sandbox_core.h"
#include "json.h"
#include "laux.h"

#include <string.h>

/* Normalize the network option at idx (nil, "off", "on", or a table) into
** {block_network =, allow_egress_to =, allow_egress_to_cidrs =} (pushed). */
void lash_sandbox_network_normalize(lua_State *L, int idx) {
  int block = 1;
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  lua_newtable(L);
  lua_setfield(L, -2, "allow_egress_to");
  lua_newtable(L);
  lua_setfield(L, -2, "allow_egress_to_cidrs");
  if (lua_isnil(L, idx)) {
    block = 1;
  } else if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "off") == 0 || strcmp(s, "none") == 0) block = 1;
    else if (strcmp(s, "on") == 0 || strcmp(s, "full") == 0) block = 0;
    else luaL_error(L, "network must be \"off\", \"on\" or a policy table, "
                    "got \"%s\"", s);
  } else if (lua_istable(L, idx)) {
    static const char *const known[] = {"block_network", "allow_egress_to",
                                        "allow_egress_to_cidrs", NULL};
    int lists = 0;
    const char *fields[2] = {"allow_egress_to", "allow_egress_to_cidrs"};
    int f;
    lashA_checkoptions(L, idx, "network policy", known);
    if (lua_getfield(L, idx, "block_network") != LUA_TNIL) {
      if (!lua_isboolean(L, -1))
        luaL_error(L, "network.block_network must be a boolean");
      block = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    for (f = 0; f < 2; f++) {
      lua_Integer i, n;
      if (lua_getfield(L, idx, fields[f]) == LUA_TNIL) {
        lua_pop(L, 1);
        continue;
      }
      if (!lua_istable(L, -1))
        luaL_error(L, "network.%s must be a list of strings", fields[f]);
      n = (lua_Integer)lua_rawlen(L, -1);
      lua_getfield(L, -2, fields[f]);          /* the normalized list */
      for (i = 1; i <= n; i++) {
        lua_rawgeti(L, -2, i);
        if (lua_type(L, -1) != LUA_TSTRING)
          luaL_error(L, "network.%s[%I] must be a string", fields[f], i);
        lua_rawseti(L, -2, i);
        lists++;
      }
      lua_pop(L, 2);
    }
    if (lists && !block)
      luaL_error(L, "an egress allow-list only means something with "
                 "block_network = true (everything else blocked); set "
                 "block_network = true or drop the lists");
  } else {
    luaL_error(L, "network must be \"off\", \"on\" or a policy table, got %s",
               luaL_typename(L, idx));
  }
  lua_pushboolean(L, block);
  lua_setfield(L, -2, "block_network");
}

/* The lash_network stamp of the normalized policy at idx: lash's canonical
** JSON (compact, sorted keys), e.g. {"allow_egress_to":[],
** "allow_egress_to_cidrs":[],"block_network":true}. Pushed. */
void lash_sandbox_network_encode(lua_State *L, int idx) {
  const char *fields[2] = {"allow_egress_to", "allow_egress_to_cidrs"};
  int f;
  idx = lua_absindex(L, idx);
  lua_createtable(L, 0, 3);
  for (f = 0; f < 2; f++) {
    lua_Integer i, n;
    lua_getfield(L, idx, fields[f]);
    n = (lua_Integer)lua_rawlen(L, -1);
    lua_createtable(L, (int)n, 0);     /* marked an array: [] when empty */
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, -2, i);
      lua_rawseti(L, -2, i);
    }
    lash_json_push_array_mt(L);
    lua_setmetatable(L, -2);
    lua_setfield(L, -3, fields[f]);
    lua_pop(L, 1);
  }
  lua_getfield(L, idx, "block_network");
  lua_pushboolean(L, lua_toboolean(L, -1));
  lua_setfield(L, -3, "block_network");
  lua_pop(L, 1);
  lash_json_encode(L, -1, LASH_JSON_CANONICAL);
  lua_remove(L, -2);
}

/* Decode a lash_network stamp at idx: pushes the policy table, or nil when
** it is not exactly the three-key shape. */
void lash_sandbox_network_decode(lua_State *L, int idx) {
  int top = lua_gettop(L), ok = 0;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TSTRING) {
    lua_pushnil(L);
    return;
  }
  {
    size_t len;
    const char *text = lua_tolstring(L, idx, &len);
    if (!lash_sandbox_json_decode(L, text, len)) lua_settop(L, top);
  }
  if (lua_gettop(L) == top + 1 && lua_istable(L, -1)) {
    int t = lua_gettop(L), n = 0, good = 1;
    lua_pushnil(L);
    while (lua_next(L, t)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
      n++;
      if (strcmp(k, "block_network") == 0) good &= lua_isboolean(L, -1);
      else if (strcmp(k, "allow_egress_to") == 0 ||
               strcmp(k, "allow_egress_to_cidrs") == 0) {
        if (lua_istable(L, -1)) {
          lua_Integer i, len = (lua_Integer)lua_rawlen(L, -1);
          for (i = 1; i <= len; i++) {
            lua_rawgeti(L, -1, i);
            good &= lua_type(L, -1) == LUA_TSTRING;
            lua_pop(L, 1);
          }
        } else {
          good = 0;
        }
      } else {
        good = 0;
      }
      lua_pop(L, 1);
    }
    ok = good && n == 3;
    if (ok) {
      lash_sandbox_network_normalize(L, t);
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return;
    }
  }
  lua_settop(L, top);
  lua_pushnil(L);
}
