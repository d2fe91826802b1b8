/*
** laux.h: helpers for C functions that take Lua arguments (prefix lashA_,
** after lauxlib's luaL_): the bindings and the sandbox core's option
** normalisation share them, so they sit in the runtime layer. One owner for
** the checks each binding would otherwise write again.
*/
#ifndef lash_laux_h
#define lash_laux_h

#include "lua.h"

/* Raise unless every key of the options table at idx is a string naming one
** of known[] (NULL-terminated). The error names the caller (who), the bad
** key and every known option: "who: unknown option 'k' (known: a, b, c)".
** A nil or absent table is accepted (no options); any other non-table
** raises an argument error. Returns how many options are set. */
int lashA_checkoptions(lua_State *L, int idx, const char *who,
                       const char *const known[]);

/* The index in known[] of the string key at stack index k, or -1. */
int lashA_optionindex(lua_State *L, int k, const char *const known[]);

#endif
