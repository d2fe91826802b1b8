/*
** lsse.h: the Lua binding of the SSE parser (lsse.c; prefix lash_sse_parser_),
** for the binding that exposes it (lhttp.c puts it into lash.http). The
** parser itself (sse.h) knows nothing of Lua.
*/
#ifndef lash_lsse_h
#define lash_lsse_h

#include "lua.h"

/* `sse_parser([opts]) -> parser`: a new "lash.sse_parser" userdata. */
int lash_sse_parser_new(lua_State *L);

#endif
