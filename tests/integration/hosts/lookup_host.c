/*
** lookup_host.c: a C host of liblash.so for test_module_lookup.sh. Opens a
** state (lua_dir from argv[1] when given and not "-") and runs argv[2] as
** Lua with lash_dostring; prints what the chunk returns, or the error.
*/
#include "lash.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  lash_Options o;
  lash_State *S;
  int st;
  if (argc < 3) return 2;
  lash_options_init(&o);
  if (strcmp(argv[1], "-") != 0) o.lua_dir = argv[1];
  S = lash_open(&o);
  if (!S) return 1;
  st = lash_dostring(S, argv[2], "=lookup");
  if (st != LASH_OK) printf("error: %s\n", lash_errmsg(S));
  lash_close(S);
  return st == LASH_OK ? 0 : 1;
}
