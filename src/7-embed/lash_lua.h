/*
** lash_lua.h: the part of lash's C API that needs a lua_State, for hosts
** that bring their own Lua 5.4 (built against its lua.h). Every other
** host includes only lash.h, which needs nothing but the C standard
** headers.
** Prefix lash_ (the public API; defined in state.c).
*/
#ifndef lash_lua_h
#define lash_lua_h

#include "lash.h"
#include "lua.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Attach lash to a Lua state the host already has (its standard libraries
** opened): lash's modules become loadable there (`require "lash"`) and the
** whole API works on it. The host's allocator rules, so memory_limit and
** alloc must be unset; lua_dir, state_root and log apply. One attachment
** per Lua state at a time; errors as for lash_open. lash_close then
** cancels the runs started through this API and detaches, leaving L open:
** lash's loop lives on in L (for the host's own Lua use of lash) until the
** host closes L. The collector: in a state of lash_open's, the first
** budgeted lash_step sets a small step size (2^9 bytes) so garbage
** collection splits finely; an attached state keeps the host's setting,
** and lash_step assumes Lua's default (2^13).
** lash's library carries its own Lua 5.4 (hidden), whose functions then
** work on L: the host's Lua must be the same release (lash_errmsg says
** which when it is not). lash_attach is a macro that passes the release
** of the lua.h the host was compiled with, as zlib's inflateInit does. */
LASH_API lash_State *lash_attach_release(lua_State *L, const lash_Options *opts,
                                         int lua_release);
#define lash_attach(L, opts) lash_attach_release((L), (opts), LUA_VERSION_RELEASE_NUM)

/* The state's Lua state, for hosts that want to push their own values. */
LASH_API lua_State *lash_lua(lash_State *S);

#ifdef __cplusplus
}
#endif

#endif
