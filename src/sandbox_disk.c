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
*/
#include "sandbox_local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define IMG "disk.img"

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
    if (mount(dev, disk, "ext4", MS_NOSUID | MS_NODEV, "") != 0) {
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
  char img[LSB_PATH_MAX], disk[LSB_PATH_MAX], exe[LSB_PATH_MAX], p[LSB_PATH_MAX];
  static const char *const dirs[] = {"workspace", "tmp", NULL};
  char *envp[] = {NULL};
  lsb_spawn_opts o;
  lsb_spawn sp;
  const char *stage;
  int fd, rc, st = 0, i;
  if (path_in(img, sizeof img, box, IMG) || path_in(disk, sizeof disk, box, "disk"))
    return -ENAMETOOLONG;
  if (lsb_find_exe("mkfs.ext4", "/usr/sbin:/sbin:/usr/bin:/bin", exe, sizeof exe))
    return -ENOENT;
  fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : -errno;   /* sparse */
  close(fd);
  if (rc) {
    snprintf(why, whysz, "cannot make %s of %llu bytes (%s)", img,
             (unsigned long long)bytes, strerror(-rc));
    return rc;
  }
  {
    char *argv[] = {exe, (char *)"-q", (char *)"-F", (char *)"-m", (char *)"0",
                    (char *)"-E", (char *)"lazy_itable_init=1,lazy_journal_init=1",
                    img, NULL};
    memset(&o, 0, sizeof o);
    o.path = exe;
    o.argv = argv;
    o.envp = envp;
    o.cgroup_fds[0] = o.cgroup_fds[1] = -1;
    rc = lsb_spawn_child(&o, &sp, &stage);
    if (!rc) {
      while (waitpid(sp.pid, &st, 0) < 0 && errno == EINTR) {}
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = -EIO;
    }
  }
  if (rc) {
    snprintf(why, whysz, "mkfs.ext4 failed on %s (%s)", img, strerror(-rc));
    return rc;
  }
  if (mkdir(disk, 0700) != 0 && errno != EEXIST) return -errno;
  /* the filesystem first, then its directories, then the binds */
  if ((rc = mount_all(box, 0, why, whysz)) != 0) return rc;
  for (i = 0; dirs[i]; i++) {
    path_in(p, sizeof p, disk, dirs[i]);
    if ((mkdir(p, 0700) != 0 && errno != EEXIST) || chown(p, uid, gid) != 0) {
      rc = -errno;
      snprintf(why, whysz, "cannot make %s (%s)", p, strerror(-rc));
      lsb_disk_release(box);
      return rc;
    }
  }
  /* lost+found is root's: out of the jail's way */
  path_in(p, sizeof p, disk, "lost+found");
  rmdir(p);
  rc = mount_all(box, 1, why, whysz);
  if (rc) lsb_disk_release(box);
  return rc;
}

int lsb_disk_ensure(int boxfd, const char *box, char *why, size_t whysz) {
  char disk[LSB_PATH_MAX], ws[LSB_PATH_MAX], tmp[LSB_PATH_MAX];
  if (faccessat(boxfd, IMG, F_OK, AT_SYMLINK_NOFOLLOW) != 0) return 0;
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
  return mount_all(box, 1, why, whysz);
}

void lsb_disk_release(const char *box) {
  static const char *const order[] = {"workspace", "tmp", "disk", NULL};
  char p[LSB_PATH_MAX];
  int i;
  for (i = 0; order[i]; i++) {
    if (path_in(p, sizeof p, box, order[i])) continue;
    if (is_mount_of(p, box)) umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW);
  }
}
