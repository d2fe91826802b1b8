/*
** userdir.c: lash's per-user directories by the XDG base directory rules
** (userdir.h).
*/
#include "userdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *process_env(void *ud, const char *name) {
  (void)ud;
  return getenv(name);
}

int lash_user_dir(int kind, lash_getenv_fn getenv_fn, void *ud, char *out,
                  size_t outsz, const char **from) {
  const char *xdg_var = kind == LASH_USER_CONFIG ? "XDG_CONFIG_HOME" : "XDG_STATE_HOME";
  const char *under_home = kind == LASH_USER_CONFIG ? ".config" : ".local/state";
  const char *base, *why = xdg_var;
  int n;
  if (!getenv_fn) getenv_fn = process_env;
  base = getenv_fn(ud, xdg_var);
  if (base && base[0] == '/') {
    n = snprintf(out, outsz, "%s/lash", base);
  } else {
    base = getenv_fn(ud, "HOME");
    if (!base || base[0] != '/') return -ENOENT;
    why = "HOME";
    n = snprintf(out, outsz, "%s/%s/lash", base, under_home);
  }
  if (n < 0 || (size_t)n >= outsz) return -ENAMETOOLONG;
  if (from) *from = why;
  return 0;
}

int lash_mkdirs(const char *path, unsigned mode) {
  char buf[4096];
  size_t i, n = strlen(path);
  struct stat st;
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (i = 1; i <= n; i++) {
    char c = buf[i];
    if (c != '/' && c != '\0') continue;
    buf[i] = '\0';
    if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) return -errno;
    buf[i] = c;
  }
  if (stat(path, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}
