/*
** fuzz_json.c: libFuzzer target for lash's JSON decoder (src/2-runtime/json.c).
** Checks, for every input the decoder accepts:
**   - the canonical text c1 of the value decodes again; its canonical
**     text c2 is a fixed point (c2 decodes to a value whose canonical text
**     is c2: after one round, because floats are written with 14
**     significant digits and 1.0e3-style whole numbers come back integers);
**   - the hash-order text of the value decodes to the same c2;
** and that a refused input fails with an "invalid JSON at character N"
** message whose N lies within the input (+1 for the end). Values JSON
** cannot write back (a number that overflowed to infinity) are the only
** allowed encoding failure.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static int decode(lua_State *L) {
  size_t n;
  const char *s = lua_tolstring(L, 1, &n);
  lash_json_decode(L, s, n);
  return 1;
}

static int encode(lua_State *L) {
  lash_json_encode(L, 1, (int)lua_tointeger(L, 2));
  return 1;
}

/* pcall f(arg[, mode]); 1 with the result on top, 0 with the message */
static int call(lua_State *L, lua_CFunction f, int arg, int mode) {
  lua_pushcfunction(L, f);
  lua_pushvalue(L, arg);
  lua_pushinteger(L, mode);
  return lua_pcall(L, 2, 1, 0) == LUA_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static lua_State *L;
  size_t n1, n2;
  const char *c1, *c2;
  if (!L) L = luaL_newstate();
  lua_settop(L, 0);
  lua_pushlstring(L, (const char *)data, size);              /* 1 */
  if (!call(L, decode, 1, 0)) {
    const char *msg = lua_tostring(L, -1);
    unsigned long at;
    CHECK(msg && sscanf(msg, "invalid JSON at character %lu:", &at) == 1);
    CHECK(at >= 1 && at <= size + 1);
    return 0;
  }
  if (!call(L, encode, 2, LASH_JSON_CANONICAL)) {            /* 3 */
    const char *msg = lua_tostring(L, -1);
    CHECK(msg && strstr(msg, "NaN or infinity") != NULL);
    return 0;
  }
  CHECK(call(L, decode, 3, 0));                               /* 4 */
  CHECK(call(L, encode, 4, LASH_JSON_CANONICAL));             /* 5: c2 */
  c1 = lua_tolstring(L, 5, &n1);
  CHECK(call(L, decode, 5, 0));                               /* 6 */
  CHECK(call(L, encode, 6, LASH_JSON_CANONICAL));             /* 7 */
  c2 = lua_tolstring(L, 7, &n2);
  CHECK(n1 == n2 && memcmp(c1, c2, n1) == 0);
  CHECK(call(L, encode, 2, LASH_JSON_HASH_ORDER));            /* 8 */
  CHECK(call(L, decode, 8, 0));                               /* 9 */
  CHECK(call(L, encode, 9, LASH_JSON_CANONICAL));             /* 10 */
  c2 = lua_tolstring(L, 10, &n2);
  CHECK(n1 == n2 && memcmp(c1, c2, n1) == 0);
  lua_settop(L, 0);
  return 0;
}
