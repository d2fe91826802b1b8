/*
** sandbox_disk.c: the local backend's disk quota per sandbox
** (limits.disk). The sandbox's writable directories live in a filesystem
** of their own: an ext4 image <box>/disk.img of the quota's size, on a
** loop device (auto-cleared), mounted at <box>/disk; its workspace/ and
** tmp/ are bound onto <box>/workspace and <box>/tmp, so the jail, the file
** operations and snapshots see the same paths as without a quota, and a
** write past the quota fails with ENOSPC inside the sandbox only. Mounts
** live in the host's mount namespace; one lost at a reboot is made again
** on the sandbox's next use. Root only (mount, loop devices).
**
** Every sandbox gets one by default where it can be made (lsb_disk_default);
** the default one is made lazily, at the sandbox's first use, so creating
** a sandbox stays as cheap as before; when it cannot be made then (no loop
** device left), the sandbox goes on without one, marked <box>/disk.off, and
** the caller warns. The image is sparse and mounted with discard, so it
** takes on the host only what the sandbox keeps; it is a copy of the state
** root's template of its size (sandbox_disk_template.c: mkfs once).
*/
#include "sandbox_disk.h"
#include "sandbox_jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define IMG "disk.img"
#define IMG_NEW "disk.img.new"    /* while it is copied: never mounted */
#define OFF "disk.off"            /* a default quota that could not be made */
#define LOCK "disk.lock"          /* serialises the lazy creation */
/* the default quota: 8 GiB (the per-file limit, file_size, is as large, so
** no file the sandbox could write anyway is refused), at most a quarter of
** what is free on the state root, so that one sandbox alone cannot fill
** it, rounded down to a power of two; never below the 16 MiB any quota
** needs */
#define DEFAULT_BYTES (8ull << 30)
#define MIN_BYTES (16ull << 20)
/* ext4's lazy inode-table initialisation would write the whole table (128
** MiB for 8 GiB) from a kernel thread after the first mount: off, the
** groups stay marked uninitialised, which ext4 handles; discard gives the
** host back what the sandbox deletes */
#define MOUNT_OPTS "noinit_itable,discard"

static int path_in(char *out, size_t sz, const char *box, const char *name) {
  size_t a = strlen(box), b = strlen(name);
  if (a + 1 + b >= sz) {
    out[0] = '\0';
    return -ENAMETOOLONG;
  }
  memcpy(out, box, a);
  out[a] = '/';
  memcpy(out + a + 1, name, b + 1);
  return 0;
}

uint64_t lsb_disk_default(const char *root) {
  struct statvfs sv;
  uint64_t b = DEFAULT_BYTES, quarter;
  char dir[LSB_PATH_MAX], *slash;
  int rc;
  /* the state root may not exist yet: its nearest existing ancestor */
  snprintf(dir, sizeof dir, "%s", root);
  while ((rc = statvfs(dir, &sv)) != 0 && (slash = strrchr(dir, '/')) != NULL && slash != dir)
    *slash = '\0';
  if (rc != 0) rc = statvfs("/", &sv);
  if (rc == 0) {
    quarter = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize / 4;
    if (quarter < b) b = quarter;
  }
  /* a power of two, so that sandboxes made while the free space drifts
  ** share one template (sandbox_disk_template.c) */
  while (b & (b - 1)) b &= b - 1;
  return b < MIN_BYTES ? MIN_BYTES : b;
}

int lsb_disk_usable(char *why, size_t whysz) {
  char exe[LSB_PATH_MAX];
  if (geteuid() != 0) {
    snprintf(why, whysz, "a filesystem of the sandbox's own needs root (mount "
             "and loop devices); lash runs as uid %d", (int)geteuid());
    return 0;
  }
  if (access("/dev/loop-control", R_OK | W_OK) != 0) {
    snprintf(why, whysz, "there are no loop devices here (/dev/loop-control: "
             "%s)", strerror(errno));
    return 0;
  }
  if (lsb_find_exe("mkfs.ext4", "/usr/sbin:/sbin:/usr/bin:/bin", exe,
                   sizeof exe) != 0) {
    snprintf(why, whysz, "mkfs.ext4 is not installed (Debian: e2fsprogs)");
    return 0;
  }
  return 1;
}

/* Attach img to a free loop device (auto-cleared on unmount); its path in
** dev. Returns the open loop fd or -errno. */
static int loop_attach(int imgfd, char *dev, size_t devsz) {
  int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), tries, rc = -EBUSY;
  if (ctl < 0) return -errno;
  for (tries = 0; tries < 16; tries++) {
    struct loop_config cfg;
    int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;
    if (n < 0) {
      rc = -errno;
      break;
    }
    snprintf(dev, devsz, "/dev/loop%d", n);
    fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      rc = -errno;
      break;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.fd = (unsigned)imgfd;
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
      close(ctl);
      return fd;
    }
    rc = -errno;
    if (errno == EINVAL || errno == ENOTTY) {
      /* before Linux 5.8: in two steps */
      struct loop_info64 info;
      if (ioctl(fd, LOOP_SET_FD, imgfd) == 0) {
        memset(&info, 0, sizeof info);
        info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(fd, LOOP_SET_STATUS64, &info) == 0) {
          close(ctl);
          return fd;
        }
        rc = -errno;
        ioctl(fd, LOOP_CLR_FD, 0);
        close(fd);
        break;
      }
      rc = -errno;
    }
    close(fd);
    if (rc != -EBUSY) break;          /* someone took it first: another */
  }
  close(ctl);
  return rc;
}

static int is_mount_of(const char *path, const char *parent) {
  struct stat a, b;
  return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Mount the image at <box>/disk and (binds) bind its directories; holds
** the image's lock so two processes cannot stack mounts. */
static int mount_all(const char *box, int binds, char *why, size_t whysz) {
  char img[LSB_PATH_MAX], disk[LSB_PATH_MAX], dev[64], src[LSB_PATH_MAX],
      dst[LSB_PATH_MAX];
  static const char *const dirs[] = {"workspace", "tmp", NULL};
  int imgfd, lockfd, loopfd, i, rc = 0;
  if (path_in(img, sizeof img, box, IMG) || path_in(disk, sizeof disk, box, "disk"))
    return -ENAMETOOLONG;
  /* the lock on an open of its own: the loop device keeps the one it is
  ** given open, and with it any lock taken through it */
  lockfd = open(img, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (lockfd < 0) return -errno;
  flock(lockfd, LOCK_EX);
  imgfd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (imgfd < 0) {
    rc = -errno;
    close(lockfd);
    return rc;
  }
  if (!is_mount_of(disk, box)) {
    loopfd = loop_attach(imgfd, dev, sizeof dev);
    if (loopfd < 0) {
      snprintf(why, whysz, "cannot attach %s to a loop device (%s)", img,
               strerror(-loopfd));
      rc = loopfd;
      goto out;
    }
    if (mount(dev, disk, "ext4", MS_NOSUID | MS_NODEV, MOUNT_OPTS) != 0) {
      rc = -errno;
      snprintf(why, whysz, "cannot mount %s at %s (%s)", dev, disk,
               strerror(errno));
      close(loopfd);
      goto out;
    }
    close(loopfd);                   /* auto-cleared once unmounted */
  }
  for (i = 0; binds && dirs[i]; i++) {
    path_in(src, sizeof src, disk, dirs[i]);
    path_in(dst, sizeof dst, box, dirs[i]);
    if (is_mount_of(dst, box)) continue;
    if (mount(src, dst, NULL, MS_BIND, NULL) != 0) {
      rc = -errno;
      snprintf(why, whysz, "cannot bind %s onto %s (%s)", src, dst,
               strerror(errno));
      goto out;
    }
  }
out:
  close(imgfd);
  close(lockfd);
  return rc;
}

int lsb_disk_create(const char *box, uint64_t bytes, uid_t uid, gid_t gid,
                    char *why, size_t whysz) {
  char img[LSB_PATH_MAX], disk[LSB_PATH_MAX], p[LSB_PATH_MAX], tmpimg[LSB_PATH_MAX],
      root[LSB_PATH_MAX], *slash;
  static const char *const dirs[] = {"workspace", "tmp", NULL};
  int rc, i;
  if (path_in(img, sizeof img, box, IMG) || path_in(disk, sizeof disk, box, "disk") ||
      path_in(tmpimg, sizeof tmpimg, box, IMG_NEW))
    return -ENAMETOOLONG;
  /* boxes live at <root>/<id>: the templates are the state root's */
  snprintf(root, sizeof root, "%s", box);
  if (!(slash = strrchr(root, '/'))) return -EINVAL;
  *slash = '\0';
  /* a copy of the template of that size (made by mkfs the first time),
  ** under another name and renamed once whole: an image a crash cut short
  ** is never mounted */
  rc = lsb_disk_image(root[0] ? root : "/", tmpimg, bytes, why, whysz);
  if (!rc && rename(tmpimg, img) != 0) {
    rc = -errno;
    snprintf(why, whysz, "cannot rename %s to %s (%s)", tmpimg, img, strerror(-rc));
    unlink(tmpimg);
  }
  if (rc) return rc;
  if (mkdir(disk, 0700) != 0 && errno != EEXIST) return -errno;
  /* the filesystem first, then its directories, then the binds */
  if ((rc = mount_all(box, 0, why, whysz)) != 0) return rc;
  /* the template has them as root's (sandbox_disk_template.c: lay_out) */
  for (i = 0; dirs[i]; i++) {
    int dfd = -1;
    path_in(p, sizeof p, disk, dirs[i]);
    /* no link followed: a directory, or the quota is refused */
    if ((mkdir(p, 0700) != 0 && errno != EEXIST) ||
        (dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        fchown(dfd, uid, gid) != 0 || fchmod(dfd, 0700) != 0) {
      rc = -errno;
      if (dfd >= 0) close(dfd);
      snprintf(why, whysz, "cannot make %s (%s)", p, strerror(-rc));
      lsb_disk_release(box);
      return rc;
    }
    close(dfd);
  }
  /* lost+found is root's: out of the jail's way (a template has none) */
  path_in(p, sizeof p, disk, "lost+found");
  rmdir(p);
  rc = mount_all(box, 1, why, whysz);
  if (rc) lsb_disk_release(box);
  return rc;
}

/* Has the box's directory name anything in it? (a default quota made
** later would hide it) */
static int dir_has_entries(int boxfd, const char *name) {
  int fd = openat(boxfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d;
  struct dirent *e;
  int any = 0;
  if (fd < 0) return 0;
  d = fdopendir(fd);
  if (!d) {
    close(fd);
    return 0;
  }
  while (!any && (e = readdir(d)) != NULL)
    any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return any;
}

/* The default quota, made at the sandbox's first use (under the box's
** disk lock: two processes may use it at once). 0 when made (or already
** there), 1 when it could not be and the box goes on without (disk.off
** written, *why says why: the caller warns), -errno on failure. */
static int make_lazily(int boxfd, const char *box, uint64_t bytes, uid_t uid,
                       gid_t gid, char *why, size_t whysz) {
  int lockfd, rc, fd;
  if (geteuid() != 0) {
    /* not marked: its first use as root makes it */
    snprintf(why, whysz, "its disk quota is made at its first use as root "
             "(lash runs as uid %d): until then it has none", (int)geteuid());
    return 1;
  }
  lockfd = openat(boxfd, LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lockfd < 0) return -errno;
  while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {}
  if (faccessat(boxfd, IMG, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    close(lockfd);                 /* another process made it meanwhile */
    return mount_all(box, 1, why, whysz);
  }
  if (faccessat(boxfd, OFF, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
    close(lockfd);
    return 0;
  }
  if (dir_has_entries(boxfd, "workspace") || dir_has_entries(boxfd, "tmp")) {
    rc = 1;
    snprintf(why, whysz, "its workspace already has files (a quota "
             "filesystem mounted now would hide them)");
  } else {
    why[0] = '\0';
    rc = lsb_disk_create(box, bytes, uid, gid, why, whysz);
    if (rc) {
      /* nothing of it stays: no mount, no loop device, no image */
      char img[LSB_PATH_MAX];
      lsb_disk_release(box);
      if (path_in(img, sizeof img, box, IMG) == 0) unlink(img);
      if (!why[0]) snprintf(why, whysz, "%s", strerror(-rc));
      rc = 1;
    }
  }
  if (rc == 1) {
    /* from now on it has none, for every process alike */
    fd = openat(boxfd, OFF, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (write(fd, why, strlen(why)) < 0) { /* the mark is what counts */ }
      close(fd);
    }
  }
  close(lockfd);
  return rc;
}

int lsb_disk_ensure(int boxfd, const char *box, uint64_t bytes, uid_t uid,
                    gid_t gid, char *why, size_t whysz) {
  char disk[LSB_PATH_MAX], ws[LSB_PATH_MAX], tmp[LSB_PATH_MAX];
  int lockfd, rc;
  if (faccessat(boxfd, IMG, F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
    if (!bytes || faccessat(boxfd, OFF, F_OK, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    return make_lazily(boxfd, box, bytes, uid, gid, why, whysz);
  }
  if (path_in(disk, sizeof disk, box, "disk") || path_in(ws, sizeof ws, box, "workspace") ||
      path_in(tmp, sizeof tmp, box, "tmp"))
    return -ENAMETOOLONG;
  if (is_mount_of(disk, box) && is_mount_of(ws, box) && is_mount_of(tmp, box))
    return 0;
  if (geteuid() != 0) {
    snprintf(why, whysz, "its disk quota's filesystem is not mounted (after a "
             "reboot?) and only root can mount it: run lash as root once");
    return -EPERM;
  }
  /* under the disk lock: another process's first use may be between
  ** renaming the image into place and making the directories to bind */
  lockfd = openat(boxfd, LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lockfd < 0) return -errno;
  while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR) {}
  rc = mount_all(box, 1, why, whysz);
  close(lockfd);
  return rc;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
  char *o = s;
  for (; *s; s++) {
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
        s[3] >= '0' && s[3] <= '7') {
      *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
      s += 3;
    } else {
      *o++ = *s;
    }
  }
  *o = '\0';
}

int lsb_disk_sweep(void) {
  FILE *f;
  char line[3 * LSB_PATH_MAX], mp[2 * LSB_PATH_MAX], box[2 * LSB_PATH_MAX];
  int n = 0;
  if (geteuid() != 0 || (f = fopen("/proc/self/mountinfo", "re")) == NULL) return 0;
  while (fgets(line, sizeof line, f)) {
    char *sep = strstr(line, " - "), *slash, *leaf, *id;
    char fmt[32];
    struct stat st;
    if (!sep || strncmp(sep + 3, "ext4 ", 5) != 0) continue;
    snprintf(fmt, sizeof fmt, "%%*s %%*s %%*s %%*s %%%ds", (int)sizeof mp - 1);
    if (sscanf(line, fmt, mp) != 1) continue;
    unescape(mp);
    /* <root>/<id>/{disk,workspace,tmp} */
    if (!(slash = strrchr(mp, '/'))) continue;
    leaf = slash + 1;
    if (strcmp(leaf, "disk") && strcmp(leaf, "workspace") && strcmp(leaf, "tmp")) continue;
    snprintf(box, sizeof box, "%.*s", (int)(slash - mp), mp);
    id = strrchr(box, '/');
    if (!id || !lsb_id_valid(id + 1)) continue;
    /* a live box has its metadata or (while being made) its image */
    if (path_in(line, sizeof line, box, "meta.json") == 0 && stat(line, &st) == 0) continue;
    if (path_in(line, sizeof line, box, IMG) == 0 && stat(line, &st) == 0) continue;
    if (umount2(mp, MNT_DETACH | UMOUNT_NOFOLLOW) == 0) n++;
  }
  fclose(f);
  return n;
}

/* ext4's (and XFS's) shutdown ioctl, not in the uapi headers as such */
#define FS_SHUTDOWN _IOR('X', 125, uint32_t)
#define FS_SHUTDOWN_NOLOGFLUSH 2u

void lsb_disk_release(const char *box) {
  static const char *const order[] = {"workspace", "tmp", "disk", NULL};
  char p[LSB_PATH_MAX];
  int i, fd;
  /* the filesystem goes with the box: shut down without flushing its
  ** journal or data first, so the unmount writes nothing (a commit would
  ** flush the loop device, an fsync of the image on the host), and
  ** anything still holding it gets EIO rather than writing on */
  if (path_in(p, sizeof p, box, "disk") == 0 && is_mount_of(p, box) &&
      (fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
    uint32_t how = FS_SHUTDOWN_NOLOGFLUSH;
    if (ioctl(fd, FS_SHUTDOWN, &how) != 0) { /* an old kernel: a plain unmount */ }
    close(fd);
  }
  for (i = 0; order[i]; i++) {
    if (path_in(p, sizeof p, box, order[i])) continue;
    if (is_mount_of(p, box)) umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW);
  }
}
