/*
** userdir.h: where lash keeps a user's files, the one resolver every part
** of lash asks (the config file, the sessions database, the chat history,
** MCP tokens, local sandboxes): the XDG base directory rules; and making
** such a directory. Pure C, no allocation.
*/
#ifndef lash_userdir_h
#define lash_userdir_h

#include <stddef.h>

enum { LASH_USER_CONFIG, LASH_USER_STATE };

/* The environment to read: getenv(ud, name) gives a variable's value or
** NULL. NULL for the function means the process's own (getenv(3)). */
typedef const char *(*lash_getenv_fn)(void *ud, const char *name);

/* lash's own directory of kind, written to out: $XDG_CONFIG_HOME/lash or
** $XDG_STATE_HOME/lash when that variable holds an absolute path (the XDG
** rules ignore a relative one), else $HOME/.config/lash or
** $HOME/.local/state/lash. *from (may be NULL) names what chose it: the
** XDG variable or "HOME". Returns 0; -ENOENT when neither is usable (no
** absolute HOME); -ENAMETOOLONG when out is too small. */
int lash_user_dir(int kind, lash_getenv_fn getenv_fn, void *ud, char *out,
                  size_t outsz, const char **from);

/* mkdir -p: path and its missing parents, made with mode. 0, or -errno
** (-ENOTDIR when path exists and is not a directory). */
int lash_mkdirs(const char *path, unsigned mode);

#endif
