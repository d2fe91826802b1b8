/*
** sandbox_copy.c: copying a tree a sandbox controls on the host (a
** snapshot of its workspace, a snapshot restored into a new one). The host
** may run as root while the sandbox's commands still run, so nothing here
** trusts a name twice: each entry is opened from its parent's descriptor
** with no symlink followed (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
** its kind is taken from the descriptor it got, links are read and written
** as links, and an entry that vanished or changed kind between the listing
** and the open is skipped and counted. What is copied is therefore always
** something that was beneath the source directory.
*/
#include "sandbox_copy.h"

#include <dirent.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define COPY_MAX_DEPTH 256
#define COPY_BUF (128 * 1024)

int lsb_open_beneath(int dirfd, const char *rel, int flags, mode_t mode) {
  struct open_how how;
  char part[256];
  const char *p = rel, *slash;
  int fd, cur = dirfd, saved;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return fd;
  /* before Linux 5.6: one component at a time, none a link or ".." */
  if (*rel == '/') {
    errno = EXDEV;
    return -1;
  }
  for (;;) {
    size_t n;
    while (*p == '/') p++;
    slash = strchr(p, '/');
    n = slash ? (size_t)(slash - p) : strlen(p);
    if (n >= sizeof part || (n == 2 && p[0] == '.' && p[1] == '.')) {
      errno = n >= sizeof part ? ENAMETOOLONG : EXDEV;
      fd = -1;
      break;
    }
    memcpy(part, p, n);
    part[n] = '\0';
    while (slash && slash[1] == '/') slash++;
    if (!slash || !slash[1]) {
      fd = openat(cur, n ? part : ".", flags | O_NOFOLLOW | O_CLOEXEC, mode);
      break;
    }
    fd = openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) break;
    if (cur != dirfd) close(cur);
    cur = fd;
    p = slash + 1;
  }
  saved = errno;
  if (cur != dirfd) close(cur);
  errno = saved;
  return fd;
}

typedef struct copier {
  uid_t uid;
  gid_t gid;
  int root;                 /* geteuid() == 0 */
  lsb_copy_stats st;
  char *buf;
  char path[4096];          /* relative to the source, for messages */
  char *why;
  size_t whysz;
} copier;

/* a race lost to the sandbox: the entry is not what it was when listed */
static int changed(int e) {
  return e == ENOENT || e == ELOOP || e == ENOTDIR || e == EISDIR || e == ENXIO ||
         e == EINVAL || e == EXDEV;
}

static int fail(copier *c, int e, const char *what) {
  snprintf(c->why, c->whysz, "%s %s: %s", what, c->path[0] ? c->path : ".",
           strerror(e));
  return -e;
}

static void own(copier *c, int fd, const struct stat *st) {
  uid_t u = c->uid == LSB_COPY_KEEP_OWNER ? st->st_uid : c->uid;
  gid_t g = c->uid == LSB_COPY_KEEP_OWNER ? st->st_gid : c->gid;
  if (c->root) (void)fchown(fd, u, g);
}

static void times_of(const struct stat *st, struct timespec ts[2]) {
  ts[0] = st->st_atim;
  ts[1] = st->st_mtim;
}

static int copy_data(copier *c, int in, int out, off_t size) {
  off_t done = 0;
  if (size > 0 && ioctl(out, FICLONE, in) == 0) return 0;
  while (done < size) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(size - done), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)
        break;
      return -errno;
    }
    if (n == 0) return 0;            /* the file shrank: what there is */
    done += n;
  }
  for (;;) {
    ssize_t n = read(in, c->buf, COPY_BUF), w = 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return 0;
    while (w < n) {
      ssize_t k = write(out, c->buf + w, (size_t)(n - w));
      if (k < 0) {
        if (errno == EINTR) continue;
        return -errno;
      }
      w += k;
    }
  }
}

static int copy_dir(copier *c, int from, int to, int depth);

/* One entry `name` of the directory from, into to. */
static int copy_entry(copier *c, int from, int to, const char *name, int depth) {
  struct stat st;
  struct timespec ts[2];
  int in, out, rc;
  if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return changed(errno) ? (c->st.skipped++, 0) : fail(c, errno, "stat");
  times_of(&st, ts);
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlinkat(from, name, target, sizeof target - 1);
    if (n < 0) return changed(errno) ? (c->st.skipped++, 0) : fail(c, errno, "readlink");
    target[n] = '\0';
    if (symlinkat(target, to, name) != 0) return fail(c, errno, "symlink");
    if (c->root) {
      uid_t u = c->uid == LSB_COPY_KEEP_OWNER ? st.st_uid : c->uid;
      gid_t g = c->uid == LSB_COPY_KEEP_OWNER ? st.st_gid : c->gid;
      (void)fchownat(to, name, u, g, AT_SYMLINK_NOFOLLOW);
    }
    (void)utimensat(to, name, ts, AT_SYMLINK_NOFOLLOW);
    c->st.links++;
    return 0;
  }
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    if (mknodat(to, name, (st.st_mode & S_IFMT) | (st.st_mode & 0777), 0) != 0)
      return fail(c, errno, "mknod");
    if (c->root) {
      uid_t u = c->uid == LSB_COPY_KEEP_OWNER ? st.st_uid : c->uid;
      gid_t g = c->uid == LSB_COPY_KEEP_OWNER ? st.st_gid : c->gid;
      (void)fchownat(to, name, u, g, AT_SYMLINK_NOFOLLOW);
    }
    (void)utimensat(to, name, ts, AT_SYMLINK_NOFOLLOW);
    c->st.specials++;
    return 0;
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth >= COPY_MAX_DEPTH) return fail(c, ELOOP, "nested deeper than 256 levels:");
    in = lsb_open_beneath(from, name, O_RDONLY | O_DIRECTORY, 0);
    if (in < 0) return changed(errno) ? (c->st.skipped++, 0) : fail(c, errno, "open");
    if (fstat(in, &st) != 0 || !S_ISDIR(st.st_mode)) {
      close(in);
      c->st.skipped++;
      return 0;
    }
    if (mkdirat(to, name, 0700) != 0) {
      rc = fail(c, errno, "mkdir");
      close(in);
      return rc;
    }
    out = lsb_open_beneath(to, name, O_RDONLY | O_DIRECTORY, 0);
    if (out < 0) {
      rc = fail(c, errno, "open the copy of");
      close(in);
      return rc;
    }
    rc = copy_dir(c, in, out, depth + 1);
    close(in);
    if (!rc) {
      own(c, out, &st);
      (void)fchmod(out, st.st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID));
      times_of(&st, ts);
      (void)futimens(out, ts);
      c->st.dirs++;
    }
    close(out);
    return rc;
  }
  if (!S_ISREG(st.st_mode)) {          /* a device: no jail can make one */
    c->st.skipped++;
    return 0;
  }
  /* O_NONBLOCK: a regular file swapped for a FIFO must not hang the open */
  in = lsb_open_beneath(from, name, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
  if (in < 0) return changed(errno) ? (c->st.skipped++, 0) : fail(c, errno, "open");
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(in);
    c->st.skipped++;
    return 0;
  }
  out = openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    rc = fail(c, errno, "create the copy of");
    close(in);
    return rc;
  }
  rc = copy_data(c, in, out, st.st_size);
  close(in);
  if (rc) {
    close(out);
    return fail(c, -rc, "copy");
  }
  own(c, out, &st);
  (void)fchmod(out, st.st_mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID));
  times_of(&st, ts);
  (void)futimens(out, ts);
  close(out);
  c->st.files++;
  return 0;
}

static int copy_dir(copier *c, int from, int to, int depth) {
  int dup_fd = dup(from), rc = 0;
  size_t len = strlen(c->path);
  DIR *d;
  struct dirent *e;
  if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
    if (dup_fd >= 0) close(dup_fd);
    return fail(c, errno, "list");
  }
  while (!rc) {
    errno = 0;
    if (!(e = readdir(d))) {
      if (errno) rc = fail(c, errno, "list");
      break;
    }
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(c->path + len, sizeof c->path - len, "%s%s", len ? "/" : "", e->d_name);
    rc = copy_entry(c, from, to, e->d_name, depth);
    if (!rc) c->path[len] = '\0';
  }
  closedir(d);
  return rc;
}

int lsb_copy_tree(int from, int to, uid_t uid, gid_t gid, lsb_copy_stats *stats,
                  char *why, size_t whysz) {
  copier c;
  struct stat st;
  struct timespec ts[2];
  int rc;
  memset(&c, 0, sizeof c);
  c.uid = uid;
  c.gid = gid;
  c.root = geteuid() == 0;
  c.why = why;
  c.whysz = whysz;
  if (whysz) why[0] = '\0';
  if (fstat(from, &st) != 0) return fail(&c, errno, "stat");
  if (!(c.buf = malloc(COPY_BUF))) return fail(&c, ENOMEM, "copy");
  rc = copy_dir(&c, from, to, 0);
  free(c.buf);
  if (!rc) {
    own(&c, to, &st);
    (void)fchmod(to, st.st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID));
    times_of(&st, ts);
    (void)futimens(to, ts);
  }
  if (stats) *stats = c.st;
  return rc;
}
