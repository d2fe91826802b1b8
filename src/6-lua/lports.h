/*
** lports.h: the connection handle of lash.core.ports (lports.c), for the
** bindings that make connections to relay (the sandbox's connect).
*/
#ifndef lash_lports_h
#define lash_lports_h

#include "lua.h"

/* Push a handle owning fd (closed by its close, __gc or __close). */
void lash_ports_push_fd(lua_State *L, int fd);

#endif
