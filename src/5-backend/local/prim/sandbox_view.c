/*
** sandbox_view.c: what a local sandbox sees of the filesystem, and the
** file operations on it. The view is a small mount table (the rootfs
** read-only, the workspace and the sandbox's /tmp read-write, masks over
** host secrets, /proc /dev /sys) shared with the jail's command line, so
** file operations resolve paths exactly as a command in the jail would:
** symlinks are followed through the view, an absolute target restarts at
** the sandbox's root, and nothing is ever followed onto the host. The
** operations run in a helper child holding the jail's credentials, so the
** kernel checks permissions as it would for the command; the final open
** refuses any symlink (RESOLVE_NO_SYMLINKS) so a path swapped under us
** fails instead of escaping.
*/
#include "sandbox_view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- building ------------------------------------------------------- */

static lsb_mount *add(lsb_view *v, const char *view, const char *host,
                      int kind, int how) {
  lsb_mount *m;
  if (v->n >= LSB_MAX_MOUNTS) return NULL;
  m = &v->m[v->n++];
  snprintf(m->view, sizeof m->view, "%s", view);
  snprintf(m->host, sizeof m->host, "%s", host ? host : "");
  m->kind = kind;
  m->how = how;
  m->fd = -1;
  return m;
}

lsb_mount *lsb_view_lookup(lsb_view *v, const char *path) {
  lsb_mount *best = NULL;
  size_t bestlen = 0;
  int i;
  for (i = 0; i < v->n; i++) {
    size_t n = strlen(v->m[i].view);
    if (lsb_path_under(path, v->m[i].view) && (!best || n >= bestlen)) {
      best = &v->m[i];
      bestlen = n;
    }
  }
  return best;
}

/* Mask host path p (a view path when the rootfs is "/") if the sandbox
** would otherwise see it through the rootfs: it exists, it is not reached
** through a symlink, and no mount already covers it. */
static void mask(lsb_view *v, const char *p) {
  struct stat st;
  char real[LSB_PATH_MAX];
  lsb_mount *m = lsb_view_lookup(v, p);
  if (!m || m->how != LSB_HOW_ROOTFS) return;
  if (lstat(p, &st) != 0) return;
  if (!realpath(p, real) || strcmp(real, p) != 0) return;
  if (S_ISDIR(st.st_mode)) add(v, p, NULL, LSB_MNT_DENY, LSB_HOW_TMPFS);
  else add(v, p, NULL, LSB_MNT_DENY, LSB_HOW_DEVNULL);
}

/* Host secrets hidden from every jail over the host's root. Directories
** become empty, files read as empty. /run goes because it holds control
** sockets (docker, dbus) that a jail sharing the user's groups could use. */
static const char *const masked_dirs[] = {
  "/root", "/home", "/run", "/var/run", "/var/tmp", NULL
};
static const char *const masked_files[] = {
  "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
  "/etc/security/opasswd", NULL
};

int lsb_view_build(lsb_view *v, const lsb_layout *lay) {
  char ws[LSB_PATH_MAX], tmp[LSB_PATH_MAX], sd[LSB_PATH_MAX];
  int host_root = strcmp(lay->rootfs, "/") == 0;
  int i;
  v->n = 0;
  if ((size_t)snprintf(ws, sizeof ws, "%s/workspace", lay->box) >= sizeof ws ||
      (size_t)snprintf(tmp, sizeof tmp, "%s/tmp", lay->box) >= sizeof tmp)
    return -ENAMETOOLONG;
  if (lay->isolation_none) {
    /* no mount namespace: file operations get the workspace only */
    add(v, lay->workdir, ws, LSB_MNT_RW, LSB_HOW_BIND);
    return 0;
  }
  add(v, "/", lay->rootfs, LSB_MNT_RO, LSB_HOW_ROOTFS);
  add(v, "/proc", NULL, LSB_MNT_DENY, LSB_HOW_PROC);
  add(v, "/dev", NULL, LSB_MNT_DENY, LSB_HOW_DEV);
  add(v, "/sys", NULL, LSB_MNT_DENY, LSB_HOW_NONE);
  add(v, "/tmp", tmp, LSB_MNT_RW, LSB_HOW_BIND);
  /* the jail's /proc is its own, but the kernel's key lists in it are the
  ** machine's: key descriptions of the same uid (an unprivileged jail's) */
  if (access("/proc/keys", F_OK) == 0) {
    add(v, "/proc/keys", NULL, LSB_MNT_DENY, LSB_HOW_DEVNULL);
    add(v, "/proc/key-users", NULL, LSB_MNT_DENY, LSB_HOW_DEVNULL);
  }
  if (host_root) {
    glob_t g;
    struct stat cgst;
    /* every sandbox's cgroup (its name, its memory use) and the host's */
    if (lstat("/sys/fs/cgroup", &cgst) == 0 && S_ISDIR(cgst.st_mode))
      add(v, "/sys/fs/cgroup", NULL, LSB_MNT_DENY, LSB_HOW_TMPFS);
    for (i = 0; masked_dirs[i]; i++) mask(v, masked_dirs[i]);
    for (i = 0; masked_files[i]; i++) mask(v, masked_files[i]);
    if (glob("/etc/ssh/ssh_host_*_key", 0, NULL, &g) == 0) {
      size_t k;
      for (k = 0; k < g.gl_pathc; k++) mask(v, g.gl_pathv[k]);
      globfree(&g);
    }
    /* lash's own state (other sandboxes, credentials it keeps) */
    lsb_state_dir(lay->state_root, sd, sizeof sd);
    mask(v, sd);
    mask(v, lay->state_root);
  }
  if (!add(v, lay->workdir, ws, LSB_MNT_RW, LSB_HOW_BIND)) return -E2BIG;
  return 0;
}

int lsb_view_open(lsb_view *v) {
  int i;
  for (i = 0; i < v->n; i++) {
    lsb_mount *m = &v->m[i];
    if (m->kind == LSB_MNT_DENY || !m->host[0]) continue;
    m->fd = open(m->host, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (m->fd < 0) {
      int e = errno;
      lsb_view_close(v);
      return -e;
    }
  }
  return 0;
}

void lsb_view_close(lsb_view *v) {
  int i;
  for (i = 0; i < v->n; i++) {
    if (v->m[i].fd >= 0) close(v->m[i].fd);
    v->m[i].fd = -1;
  }
}

/* ---- resolution ----------------------------------------------------- */

/* 1 if some mount lies strictly below p: p is then a directory the jail
** creates on its way to that mount, whatever the rootfs holds. */
static int mount_ancestor(lsb_view *v, const char *p) {
  int i;
  for (i = 0; i < v->n; i++)
    if (strcmp(v->m[i].view, p) != 0 && lsb_path_under(v->m[i].view, p))
      return 1;
  return 0;
}

/* rel of view path p inside mount m ("." for its root). */
static void rel_of(const lsb_mount *m, const char *p, char *rel, size_t sz) {
  size_t n = strlen(m->view);
  const char *r;
  if (strcmp(m->view, "/") == 0) r = p + 1;
  else r = p + n + (p[n] == '/' ? 1 : 0);
  snprintf(rel, sz, "%s", *r ? r : ".");
}

static int append(char *cur, size_t sz, const char *c, size_t n) {
  size_t len = strlen(cur);
  size_t need = len + (len > 1 ? 1 : 0) + n + 1;
  if (need > sz) return -1;
  if (len > 1) cur[len++] = '/';
  memcpy(cur + len, c, n);
  cur[len + n] = '\0';
  return 0;
}

static void pop(char *cur) {
  char *s = strrchr(cur, '/');
  if (!s || s == cur) strcpy(cur, "/");
  else *s = '\0';
}

int lsb_resolve(lsb_view *v, const char *path, int follow_last,
                int allow_missing, lsb_res *res, int *err) {
  char rest[2 * LSB_PATH_MAX];     /* components still to walk */
  char cur[LSB_PATH_MAX];          /* resolved so far */
  char rel[LSB_PATH_MAX];
  size_t pos = 0;
  int links = 0;
  *err = 0;
  res->mount = NULL;
  res->synthetic = 0;
  res->missing = 0;
  res->missing_at = 0;
  if (strlen(path) >= sizeof rest) return LSB_E_NAMETOOLONG;
  strcpy(rest, path);
  strcpy(cur, "/");
  for (;;) {
    const char *c;
    size_t n, after;
    lsb_mount *m;
    struct stat st;
    while (rest[pos] == '/') pos++;
    if (!rest[pos]) break;
    c = rest + pos;
    n = strcspn(c, "/");
    after = pos + n;
    pos = after;
    if (n == 1 && c[0] == '.') continue;
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      pop(cur);
      continue;
    }
    {
      char cand[LSB_PATH_MAX];
      int last;
      size_t p2 = pos;
      while (rest[p2] == '/') p2++;
      last = rest[p2] == '\0';
      strcpy(cand, cur);
      if (append(cand, sizeof cand, c, n) != 0) return LSB_E_NAMETOOLONG;
      m = lsb_view_lookup(v, cand);
      if (mount_ancestor(v, cand) && (!m || m->kind == LSB_MNT_DENY)) {
        strcpy(cur, cand);          /* a directory the jail makes */
        continue;
      }
      if (!m || m->kind == LSB_MNT_DENY) return LSB_E_DENIED;
      if (strcmp(m->view, cand) == 0) {
        strcpy(cur, cand);          /* a mount's root: a directory */
        continue;
      }
      rel_of(m, cand, rel, sizeof rel);
      if (fstatat(m->fd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        *err = errno;
        if (errno == ENOENT && allow_missing) {
          /* the rest is created by the caller: no ".." may follow a
          ** missing directory (the kernel would fail there too) */
          const char *q = rest + after;
          while (*q) {
            size_t k;
            while (*q == '/') q++;
            k = strcspn(q, "/");
            if (k == 2 && q[0] == '.' && q[1] == '.') return LSB_E_NOTFOUND;
            q += k;
          }
          res->missing = 1;
          res->missing_at = strlen(cur) + (strlen(cur) > 1 ? 1 : 0);
          strcpy(cur, cand);
          q = rest + after;
          while (*q) {
            size_t k;
            while (*q == '/') q++;
            k = strcspn(q, "/");
            if (k && !(k == 1 && q[0] == '.') &&
                append(cur, sizeof cur, q, k) != 0)
              return LSB_E_NAMETOOLONG;
            q += k;
          }
          break;
        }
        if (errno == ENOENT) return LSB_E_NOTFOUND;
        if (errno == ENOTDIR) return LSB_E_NOTDIR;
        if (errno == EACCES || errno == EPERM) return LSB_E_DENIED;
        if (errno == ENAMETOOLONG) return LSB_E_NAMETOOLONG;
        return LSB_E_IO;
      }
      if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
        char target[LSB_PATH_MAX];
        ssize_t tl;
        size_t restlen = strlen(rest + after);
        if (++links > 40) return LSB_E_LOOP;
        tl = readlinkat(m->fd, rel, target, sizeof target - 1);
        if (tl < 0) {
          *err = errno;
          return LSB_E_IO;
        }
        target[tl] = '\0';
        if ((size_t)tl + 1 + restlen + 1 > sizeof rest)
          return LSB_E_NAMETOOLONG;
        /* rest := target + remaining components */
        memmove(rest + tl + 1, rest + after, restlen + 1);
        memcpy(rest, target, (size_t)tl);
        rest[tl] = '/';
        pos = 0;
        if (target[0] == '/') strcpy(cur, "/");
        continue;
      }
      if (!last && !S_ISDIR(st.st_mode)) return LSB_E_NOTDIR;
      strcpy(cur, cand);
    }
  }
  res->mount = lsb_view_lookup(v, cur);
  snprintf(res->view, sizeof res->view, "%s", cur);
  if (!res->missing && mount_ancestor(v, cur) &&
      (!res->mount || res->mount->kind == LSB_MNT_DENY)) {
    res->synthetic = 1;
    strcpy(res->rel, ".");
    return LSB_OK;
  }
  if (!res->mount || res->mount->kind == LSB_MNT_DENY) return LSB_E_DENIED;
  rel_of(res->mount, cur, res->rel, sizeof res->rel);
  return LSB_OK;
}

/* ---- the helper child ----------------------------------------------- */

static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode) {
  struct open_how how;
  int fd;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS)   /* before Linux 5.6: last component only */
    fd = openat(dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC, mode);
  return fd;
}

static int put(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int reply(int fd, int status, int err, int64_t a, int64_t b) {
  lsb_reply r;
  memset(&r, 0, sizeof r);
  r.status = status;
  r.err = err;
  r.a = a;
  r.b = b;
  return put(fd, &r, sizeof r) == 0 ? 0 : 1;
}

static int errno_code(int e) {
  switch (e) {
  case ENOENT: return LSB_E_NOTFOUND;
  case EACCES: case EPERM: return LSB_E_DENIED;
  case EROFS: return LSB_E_READONLY;
  case ENOTDIR: return LSB_E_NOTDIR;
  case EISDIR: return LSB_E_ISDIR;
  case ELOOP: case EXDEV: return LSB_E_LOOP;
  case ENAMETOOLONG: return LSB_E_NAMETOOLONG;
  case EEXIST: return LSB_E_EXISTS;
  default: return LSB_E_IO;
  }
}

static char kind_of(mode_t mode) {
  if (S_ISREG(mode)) return 'f';
  if (S_ISDIR(mode)) return 'd';
  if (S_ISLNK(mode)) return 'l';
  return 'o';
}

static int do_stat(lsb_view *v, const lsb_fileop *op, int out) {
  lsb_res r;
  int e, code = lsb_resolve(v, op->path, 1, 0, &r, &e);
  struct stat st;
  lsb_reply rep;
  if (code) return reply(out, code, e, 0, 0);
  memset(&st, 0, sizeof st);
  if (r.synthetic) {
    st.st_mode = S_IFDIR | 0755;
  } else {
    /* through openat2 as well: a parent swapped for a symlink fails */
    int fd = r.rel[0] ? open_beneath(r.mount->fd, r.rel, O_PATH | O_NOFOLLOW, 0)
                      : dup(r.mount->fd);
    if (fd < 0 || fstat(fd, &st) != 0) {
      e = errno;
      if (fd >= 0) close(fd);
      return reply(out, errno_code(e), e, 0, 0);
    }
    close(fd);
  }
  memset(&rep, 0, sizeof rep);
  rep.a = st.st_size;
  rep.b = st.st_mtim.tv_sec;
  rep.kind = kind_of(st.st_mode);
  rep.mode = (int32_t)(st.st_mode & 07777);
  return put(out, &rep, sizeof rep) == 0 ? 0 : 1;
}

static int do_read(lsb_view *v, const lsb_fileop *op, int out) {
  lsb_res r;
  int e, code = lsb_resolve(v, op->path, 1, 0, &r, &e);
  int fd;
  struct stat st;
  char buf[65536];
  uint64_t total = 0;
  if (code) return reply(out, code, e, 0, 0);
  if (r.synthetic) return reply(out, LSB_E_ISDIR, EISDIR, 0, 0);
  fd = open_beneath(r.mount->fd, r.rel, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
  if (fd < 0) {
    e = errno;
    return reply(out, errno_code(e), e, 0, 0);
  }
  if (fstat(fd, &st) != 0) {
    e = errno;
    return reply(out, LSB_E_IO, e, 0, 0);
  }
  if (S_ISDIR(st.st_mode)) return reply(out, LSB_E_ISDIR, EISDIR, 0, 0);
  if (!S_ISREG(st.st_mode)) return reply(out, LSB_E_NOTREG, 0, 0, 0);
  if ((uint64_t)st.st_size > op->max_bytes)
    return reply(out, LSB_E_TOOLARGE, 0, st.st_size, (int64_t)op->max_bytes);
  fcntl(fd, F_SETFL, 0);
  if (reply(out, LSB_OK, 0, st.st_size, 0)) return 1;
  /* at most max+1 bytes: one past the limit tells the parent it grew */
  while (total <= op->max_bytes) {
    uint64_t want = op->max_bytes + 1 - total;
    ssize_t n = read(fd, buf, want < sizeof buf ? (size_t)want : sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return 3;
    }
    if (n == 0) break;
    if (put(out, buf, (size_t)n)) return 1;
    total += (uint64_t)n;
  }
  return 0;
}

static int do_write(lsb_view *v, const lsb_fileop *op, int out) {
  lsb_res r;
  int e, code = lsb_resolve(v, op->path, 1, 1, &r, &e);
  int fd;
  size_t done = 0;
  if (code) return reply(out, code, e, 0, 0);
  if (r.synthetic) return reply(out, LSB_E_ISDIR, EISDIR, 0, 0);
  if (r.mount->kind != LSB_MNT_RW) return reply(out, LSB_E_READONLY, EROFS, 0, 0);
  if (strcmp(r.view, r.mount->view) == 0) return reply(out, LSB_E_ISDIR, EISDIR, 0, 0);
  /* Walk the parents one component at a time, each opened relative to the
  ** previous one's fd with no symlink allowed (openat2 RESOLVE_BENEATH |
  ** RESOLVE_NO_SYMLINKS, or O_NOFOLLOW per component), creating the missing
  ** ones: a parent swapped for a symlink between the check and the use
  ** fails the walk instead of leading it outside the sandbox. */
  {
    char rel[LSB_PATH_MAX];
    char *comp, *slash;
    int dfd = r.mount->fd;
    if (strlen(r.rel) >= sizeof rel) return reply(out, LSB_E_NAMETOOLONG, 0, 0, 0);
    memcpy(rel, r.rel, strlen(r.rel) + 1);
    comp = rel;
    while ((slash = strchr(comp, '/')) != NULL) {
      int nfd;
      *slash = '\0';
      if (*comp && strcmp(comp, ".") != 0) {
        if (r.missing && mkdirat(dfd, comp, 0755) != 0 && errno != EEXIST) {
          e = errno;
          if (dfd != r.mount->fd) close(dfd);
          return reply(out, errno_code(e), e, 0, 0);
        }
        nfd = open_beneath(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOCTTY, 0);
        e = errno;
        if (dfd != r.mount->fd) close(dfd);
        if (nfd < 0) return reply(out, e == ENOTDIR ? LSB_E_EXISTS : errno_code(e), e, 0, 0);
        dfd = nfd;
      }
      comp = slash + 1;
    }
    fd = open_beneath(dfd, comp, O_WRONLY | O_CREAT | O_TRUNC |
                      O_NOCTTY | O_NONBLOCK, 0644);
    e = errno;
    if (dfd != r.mount->fd) close(dfd);
    errno = e;
  }
  if (fd < 0) {
    e = errno;
    return reply(out, errno_code(e), e, 0, 0);
  }
  {
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
      return reply(out, LSB_E_NOTREG, 0, 0, 0);
  }
  fcntl(fd, F_SETFL, 0);
  while (done < op->len) {
    ssize_t n = write(fd, (const char *)op->data + done, op->len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      e = errno;
      return reply(out, errno_code(e), e, (int64_t)done, 0);
    }
    done += (size_t)n;
  }
  if (close(fd) != 0) {
    e = errno;
    return reply(out, LSB_E_IO, e, (int64_t)done, 0);
  }
  return reply(out, LSB_OK, 0, (int64_t)done, 0);
}

struct lbuf {
  char b[65536];
  size_t n;
  int fd;
  int failed;
};

static void lput(struct lbuf *l, char kind, const char *name) {
  size_t n = strlen(name);
  if (l->failed) return;
  if (l->n + n + 2 > sizeof l->b) {
    if (put(l->fd, l->b, l->n)) l->failed = 1;
    l->n = 0;
  }
  l->b[l->n++] = kind;
  memcpy(l->b + l->n, name, n + 1);
  l->n += n + 1;
}

static int do_list(lsb_view *v, const lsb_fileop *op, int out) {
  lsb_res r;
  int e, code = lsb_resolve(v, op->path, 1, 0, &r, &e);
  int fd = -1, i;
  struct lbuf l;          /* on the stack: the child uses no heap */
  char dbuf[32768];
  if (code) return reply(out, code, e, 0, 0);
  if (!r.synthetic) {
    fd = open_beneath(r.mount->fd, r.rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
      e = errno;
      return reply(out, errno_code(e), e, 0, 0);
    }
  }
  if (reply(out, LSB_OK, 0, 0, 0)) return 1;
  l.n = 0;
  l.fd = out;
  l.failed = 0;
  if (fd >= 0) {
    for (;;) {
      long n = syscall(SYS_getdents64, fd, dbuf, sizeof dbuf);
      long off = 0;
      if (n < 0) {
        if (errno == EINTR) continue;
        return 3;
      }
      if (n == 0) break;
      while (off < n) {
        struct {
          uint64_t ino;
          int64_t off;
          unsigned short reclen;
          unsigned char type;
          char name[];
        } *d = (void *)(dbuf + off);
        char kind;
        off += d->reclen;
        if (strcmp(d->name, ".") == 0 || strcmp(d->name, "..") == 0) continue;
        switch (d->type) {
        case DT_REG: kind = 'f'; break;
        case DT_DIR: kind = 'd'; break;
        case DT_LNK: kind = 'l'; break;
        case DT_UNKNOWN: {
          struct stat st;
          kind = fstatat(fd, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0
                     ? kind_of(st.st_mode) : 'o';
          break;
        }
        default: kind = 'o';
        }
        lput(&l, kind, d->name);
      }
    }
  }
  /* mount points directly below that the rootfs does not have */
  for (i = 0; i < v->n; i++) {
    const char *mv = v->m[i].view;
    const char *slash = strrchr(mv, '/');
    char parent[LSB_PATH_MAX];
    struct stat st;
    if (strcmp(mv, "/") == 0 || !slash) continue;
    if (slash == mv) strcpy(parent, "/");
    else {
      memcpy(parent, mv, (size_t)(slash - mv));
      parent[slash - mv] = '\0';
    }
    if (strcmp(parent, r.view) != 0) continue;
    if (fd >= 0 && fstatat(fd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0)
      continue;
    lput(&l, v->m[i].how == LSB_HOW_DEVNULL ? 'f' : 'd', slash + 1);
  }
  /* synthetic intermediate directories (e.g. /home/u for /home/u/proj) */
  for (i = 0; i < v->n; i++) {
    const char *mv = v->m[i].view;
    size_t pl = strlen(r.view);
    char name[256];
    const char *s;
    size_t k;
    int j, seen = 0;
    struct stat st;
    if (!lsb_path_under(mv, r.view) || strcmp(mv, r.view) == 0) continue;
    s = mv + (pl == 1 ? 1 : pl + 1);
    k = strcspn(s, "/");
    if (!s[k] || k >= sizeof name) continue;   /* direct child: done above */
    memcpy(name, s, k);
    name[k] = '\0';
    for (j = 0; j < i; j++) {
      const char *o = v->m[j].view;
      if (lsb_path_under(o, r.view) && strcmp(o, r.view) != 0) {
        const char *t = o + (pl == 1 ? 1 : pl + 1);
        if (strncmp(t, name, k) == 0 && (t[k] == '/' || t[k] == '\0'))
          seen = 1;
      }
    }
    if (seen) continue;
    if (fd >= 0 && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) continue;
    lput(&l, 'd', name);
  }
  if (!l.failed && l.n && put(out, l.b, l.n)) l.failed = 1;
  return l.failed ? 1 : 0;
}

int lsb_fileop_child(lsb_view *v, const lsb_fileop *op, int fd) {
  switch (op->op) {
  case LSB_OP_STAT: return do_stat(v, op, fd);
  case LSB_OP_READ: return do_read(v, op, fd);
  case LSB_OP_WRITE: return do_write(v, op, fd);
  case LSB_OP_LIST: return do_list(v, op, fd);
  default: return reply(fd, LSB_E_IO, EINVAL, 0, 0);
  }
}
