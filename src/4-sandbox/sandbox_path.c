/*
** sandbox_path.c: the sandbox core's paths (prefix lash_sandbox_path_):
** lexical normalization and joining of the absolute paths a sandbox sees,
** the same for every backend, so the generic layer checks a workdir and a
** backend resolves a relative path with one rule. No Lua, no file system.
*/
#include "sandbox_path.h"

#include <errno.h>
#include <string.h>

int lash_sandbox_path_normalize(const char *in, char *out, size_t outsz) {
  size_t o = 1;
  const char *p = in;
  if (!in || in[0] != '/' || outsz < 2) return -EINVAL;
  out[0] = '/';
  while (*p) {
    const char *s;
    size_t n;
    while (*p == '/') p++;
    if (!*p) break;
    s = p;
    while (*p && *p != '/') p++;
    n = (size_t)(p - s);
    if (n == 1 && s[0] == '.') continue;
    if (n == 2 && s[0] == '.' && s[1] == '.') {
      /* pop the last component; at the top ".." stays at "/" */
      while (o > 1 && out[o - 1] != '/') o--;
      if (o > 1) o--;
      continue;
    }
    if (o > 1) {
      if (o + 1 >= outsz) return -ENAMETOOLONG;
      out[o++] = '/';
    }
    if (o + n >= outsz) return -ENAMETOOLONG;
    memcpy(out + o, s, n);
    o += n;
  }
  out[o] = '\0';
  return 0;
}

int lash_sandbox_path_join(const char *base, const char *rel, char *out,
                           size_t outsz) {
  char tmp[2 * LASH_SB_PATH_MAX + 2];
  if (!rel || !*rel) return -EINVAL;
  if (rel[0] == '/') return lash_sandbox_path_normalize(rel, out, outsz);
  if (!base || base[0] != '/') return -EINVAL;
  {
    size_t bl = strlen(base), rl = strlen(rel);
    if (bl + rl + 2 > sizeof tmp) return -ENAMETOOLONG;
    memcpy(tmp, base, bl);
    tmp[bl] = '/';
    memcpy(tmp + bl + 1, rel, rl + 1);
  }
  return lash_sandbox_path_normalize(tmp, out, outsz);
}
