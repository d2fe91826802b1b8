/*
** sandbox_path.h: lexical paths of the sandbox core (sandbox_path.c), for
** the generic layer and every backend. No Lua.
*/
#ifndef lash_sandbox_path_h
#define lash_sandbox_path_h

#include <stddef.h>

#define LASH_SB_PATH_MAX 4096

/* Lexical normalization of an absolute path: "//" and "." dropped, ".."
** pops (and stays at "/" at the top), no trailing slash ("/" alone for the
** root). Returns 0, or -EINVAL (not absolute, or a NUL/empty input) or
** -ENAMETOOLONG. */
int lash_sandbox_path_normalize(const char *in, char *out, size_t outsz);
/* Normalize rel against the absolute base (rel may itself be absolute). */
int lash_sandbox_path_join(const char *base, const char *rel, char *out,
                           size_t outsz);

#endif
