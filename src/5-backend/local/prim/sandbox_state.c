/*
** sandbox_state.c: the local backend's on-disk state. Each sandbox is a
** directory <state root>/<id> holding a lock file (flock: shared for
** readers, exclusive for writers), meta.json (replaced atomically: write,
** fsync, rename, fsync of the directory; an ephemeral sandbox's without the
** fsyncs until it is persisted), the workspace, the sandbox's
** /tmp, and job records of commands running in it. Also ids, the host
** uids reserved for sandboxes, path normalization, and a tree removal
** that never follows symlinks.
*/
#include "sandbox_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- ids ------------------------------------------------------------ */

static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";

int lsb_id_new(char out[LSB_ID_LEN + 1]) {
  unsigned char rnd[LSB_ID_RANDOM];
  size_t got = 0;
  int i;
  while (got < sizeof rnd) {
    ssize_t r = getrandom(rnd + got, sizeof rnd - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    got += (size_t)r;
  }
  memcpy(out, LSB_ID_PREFIX, 3);
  /* one random byte per character, 5 bits of it: uniform over 32 */
  for (i = 0; i < LSB_ID_RANDOM; i++) out[3 + i] = b32[rnd[i] & 31];
  out[LSB_ID_LEN] = '\0';
  return 0;
}

int lsb_id_valid(const char *s) {
  size_t i;
  if (!s || strncmp(s, LSB_ID_PREFIX, 3) != 0 || strlen(s) != LSB_ID_LEN)
    return 0;
  for (i = 3; i < LSB_ID_LEN; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '2' && s[i] <= '7')))
      return 0;
  return 1;
}

/* ---- paths ---------------------------------------------------------- */

int lsb_path_under(const char *path, const char *prefix) {
  size_t n = strlen(prefix);
  if (strcmp(prefix, "/") == 0) return path[0] == '/';
  if (strncmp(path, prefix, n) != 0) return 0;
  return path[n] == '\0' || path[n] == '/';
}

/* ---- the state root ------------------------------------------------- */

int lsb_state_root(const char *configured, char *out, size_t outsz) {
  char buf[LSB_PATH_MAX];
  const char *env;
  if (configured && *configured) {
    if (configured[0] != '/') {
      if (!getcwd(buf, sizeof buf)) return -errno;
      return lash_sandbox_path_join(buf, configured, out, outsz);
    }
    return lash_sandbox_path_normalize(configured, out, outsz);
  }
  env = getenv("LASH_SANDBOX_ROOT");
  if (env && *env) return lsb_state_root(env, out, outsz);
  /* As root the jail runs as an unprivileged uid that must be able to
  ** reach the workspace; /root is not searchable by it, /var/lib is. */
  if (geteuid() == 0)
    return lash_sandbox_path_normalize("/var/lib/lash/sandboxes", out, outsz);
  {
    int rc = lash_user_dir(LASH_USER_STATE, NULL, NULL, buf, sizeof buf - 10, NULL);
    if (rc != 0) return rc;
  }
  strcat(buf, "/sandboxes");
  return lash_sandbox_path_normalize(buf, out, outsz);
}

void lsb_state_dir(const char *root, char *out, size_t outsz) {
  const char *slash = strrchr(root, '/');
  if (slash && strcmp(slash, "/sandboxes") == 0 && slash != root) {
    size_t n = (size_t)(slash - root);
    if (n >= outsz) n = outsz - 1;
    memcpy(out, root, n);
    out[n] = '\0';
  } else {
    snprintf(out, outsz, "%s", root);
  }
}

/* ---- boxes ---------------------------------------------------------- */

void lsb_box_close(lsb_box *b) {
  if (b->holds) {
    /* borrowed fds: the last hold gives the lock back, the owner closes */
    if (*b->holds > 0 && --*b->holds == 0 && b->lockfd >= 0)
      flock(b->lockfd, LOCK_UN);
    b->holds = NULL;
  } else {
    if (b->lockfd >= 0) close(b->lockfd);   /* closing drops the flock */
    if (b->dirfd >= 0) close(b->dirfd);
  }
  b->lockfd = b->dirfd = -1;
}

static int flock_retry(int fd, int op) {
  while (flock(fd, op) != 0) {
    if (errno != EINTR) return -errno;
  }
  return 0;
}

int lsb_box_open(const char *root, const char *id, int exclusive,
                 lsb_box *b) {
  char path[LSB_PATH_MAX];
  int rc;
  struct stat st;
  b->dirfd = b->lockfd = -1;
  b->holds = NULL;
  if (!lsb_id_valid(id)) return -EINVAL;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", root, id) >= sizeof path)
    return -ENAMETOOLONG;
  b->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (b->dirfd < 0) return -errno;
  b->lockfd = openat(b->dirfd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (b->lockfd < 0) {
    rc = -errno;
    lsb_box_close(b);
    return rc;
  }
  rc = flock_retry(b->lockfd, ((exclusive & LSB_LOCK_EX) ? LOCK_EX : LOCK_SH) |
                               ((exclusive & LSB_LOCK_TRY) ? LOCK_NB : 0));
  if (rc) {
    lsb_box_close(b);
    return rc;
  }
  /* destroy renames the directory away under the exclusive lock: if that
  ** happened while we waited, the path no longer names this directory */
  if (fstatat(b->dirfd, "meta.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    rc = errno == ENOENT ? -ENOENT : -errno;
    lsb_box_close(b);
    return rc;
  }
  {
    struct stat a, c;
    if (fstat(b->dirfd, &a) != 0 || stat(path, &c) != 0 ||
        a.st_ino != c.st_ino || a.st_dev != c.st_dev) {
      lsb_box_close(b);
      return -ENOENT;
    }
  }
  return 0;
}

int lsb_box_create(const char *root, const char *id, lsb_box *b) {
  char path[LSB_PATH_MAX];
  int rc;
  b->dirfd = b->lockfd = -1;
  b->holds = NULL;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", root, id) >= sizeof path)
    return -ENAMETOOLONG;
  if (mkdir(path, 0711) != 0) return -errno;
  b->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (b->dirfd < 0) goto fail;
  b->lockfd = openat(b->dirfd, "lock",
                     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (b->lockfd < 0) goto fail;
  rc = flock_retry(b->lockfd, LOCK_EX);
  if (rc) {
    errno = -rc;
    goto fail;
  }
  return 0;
fail:
  rc = -errno;
  lsb_box_close(b);
  rmdir(path);
  return rc;
}

/* ---- files ---------------------------------------------------------- */

static int write_full(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int write_replace(int dirfd, const char *name, const void *data,
                         size_t len, mode_t mode, int durable) {
  char tmp[256];
  unsigned char r[6];
  int fd, rc;
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -EIO;
  if ((size_t)snprintf(tmp, sizeof tmp, ".%s.%02x%02x%02x%02x%02x%02x", name,
                       r[0], r[1], r[2], r[3], r[4], r[5]) >= sizeof tmp)
    return -ENAMETOOLONG;
  fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              mode);
  if (fd < 0) return -errno;
  rc = write_full(fd, data, len);
  if (!rc && durable && fsync(fd) != 0) rc = -errno;
  if (close(fd) != 0 && !rc) rc = -errno;
  if (!rc && renameat(dirfd, tmp, dirfd, name) != 0) rc = -errno;
  if (rc) {
    unlinkat(dirfd, tmp, 0);
    return rc;
  }
  if (durable && fsync(dirfd) != 0) return -errno;
  return 0;
}

int lsb_write_atomic(int dirfd, const char *name, const void *data,
                     size_t len, mode_t mode) {
  return write_replace(dirfd, name, data, len, mode, 1);
}

int lsb_write_unsynced(int dirfd, const char *name, const void *data,
                       size_t len, mode_t mode) {
  return write_replace(dirfd, name, data, len, mode, 0);
}

int lsb_sync_at(int dirfd, const char *name) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;
  if (fd < 0) return errno == ENOENT ? 0 : -errno;
  if (fsync(fd) != 0) rc = -errno;
  close(fd);
  return rc;
}

int lsb_read_fd(int fd, size_t max, char **data, size_t *len) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) return -ENOMEM;
  for (;;) {
    ssize_t r;
    if (n + 1 >= cap) {
      char *nb;
      if (cap > max + 1) {
        free(buf);
        return -EFBIG;
      }
      nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
    r = read(fd, buf + n, cap - n - 1);
    if (r < 0) {
      int e = errno;
      if (e == EINTR) continue;
      free(buf);
      return -e;
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n > max) {
      free(buf);
      return -EFBIG;
    }
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return 0;
}

int lsb_read_all(int dirfd, const char *name, size_t max, char **data,
                 size_t *len) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc;
  if (fd < 0) return -errno;
  rc = lsb_read_fd(fd, max, data, len);
  close(fd);
  return rc;
}

/* Remove the directory entry name in dirfd, recursing into directories.
** Depth is bounded by the fd limit; workspaces deeper than that are
** unusual enough that failing with EMFILE is acceptable. */
static int out_of_time(uint64_t deadline) {
  struct timespec ts;
  if (!deadline) return 0;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec >= deadline;
}

static int rmtree(int dir, const char *name, uint64_t deadline) {
  struct stat st;
  int fd, rc = 0;
  DIR *d;
  struct dirent *e;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? 0 : -errno;
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(dir, name, 0) != 0 && errno != ENOENT) return -errno;
    return 0;
  }
  fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) {
    /* a directory the jail made unreadable (chmod 000): we own it or are
    ** root, so make it ours to empty; through a descriptor of the
    ** directory itself, as fchmodat would follow a link swapped in */
    int pfd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0) {
      char self[32];
      snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
      chmod(self, 0700);
      close(pfd);
    }
    fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0) return -errno;
  if ((st.st_mode & 0700) != 0700) fchmod(fd, 0700);
  d = fdopendir(fd);
  if (!d) {
    rc = -errno;
    close(fd);
    return rc;
  }
  while ((e = readdir(d)) != NULL) {
    int r;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (out_of_time(deadline)) {
      closedir(d);
      return -ETIME;
    }
    r = rmtree(dirfd(d), e->d_name, deadline);
    if (r == -ETIME) {
      closedir(d);
      return r;
    }
    if (r && !rc) rc = r;
  }
  closedir(d);
  if (unlinkat(dir, name, AT_REMOVEDIR) != 0 && errno != ENOENT && !rc)
    rc = -errno;
  return rc;
}

int lsb_rmtree_at(int dir, const char *name) {
  return rmtree(dir, name, 0);
}

int lsb_rmtree_until(int dir, const char *name, uint64_t deadline) {
  return rmtree(dir, name, deadline ? deadline : 1);
}

/* ---- job records ---------------------------------------------------- */

unsigned long long lsb_proc_starttime(pid_t pid) {
  char path[64], buf[1024];
  int fd;
  ssize_t n;
  char *p;
  int field;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  /* the command name may hold spaces and parentheses: start after the
  ** last ')' which is field 2's end */
  p = strrchr(buf, ')');
  if (!p) return 0;
  p++;
  for (field = 3; field < 22 && *p; field++) {
    while (*p == ' ') p++;
    while (*p && *p != ' ') p++;
  }
  while (*p == ' ') p++;
  return strtoull(p, NULL, 10);
}

int lsb_job_add(int dirfd, pid_t pid, char *name, size_t namesz) {
  unsigned long long st = lsb_proc_starttime(pid);
  int fd;
  snprintf(name, namesz, "jobs/%d-%llu", (int)pid, st);
  fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {
    /* the first job of this box: its directory first */
    if (mkdirat(dirfd, "jobs", 0700) != 0 && errno != EEXIST) return -errno;
    fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0) return -errno;
  close(fd);
  return 0;
}

void lsb_job_remove(int dirfd, const char *name) {
  if (name && *name) unlinkat(dirfd, name, 0);
}

/* Send sig (0: none) to every recorded job whose process still has its
** recorded start time (a recycled pid does not count); returns how many
** there were. */
static int jobs_each(int dirfd, int sig) {
  int fd = openat(dirfd, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                  O_CLOEXEC);
  DIR *d;
  struct dirent *e;
  int killed = 0;
  if (fd < 0) return 0;
  d = fdopendir(fd);
  if (!d) {
    close(fd);
    return 0;
  }
  while ((e = readdir(d)) != NULL) {
    int pid;
    unsigned long long st;
    if (sscanf(e->d_name, "%d-%llu", &pid, &st) != 2 || pid <= 1) continue;
    /* the start time guards against a recycled pid */
    if (st != 0 && lsb_proc_starttime(pid) == st) {
      if (sig == 0 || kill(pid, sig) == 0) killed++;
    }
  }
  closedir(d);
  return killed;
}

/* ---- host uids ------------------------------------------------------ */

/* Does a process run as uid (its /proc entry is owned by the effective
** uid)? */
static int uid_running(uid_t uid) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  int found = 0;
  if (!d) return 0;
  while (!found && (e = readdir(d)) != NULL) {
    struct stat st;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_uid == uid)
      found = 1;
  }
  closedir(d);
  return found;
}

/* A host account or group with that number (getpwuid would load NSS
** modules into a process that may be forking: read the files). */
static int uid_named(const char *file, unsigned id) {
  FILE *f = fopen(file, "re");
  char line[1024];
  int found = 0;
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *c = strchr(line, ':');
    if (c && (c = strchr(c + 1, ':')) && strtoul(c + 1, NULL, 10) == id &&
        c[1] >= '0' && c[1] <= '9')
      found = 1;
  }
  fclose(f);
  return found;
}

int lsb_record_live(int dfd, const char *name) {
  char *data = NULL;
  size_t len;
  struct stat st;
  int live = 1;
  if (lsb_read_all(dfd, name, LSB_PATH_MAX, &data, &len) == 0) {
    while (len && data[len - 1] == '\n') data[--len] = '\0';
    live = len > 0 && stat(data, &st) == 0;
  }
  free(data);
  return live;
}

int lsb_uid_reserve(const char *dir, const char *box,
                    uint32_t (*next)(void *), void *ud, uid_t *uid) {
  int dfd, rc, tries;
  char name[16], body[LSB_PATH_MAX + 2];
  int blen = snprintf(body, sizeof body, "%s\n", box);
  if ((rc = lash_mkdirs(dir, 0700)) != 0) return rc;
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -errno;
  {
    /* reservations of sandboxes deleted without a destroy (their state
    ** root removed) go first, so the list stays the live ones */
    int sfd = dup(dfd);
    DIR *d = sfd >= 0 ? fdopendir(sfd) : NULL;
    struct dirent *e;
    if (d) {
      while ((e = readdir(d)) != NULL)
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
            !lsb_record_live(dfd, e->d_name))
          unlinkat(dfd, e->d_name, 0);
      closedir(d);
    } else if (sfd >= 0) {
      close(sfd);
    }
  }
  for (tries = 0; tries < 1000; tries++) {
    uint32_t u = next(ud);
    int fd;
    if (u == 0) break;
    if (uid_named("/etc/passwd", u) || uid_named("/etc/group", u) ||
        uid_running((uid_t)u))
      continue;
    snprintf(name, sizeof name, "%u", u);
    fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
      /* another sandbox's, unless that sandbox is gone */
      if (lsb_record_live(dfd, name)) continue;
      if (lsb_write_atomic(dfd, name, body, (size_t)blen, 0600) != 0) continue;
      close(dfd);
      *uid = (uid_t)u;
      return 0;
    }
    if (fd < 0) {
      rc = -errno;
      close(dfd);
      return rc;
    }
    rc = write(fd, body, (size_t)blen) == blen ? 0 : -EIO;
    close(fd);
    if (rc) {
      unlinkat(dfd, name, 0);
      close(dfd);
      return rc;
    }
    close(dfd);
    *uid = (uid_t)u;
    return 0;
  }
  close(dfd);
  return -EAGAIN;
}

void lsb_uid_release(const char *dir, uid_t uid, const char *box) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char name[16], *data = NULL;
  size_t len;
  if (dfd < 0) return;
  snprintf(name, sizeof name, "%u", (unsigned)uid);
  if (lsb_read_all(dfd, name, LSB_PATH_MAX, &data, &len) == 0) {
    while (len && data[len - 1] == '\n') data[--len] = '\0';
    /* only our own: the box may have been moved to the trash meanwhile */
    if (strcmp(data, box) == 0 || !lsb_record_live(dfd, name))
      unlinkat(dfd, name, 0);
  }
  free(data);
  close(dfd);
}

int lsb_jobs_kill(int dirfd) {
  return jobs_each(dirfd, SIGKILL);
}

int lsb_jobs_alive(int dirfd) {
  return jobs_each(dirfd, 0);
}
