/*
** lmodules.h: lash's own Lua modules, compiled into the library (the table
** tools/lua2c generates at build time) and the searcher that finds them.
*/
#ifndef lash_lmodules_h
#define lash_lmodules_h

#include <stddef.h>

typedef struct lash_lua_module {
  const char *name;             /* "lash.agent"; NULL ends the table */
  const char *chunkname;        /* "@lash/agent.lua" */
  const unsigned char *code;    /* Lua bytecode (debug information kept) */
  size_t size;
} lash_lua_module;

/* The generated table; absent (NULL) in lash/core.so, the module a stock
** lua5.4 loads, whose Lua sources are installed as files. */
extern const lash_lua_module lash_lua_modules[];

#ifdef lua_h
/* Put lash's searcher in L's package.searchers, right after the preload
** searcher: `lash` and `lash.*` come from dir (when not NULL: a developer's
** tree; a module missing there falls through) and then from the modules
** compiled in, before package.path is looked at. Where lash's Lua is the
** one linked into the library itself (liblash.so, liblash.a), the C
** module searchers of a state it opened are replaced by one that says why
** none can load (an attached state is the host's: left alone). Expects
** package at the top of the stack. */
void lash_modules_install(lua_State *L, const char *dir, int attached);
#endif

#endif
