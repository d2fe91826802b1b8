/*
** sandbox_disk_template.c: the disk quota's filesystem images, made by
** mkfs once per state root and size rather than once per sandbox. mkfs.ext4
** costs a sandbox tens of milliseconds (a process, some 1,400 writes) for
** an image whose data is a few MiB; so the first image of a size is made
** as a template, <root>/.disk-templates/ext4-v1-<bytes>.img, and every
** sandbox's image is a sparse copy of it: a reflink (FICLONE) where the
** filesystem has them, else its data extents (SEEK_DATA/SEEK_HOLE) copied
** in the kernel (copy_file_range), holes kept; its directories are laid out
** in the template too (lay_out). A template is made under
** the directory's lock, written to a temporary name, synced and renamed,
** so a half-made one is never copied; one that fails the sanity check (an
** ext4 superblock of its size, checksum good) is made again. The images
** share the template's UUID: ext4 allows that, and nothing in lash keys on
** it. At most TEMPLATES_MAX are kept (the least recently used goes); gc
** removes those unused for TEMPLATE_STALE and any temporary left behind.
*/
#include "sandbox_disk.h"
#include "sandbox_jail.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TDIR ".disk-templates"
#define TLOCK "lock"
/* the mkfs options are part of a template's name: changing them means a
** new version, and the old templates age out through gc */
#define TPREFIX "ext4-v1-"
#define TSUFFIX ".img"
#define TNEW ".new"
#define TEMPLATES_MAX 4
#define TEMPLATE_STALE (24 * 3600)
#define TEMPLATE_TOUCH 3600            /* a use is recorded to the hour */

static int tpath(char *out, size_t sz, const char *root, const char *name) {
  int n = snprintf(out, sz, "%s/" TDIR "%s%s", root, name ? "/" : "", name ? name : "");
  return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

/* crc32c (Castagnoli, reflected), as ext4's metadata_csum uses it */
static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t n) {
  int k;
  while (n--) {
    crc ^= *p++;
    for (k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return crc;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Is fd a whole template of bytes? A regular file of that size holding an
** ext4 superblock, clean, of about that many blocks (mkfs may leave out a
** last group too small to use), its checksum good. */
static int template_sane(int fd, uint64_t bytes) {
  unsigned char sb[1024];
  struct stat st;
  uint64_t blocks, bsize, group;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes)
    return 0;
  if (pread(fd, sb, sizeof sb, 1024) != (ssize_t)sizeof sb) return 0;
  if (sb[0x38] != 0x53 || sb[0x39] != 0xEF) return 0;        /* s_magic */
  if (!(sb[0x3A] & 1)) return 0;                               /* s_state: clean */
  if (le32(sb + 0x18) > 6) return 0;                           /* s_log_block_size */
  bsize = 1024ull << le32(sb + 0x18);
  blocks = le32(sb + 0x04) | (uint64_t)le32(sb + 0x150) << 32;
  group = (uint64_t)le32(sb + 0x20) * bsize;                   /* s_blocks_per_group */
  if (!blocks || blocks * bsize > bytes || bytes - blocks * bsize >= group + bsize)
    return 0;
  if ((le32(sb + 0x64) & 0x400) &&                             /* metadata_csum */
      crc32c(~0u, sb, 0x3FC) != le32(sb + 0x3FC))
    return 0;
  return 1;
}

/* Run argv[0] (an absolute path) to its end, input (or nothing) on its
** stdin, its output dropped. 0 when it exited 0, else -EIO or -errno. */
static int run(char *const *argv, const char *input) {
  char *envp[] = {NULL};
  lsb_spawn_opts o;
  lsb_spawn sp;
  const char *stage;
  int rc, st = 0;
  memset(&o, 0, sizeof o);
  o.path = argv[0];
  o.argv = argv;
  o.envp = envp;
  o.want_stdin = input != NULL;
  o.cgroup_fds[0] = o.cgroup_fds[1] = -1;
  if ((rc = lsb_spawn_child(&o, &sp, &stage)) != 0) return rc;
  if (sp.in_fd >= 0) {
    /* a few lines: the pipe holds them */
    size_t n = strlen(input);
    if (write(sp.in_fd, input, n) != (ssize_t)n) rc = -EIO;
    close(sp.in_fd);
  }
  while (waitpid(sp.pid, &st, 0) < 0 && errno == EINTR) {}
  if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) rc = -EIO;
  return rc;
}

/* mkfs.ext4 on path (a sparse file of bytes made here). */
static int run_mkfs(const char *path, uint64_t bytes, char *why, size_t whysz) {
  char exe[LSB_PATH_MAX];
  int fd, rc;
  if (lsb_find_exe("mkfs.ext4", "/usr/sbin:/sbin:/usr/bin:/bin", exe, sizeof exe)) {
    snprintf(why, whysz, "mkfs.ext4 is not installed (Debian: e2fsprogs)");
    return -ENOENT;
  }
  unlink(path);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot make %s (%s)", path, strerror(-rc));
    return rc;
  }
  rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : -errno;       /* sparse */
  close(fd);
  if (rc) {
    snprintf(why, whysz, "cannot make %s of %llu bytes (%s)", path,
             (unsigned long long)bytes, strerror(-rc));
    return rc;
  }
  {
    /* no reserved blocks; the inode tables and journal are not zeroed
    ** (see MOUNT_OPTS); no blocks reserved for growing the filesystem
    ** online (resize_inode: 4 MiB of an 8 GiB image, all of its data but
    ** 200 KiB, which every copy would carry) as nothing resizes it */
    char *argv[] = {exe, (char *)"-q", (char *)"-F", (char *)"-m", (char *)"0",
                    (char *)"-O", (char *)"^resize_inode",
                    (char *)"-E", (char *)"lazy_itable_init=1,lazy_journal_init=1",
                    (char *)path, NULL};
    rc = run(argv, NULL);
  }
  if (rc) snprintf(why, whysz, "mkfs.ext4 failed on %s (%s)", path, strerror(-rc));
  return rc;
}

/* Lay out the fresh filesystem in path as every sandbox wants it, once
** rather than at each first mount (where it costs a sandbox a millisecond
** or two): its workspace/ and tmp/ made, lost+found gone. The sandbox
** gives them their owner and mode, and makes any that are missing, so a
** template without them (no debugfs) still serves. 0, or -errno when
** debugfs failed part way (the template is then made again without). */
static int lay_out(const char *path) {
  char exe[LSB_PATH_MAX];
  char *argv[] = {exe, (char *)"-w", (char *)"-f", (char *)"-", (char *)path, NULL};
  if (lsb_find_exe("debugfs", "/usr/sbin:/sbin:/usr/bin:/bin", exe, sizeof exe))
    return 0;
  return run(argv, "rmdir lost+found\nmkdir workspace\nmkdir tmp\n");
}

/* Keep at most TEMPLATES_MAX templates (under the lock): the least
** recently used go, never keep (the one just made). stale > 0: also those
** unused for that many seconds, and temporaries. Returns how many went. */
static int prune(int dfd, const char *keep, time_t stale) {
  const int limit = TEMPLATES_MAX - (keep != NULL);   /* besides keep */
  DIR *d;
  struct dirent *e;
  char names[TEMPLATES_MAX + 1][64];
  time_t when[TEMPLATES_MAX + 1];
  int n = 0, gone = 0, i, old;
  int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
  time_t now = time(NULL);
  if (dup < 0 || !(d = fdopendir(dup))) {
    if (dup >= 0) close(dup);
    return 0;
  }
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, TPREFIX, sizeof TPREFIX - 1) != 0 || len >= sizeof names[0])
      continue;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (len > sizeof TNEW - 1 && strcmp(e->d_name + len - (sizeof TNEW - 1), TNEW) == 0) {
      /* under the lock no mkfs runs: a temporary is a crash's */
      if (stale > 0 && unlinkat(dfd, e->d_name, 0) == 0) gone++;
      continue;
    }
    if (keep && strcmp(e->d_name, keep) == 0) continue;
    if (stale > 0 && now - st.st_mtime > stale) {
      if (unlinkat(dfd, e->d_name, 0) == 0) gone++;
      continue;
    }
    /* the newest limit of the others stay; past it the oldest goes */
    snprintf(names[n], sizeof names[n], "%s", e->d_name);
    when[n++] = st.st_mtime;
    if (n > limit) {
      for (old = 0, i = 1; i < n; i++)
        if (when[i] < when[old]) old = i;
      if (unlinkat(dfd, names[old], 0) == 0) gone++;
      n--;
      memmove(names[old], names[n], sizeof names[0]);
      when[old] = when[n];
    }
  }
  closedir(d);
  return gone;
}

/* An open template of bytes under root, made when missing or not sane.
** Returns the fd or -errno with *why. */
static int template_open(const char *root, uint64_t bytes, char *why, size_t whysz) {
  char dir[LSB_PATH_MAX], name[48], tmp[64], path[LSB_PATH_MAX];
  int dfd, lockfd, fd, rc;
  if (tpath(dir, sizeof dir, root, NULL)) return -ENAMETOOLONG;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    rc = -errno;
    snprintf(why, whysz, "cannot make %s (%s)", dir, strerror(-rc));
    return rc;
  }
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot open %s (%s)", dir, strerror(-rc));
    return rc;
  }
  snprintf(name, sizeof name, TPREFIX "%llu" TSUFFIX, (unsigned long long)bytes);
  snprintf(tmp, sizeof tmp, "%s" TNEW, name);
  lockfd = openat(dfd, TLOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lockfd < 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot open %s/" TLOCK " (%s)", dir, strerror(-rc));
    close(dfd);
    return rc;
  }
  while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {}
  fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && template_sane(fd, bytes)) {
    /* its last use, for pruning, to the hour: a write to the host's
    ** journal per sandbox would cost more than the rest of the copy */
    struct stat st;
    if (fstat(fd, &st) == 0 && time(NULL) - st.st_mtime > TEMPLATE_TOUCH)
      futimens(fd, NULL);
    goto out;
  }
  if (fd >= 0) close(fd);
  /* make it: mkfs on a temporary, synced, then renamed into place, so no
  ** process copies a half-made one, even after a crash */
  tpath(path, sizeof path, root, tmp);
  rc = run_mkfs(path, bytes, why, whysz);
  if (!rc && lay_out(path) != 0) rc = run_mkfs(path, bytes, why, whysz);
  fd = rc ? rc : openat(dfd, tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && !rc) {
    rc = fd = -errno;
    snprintf(why, whysz, "cannot open %s (%s)", path, strerror(-rc));
  }
  if (fd >= 0 && fsync(fd) != 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot sync %s (%s)", path, strerror(-rc));
    close(fd);
    fd = rc;
  }
  if (fd >= 0 && !template_sane(fd, bytes)) {
    snprintf(why, whysz, "mkfs.ext4 made no usable filesystem in %s", path);
    close(fd);
    fd = -EIO;
  }
  if (fd >= 0 && renameat(dfd, tmp, dfd, name) != 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot rename %s into place (%s)", path, strerror(-rc));
    close(fd);
    fd = rc;
  }
  if (fd < 0) unlinkat(dfd, tmp, 0);
  else prune(dfd, name, 0);
out:
  close(lockfd);
  close(dfd);
  return fd;
}

/* Is buf all zeros? */
static int zeros(const char *buf, size_t n) {
  return n == 0 || (buf[0] == 0 && memcmp(buf, buf + 1, n - 1) == 0);
}

/* Copy the data of in (of bytes) into the empty out, holes kept. Where
** the filesystem cannot tell holes (SEEK_DATA then calls it all data:
** more than the file has blocks for), the copy reads and leaves out the
** zeros itself rather than write gigabytes of them. */
static int copy_sparse(int in, int out, uint64_t bytes) {
  char buf[16384];
  struct stat st;
  off_t off = 0, s, e, alloc;
  int plain = 0;
  if (ioctl(out, FICLONE, in) == 0) return 0;      /* a reflink: no copy */
  if (fstat(in, &st) != 0 || ftruncate(out, (off_t)bytes) != 0) return -errno;
  alloc = (off_t)st.st_blocks * 512;
  while ((s = lseek(in, off, SEEK_DATA)) >= 0) {
    loff_t i = s, o = s;
    if ((e = lseek(in, s, SEEK_HOLE)) < 0) return -errno;
    if (e - s > alloc) plain = 1;      /* no holes seen: sieve by hand */
    while (i < e) {
      ssize_t n;
      if (!plain) {
        n = copy_file_range(in, &i, out, &o, (size_t)(e - i), 0);
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP ||
                      errno == EINVAL)) {
          plain = 1;                   /* no in-kernel copy here: by hand */
          continue;
        }
      } else {
        size_t want = (size_t)(e - i) < sizeof buf ? (size_t)(e - i) : sizeof buf;
        n = pread(in, buf, want, i);
        if (n > 0 && !zeros(buf, (size_t)n) && pwrite(out, buf, (size_t)n, o) != n)
          n = -1;
        if (n > 0) {
          i += n;
          o += n;
        }
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return -errno;
      if (n == 0) return -EIO;         /* the template changed under us */
    }
    off = e;
  }
  return errno == ENXIO ? 0 : -errno;   /* ENXIO: no data past off */
}

int lsb_disk_image(const char *root, const char *dst, uint64_t bytes, char *why,
                   size_t whysz) {
  int tfd, fd, rc;
  char tname[LSB_PATH_MAX];
  tfd = template_open(root, bytes, why, whysz);
  if (tfd < 0) return tfd;
  unlink(dst);
  fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot make %s (%s)", dst, strerror(-rc));
    close(tfd);
    return rc;
  }
  errno = 0;
  rc = copy_sparse(tfd, fd, bytes);
  if (close(fd) != 0 && !rc) rc = -errno;
  close(tfd);
  if (rc) {
    unlink(dst);
    snprintf(tname, sizeof tname, "%s/" TDIR "/" TPREFIX "%llu" TSUFFIX, root,
             (unsigned long long)bytes);
    snprintf(why, whysz, "cannot copy the disk template %s to %s (%s)", tname, dst,
             strerror(-rc));
  }
  return rc;
}

int lsb_disk_templates_gc(const char *root) {
  char dir[LSB_PATH_MAX];
  int dfd, lockfd, n;
  if (tpath(dir, sizeof dir, root, NULL)) return 0;
  dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return 0;
  lockfd = openat(dfd, TLOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lockfd < 0) {
    close(dfd);
    return 0;
  }
  while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {}
  n = prune(dfd, NULL, TEMPLATE_STALE);
  close(lockfd);
  close(dfd);
  return n;
}
