/*
** yaml_loader.h: the YAML loader (yaml_loader.c, prefix lash_yaml_): one
** document of untrusted text to a Lua value, under bounds on depth and
** node count.
*/
#ifndef lash_yaml_loader_h
#define lash_yaml_loader_h

#include "lua.h"

#define LASH_YAML_MAX_DEPTH 100        /* defaults of lash.core.yaml.decode */
#define LASH_YAML_MAX_NODES 1000000

/* Make the parser's metatable (once per state; lyaml.c's luaopen). */
void lash_yaml_open(lua_State *L);

/* Decode the string at text_idx; null is the value at null_idx. Pushes
** the value and returns 1, or pushes nil and a message with the line and
** column and returns 2. A memory error is raised as one. */
int lash_yaml_decode(lua_State *L, int text_idx, int null_idx, int max_depth,
                     long long max_nodes);

#endif
