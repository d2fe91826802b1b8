/*
** json.h: lash's JSON codec over Lua values (json.c). It keeps `[]` and
** `{}` apart (arrays decode with the "lash.json.array" metatable, and a
** table with it encodes as an array even when empty), spells null as a
** NULL light userdata (lua-cjson's spelling), and writes canonical text
** (object keys sorted bytewise) that stays byte-identical across processes.
** Prefix lash_json_; the Lua face is ljson.c.
*/
#ifndef lash_json_h
#define lash_json_h

#include <stddef.h>

#include "lua.h"

#define LASH_JSON_ARRAY_MT "lash.json.array"
#define LASH_JSON_MAX_DEPTH 200

enum { LASH_JSON_HASH_ORDER = 0, LASH_JSON_CANONICAL = 1 };

/* Encode the value at idx; pushes the text. mode: LASH_JSON_CANONICAL
** (sorted keys, reuses the text of frozen tables) or LASH_JSON_HASH_ORDER.
** Raises a plain error naming what cannot be encoded. */
void lash_json_encode(lua_State *L, int idx, int mode);

/* Decode text; pushes the value. Raises "invalid JSON at character N:
** what" on malformed text. */
void lash_json_decode(lua_State *L, const char *s, size_t len);

/* Mark the table at idx frozen: canonical encoding encodes it once and
** reuses that text while the table lives. The caller promises that
** neither it nor anything it holds changes afterwards. */
void lash_json_freeze(lua_State *L, int idx);
/* Promise that the list at idx only grows at its end and that its elements
** never change, but for the last one, which may be replaced: canonical
** encoding keeps the text of the elements before the last and encodes only
** the ones after them (always as an array, even when empty). A list that
** shrinks is encoded whole again. */
void lash_json_grow_only(lua_State *L, int idx);

/* The same, protected: push the text (encode) or the value (decode) and
** return LUA_OK, or push the error message and return its status
** (LUA_ERRMEM for a memory error). For C that must not raise midway (a
** sandbox writing its metadata, a backend reading a reply). */
int lash_json_pencode(lua_State *L, int idx, int mode);
int lash_json_pdecode(lua_State *L, const char *s, size_t len);

/* Push the array metatable (made once per state). */
void lash_json_push_array_mt(lua_State *L);

#endif
