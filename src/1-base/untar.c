/*
** untar.c: the streaming extractor of untar.h. A state machine over the
** ustar format with its GNU (long names 'L'/'K') and POSIX pax ('x':
** path, linkpath, size) extensions; each member's path is walked from the
** destination's directory fd one component at a time (mkdirat, then
** openat O_DIRECTORY|O_NOFOLLOW), so no symlink, whether planted by the
** archive or already there, is ever followed.
** Prefix: lash_untar_.
*/
#include "untar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_BYTES 4096        /* a member's path, at most */
#define PAX_MAX_BYTES  (1 << 20)   /* a pax header's records, at most */
#define MAX_LINKS      100000      /* symlinks remembered for the end */

enum { ST_HEADER, ST_DATA, ST_META, ST_PAD, ST_END };
enum { META_NONE, META_LONGNAME, META_LONGLINK, META_PAX };

typedef struct link_rec { char *path, *target; } link_rec;

struct lash_untar {
  int root;                 /* the destination directory */
  int state;
  char hdr[512];
  size_t hlen;
  uint64_t left;            /* data bytes of the current member still to come */
  uint64_t pad;             /* padding after it */
  int fd;                   /* the file being written, or -1 (skipping) */
  int meta;                 /* what ST_META collects */
  char *metabuf;
  size_t metalen;
  char *longname, *longlink, *paxpath, *paxlink;
  int64_t paxsize;          /* -1: none */
  link_rec *links;
  size_t nlinks, linkcap;
  int zeros;                /* zero blocks seen in a row */
  lash_untar_stats st;
};

static void note_skip(lash_untar *u, const char *path, const char *why) {
  u->st.skipped++;
  if (!u->st.first_skip[0])
    snprintf(u->st.first_skip, sizeof u->st.first_skip, "%s: %s", path ? path : "(unnamed)", why);
}

lash_untar *lash_untar_open(const char *dest) {
  lash_untar *u;
  char buf[4096];
  size_t i, n = strlen(dest);
  if (n == 0 || n >= sizeof buf) {
    errno = EINVAL;
    return NULL;
  }
  /* mkdir -p dest (the user's own path: followed as given) */
  memcpy(buf, dest, n + 1);
  for (i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return NULL;
      buf[i] = c;
    }
  }
  u = calloc(1, sizeof *u);
  if (!u) return NULL;
  u->root = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (u->root < 0) {
    int e = errno;
    free(u);
    errno = e;
    return NULL;
  }
  u->fd = -1;
  u->paxsize = -1;
  return u;
}

/* ---- paths ------------------------------------------------------------- */

/* Normalize a member name in place: leading "./" and "/" parts dropped,
** "." components dropped; NULL when it holds "..", or is empty. */
static char *clean_name(char *p) {
  char *out = p, *w = p, *s = p;
  while (*s) {
    char *e = s;
    size_t len;
    while (*e && *e != '/') e++;
    len = (size_t)(e - s);
    if (len == 2 && s[0] == '.' && s[1] == '.') return NULL;
    if (len > 0 && !(len == 1 && s[0] == '.')) {
      if (w != out) *w++ = '/';
      memmove(w, s, len);
      w += len;
    }
    s = *e ? e + 1 : e;
  }
  *w = '\0';
  return *out ? out : NULL;
}

/* Walk to the directory holding path's last component, creating missing
** directories; returns its fd (the caller closes it unless it is root)
** and points *base at the last component. -1 with errno on failure. */
static int walk_parent(lash_untar *u, char *path, const char **base) {
  int dfd = u->root;
  char *s = path, *slash;
  while ((slash = strchr(s, '/')) != NULL) {
    int nfd;
    *slash = '\0';
    if (mkdirat(dfd, s, 0755) != 0 && errno != EEXIST) {
      int e = errno;
      *slash = '/';
      if (dfd != u->root) close(dfd);
      errno = e;
      return -1;
    }
    nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    *slash = '/';
    if (dfd != u->root) close(dfd);
    if (nfd < 0) return -1;
    dfd = nfd;
    s = slash + 1;
  }
  *base = s;
  return dfd;
}

/* ---- headers ----------------------------------------------------------- */

static int64_t num(const char *f, size_t n) {
  int64_t v = 0;
  size_t i = 0;
  if ((unsigned char)f[0] & 0x80) {          /* base-256 (GNU) */
    v = f[0] & 0x3f;
    for (i = 1; i < n; i++) {
      if (v > (INT64_MAX >> 8)) return -1;
      v = (v << 8) | (unsigned char)f[i];
    }
    return v;
  }
  while (i < n && (f[i] == ' ' || f[i] == '\0')) i++;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v > (INT64_MAX >> 3)) return -1;
    v = v * 8 + (f[i] - '0');
  }
  return v;
}

static int checksum_ok(const char *h) {
  int64_t want = num(h + 148, 8), sum = 0;
  int i;
  for (i = 0; i < 512; i++) sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
  return want == sum;
}

static char *field(const char *f, size_t n) {
  size_t len = strnlen(f, n);
  char *s = malloc(len + 1);
  if (s) {
    memcpy(s, f, len);
    s[len] = '\0';
  }
  return s;
}

static void clear_ext(lash_untar *u) {
  free(u->longname); free(u->longlink); free(u->paxpath); free(u->paxlink);
  u->longname = u->longlink = u->paxpath = u->paxlink = NULL;
  u->paxsize = -1;
}

/* pax records "LEN key=value\n": path, linkpath, size. */
static int parse_pax(lash_untar *u, char *b, size_t n) {
  size_t pos = 0;
  while (pos < n) {
    size_t len = 0, i = pos;
    char *kv, *eq, *end;
    while (i < n && b[i] >= '0' && b[i] <= '9') len = len * 10 + (size_t)(b[i++] - '0');
    if (i >= n || b[i] != ' ' || len == 0 || pos + len > n || b[pos + len - 1] != '\n') return -1;
    kv = b + i + 1;
    end = b + pos + len - 1;
    *end = '\0';
    eq = strchr(kv, '=');
    if (!eq) return -1;
    *eq = '\0';
    if (strcmp(kv, "path") == 0) { free(u->paxpath); u->paxpath = strdup(eq + 1); }
    else if (strcmp(kv, "linkpath") == 0) { free(u->paxlink); u->paxlink = strdup(eq + 1); }
    else if (strcmp(kv, "size") == 0) u->paxsize = strtoll(eq + 1, NULL, 10);
    pos += len;
  }
  return 0;
}

static int begin_member(lash_untar *u, char *err, size_t errsz) {
  const char *h = u->hdr;
  char type = h[156];
  int64_t size = num(h + 124, 12);
  char *name = NULL, *path;
  mode_t mode = (mode_t)(num(h + 100, 8) & 0777);
  if (!checksum_ok(h)) {
    snprintf(err, errsz, "not a tar stream (a header's checksum is wrong)");
    return -1;
  }
  if (u->paxsize >= 0 && type != 'x' && type != 'g' && type != 'L' && type != 'K') size = u->paxsize;
  if (size < 0) {
    snprintf(err, errsz, "not a tar stream (a member's size is unreadable)");
    return -1;
  }
  u->left = (uint64_t)size;
  u->pad = (512 - (uint64_t)size % 512) % 512;
  u->fd = -1;
  if (type == 'L' || type == 'K' || type == 'x') {
    if (size > (type == 'x' ? PAX_MAX_BYTES : NAME_MAX_BYTES)) {
      snprintf(err, errsz, "a tar header extension of %lld bytes is too large", (long long)size);
      return -1;
    }
    u->meta = type == 'L' ? META_LONGNAME : type == 'K' ? META_LONGLINK : META_PAX;
    u->metabuf = malloc((size_t)size + 1);
    if (!u->metabuf) {
      snprintf(err, errsz, "out of memory");
      return -1;
    }
    u->metalen = 0;
    u->state = size ? ST_META : ST_PAD;
    if (!size) u->meta = META_NONE;
    return 0;
  }
  if (type == 'g') {                      /* global pax: nothing we use */
    u->meta = META_NONE;
    u->state = size ? ST_DATA : (u->pad ? ST_PAD : ST_HEADER);
    return 0;
  }
  if (u->paxpath) name = strdup(u->paxpath);
  else if (u->longname) name = strdup(u->longname);
  else {
    char *pre = field(h + 345, 155), *nm = field(h, 100);
    if (pre && nm) {
      name = malloc(strlen(pre) + strlen(nm) + 2);
      if (name) sprintf(name, "%s%s%s", pre, *pre ? "/" : "", nm);
    }
    free(pre);
    free(nm);
  }
  if (!name) {
    snprintf(err, errsz, "out of memory");
    return -1;
  }
  path = clean_name(name);
  if (!path) {
    if (*name && strcmp(name, ".") && strcmp(name, "./")) note_skip(u, name, "absolute or with '..'");
  } else if (type == '0' || type == '\0' || type == '7') {
    const char *base;
    int dfd = walk_parent(u, path, &base);
    if (dfd < 0) {
      note_skip(u, path, strerror(errno));
    } else {
      u->fd = openat(dfd, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (u->fd < 0 && (errno == ELOOP || errno == EISDIR)) {
        /* a symlink (or an empty directory) in the way: replace it */
        if (unlinkat(dfd, base, 0) == 0 || unlinkat(dfd, base, AT_REMOVEDIR) == 0)
          u->fd = openat(dfd, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
      }
      if (u->fd < 0) note_skip(u, path, strerror(errno));
      else {
        if (fchmod(u->fd, mode | 0200) != 0) { /* keep going: the bytes matter more */ }
        u->st.files++;
      }
      if (dfd != u->root) close(dfd);
    }
  } else if (type == '5') {
    char *tmp = malloc(strlen(path) + 3);
    if (tmp) {
      const char *base;
      int dfd;
      sprintf(tmp, "%s/x", path);
      dfd = walk_parent(u, tmp, &base);
      if (dfd < 0) note_skip(u, path, strerror(errno));
      else {
        u->st.dirs++;
        if (dfd != u->root) close(dfd);
      }
      free(tmp);
    }
  } else if (type == '2') {
    const char *target = u->paxlink ? u->paxlink : u->longlink;
    char *t = target ? strdup(target) : field(h + 157, 100);
    if (u->nlinks >= MAX_LINKS) note_skip(u, path, "too many symlinks");
    else if (t) {
      if (u->nlinks == u->linkcap) {
        size_t cap = u->linkcap ? u->linkcap * 2 : 64;
        link_rec *nl = realloc(u->links, cap * sizeof *nl);
        if (!nl) {
          free(t);
          free(name);
          snprintf(err, errsz, "out of memory");
          return -1;
        }
        u->links = nl;
        u->linkcap = cap;
      }
      u->links[u->nlinks].path = strdup(path);
      u->links[u->nlinks].target = t;
      t = NULL;
      if (u->links[u->nlinks].path) u->nlinks++;
      else free(u->links[u->nlinks].target);
    }
    free(t);
  } else {
    note_skip(u, path, type == '1' ? "a hard link" : (type == '3' || type == '4') ? "a device" :
              type == '6' ? "a fifo" : "an unknown member type");
  }
  free(name);
  clear_ext(u);
  u->meta = META_NONE;
  u->state = size ? ST_DATA : (u->pad ? ST_PAD : ST_HEADER);
  return 0;
}

static int end_meta(lash_untar *u, char *err, size_t errsz) {
  u->metabuf[u->metalen] = '\0';
  if (u->meta == META_LONGNAME) { free(u->longname); u->longname = u->metabuf; }
  else if (u->meta == META_LONGLINK) { free(u->longlink); u->longlink = u->metabuf; }
  else {
    int rc = parse_pax(u, u->metabuf, u->metalen);
    free(u->metabuf);
    if (rc) {
      u->metabuf = NULL;
      snprintf(err, errsz, "not a tar stream (a malformed pax header)");
      return -1;
    }
  }
  u->metabuf = NULL;
  u->meta = META_NONE;
  return 0;
}

int lash_untar_write(lash_untar *u, const char *data, size_t n, char *err, size_t errsz) {
  while (n > 0) {
    size_t take;
    switch (u->state) {
    case ST_HEADER: {
      int i, zero = 1;
      take = 512 - u->hlen < n ? 512 - u->hlen : n;
      memcpy(u->hdr + u->hlen, data, take);
      u->hlen += take;
      data += take;
      n -= take;
      if (u->hlen < 512) break;
      u->hlen = 0;
      for (i = 0; i < 512; i++) if (u->hdr[i]) { zero = 0; break; }
      if (zero) {
        if (++u->zeros >= 2) u->state = ST_END;
        break;
      }
      u->zeros = 0;
      if (begin_member(u, err, errsz)) return -1;
      break;
    }
    case ST_DATA:
      take = u->left < n ? (size_t)u->left : n;
      if (u->fd >= 0) {
        size_t done = 0;
        while (done < take) {
          ssize_t w = write(u->fd, data + done, take - done);
          if (w < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errsz, "writing a file failed: %s", strerror(errno));
            return -1;
          }
          done += (size_t)w;
        }
        u->st.bytes += take;
      }
      u->left -= take;
      data += take;
      n -= take;
      if (u->left == 0) {
        if (u->fd >= 0) close(u->fd);
        u->fd = -1;
        u->state = u->pad ? ST_PAD : ST_HEADER;
      }
      break;
    case ST_META:
      take = u->left < n ? (size_t)u->left : n;
      memcpy(u->metabuf + u->metalen, data, take);
      u->metalen += take;
      u->left -= take;
      data += take;
      n -= take;
      if (u->left == 0) {
        if (end_meta(u, err, errsz)) return -1;
        u->state = u->pad ? ST_PAD : ST_HEADER;
      }
      break;
    case ST_PAD:
      take = u->pad < n ? (size_t)u->pad : n;
      u->pad -= take;
      data += take;
      n -= take;
      if (u->pad == 0) u->state = ST_HEADER;
      break;
    default:                              /* after the end: ignore */
      return 0;
    }
  }
  return 0;
}

int lash_untar_finish(lash_untar *u, lash_untar_stats *stats, char *err, size_t errsz) {
  size_t i;
  int rc = 0;
  if (u->state == ST_DATA || u->state == ST_META || (u->state == ST_HEADER && u->hlen > 0)) {
    snprintf(err, errsz, "the tar stream ended in the middle of a member");
    rc = -1;
  }
  for (i = 0; i < u->nlinks; i++) {
    const char *base;
    int dfd = walk_parent(u, u->links[i].path, &base);
    if (dfd < 0) {
      note_skip(u, u->links[i].path, strerror(errno));
      continue;
    }
    if (symlinkat(u->links[i].target, dfd, base) == 0) u->st.links++;
    else note_skip(u, u->links[i].path, errno == EEXIST ? "a symlink where something else already is" :
                   strerror(errno));
    if (dfd != u->root) close(dfd);
  }
  if (stats) *stats = u->st;
  return rc;
}

void lash_untar_close(lash_untar *u) {
  size_t i;
  if (!u) return;
  if (u->fd >= 0) close(u->fd);
  if (u->root >= 0) close(u->root);
  for (i = 0; i < u->nlinks; i++) {
    free(u->links[i].path);
    free(u->links[i].target);
  }
  free(u->links);
  free(u->metabuf);
  clear_ext(u);
  free(u);
}
