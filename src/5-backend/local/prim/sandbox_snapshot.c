/*
** sandbox_snapshot.c: snapshots of local sandboxes (what the `snapshot`
** slot of the local backend takes, and what `create{from_snapshot = ...}`
** starts from). A snapshot is a copy of a sandbox's workspace kept under the state
** root as snapshots/<ls-id>, so it is masked from every jail as the
** sandboxes are. The workspace belongs to the sandbox and its commands may
** still run, so the copy is taken with the sandbox frozen (the cgroup
** freezer, where it has a group) and through descriptors that never follow
** a link the sandbox wrote (sandbox_copy.c): a directory swapped for a
** symlink to a host directory mid-copy is skipped, never entered. It is
** written under a temporary name and renamed into place, so a snapshot id
** always names a complete copy. Restoring copies it the same way into a new
** sandbox's workspace, every file given to that sandbox's uid. The copy runs
** in place: it blocks the loop for as long as it takes.
*/
#include "sandbox_snapshot.h"
#include "sandbox_copy.h"
#include "sandbox_freeze.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_DIR "snapshots"
#define SNAP_PREFIX "ls-"

/* Is s a snapshot id: "ls-" and the random part of a sandbox id? */
int lsb_snapshot_id_valid(const char *s) {
  char as_box[LSB_ID_LEN + 1];
  if (!s || strncmp(s, SNAP_PREFIX, 3) != 0 || strlen(s) != LSB_ID_LEN) return 0;
  memcpy(as_box, LSB_ID_PREFIX, 3);
  memcpy(as_box + 3, s + 3, LSB_ID_LEN - 3 + 1);
  return lsb_id_valid(as_box);
}

/* Open a directory: a host path of lash's own (AT_FDCWD), or a name
** beneath a sandbox's directory, no link followed either way. */
static int open_dir(int dirfd, const char *path) {
  if (dirfd == AT_FDCWD) return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return lsb_open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
}

/* Copy the directory from into the directory to (both opened here, no
** link followed), with uid:gid or the source's owners. */
static int copy_tree(int fromdir, const char *from, int todir, const char *to,
                     uid_t uid, gid_t gid, char *err, size_t errsz) {
  char why[LSB_PATH_MAX + 128];
  int in, out, rc;
  in = open_dir(fromdir, from);
  if (in < 0) {
    snprintf(err, errsz, "cannot open %s: %s", from, strerror(errno));
    return -errno;
  }
  out = open_dir(todir, to);
  if (out < 0) {
    rc = -errno;
    snprintf(err, errsz, "cannot open %s: %s", to, strerror(errno));
    close(in);
    return rc;
  }
  rc = lsb_copy_tree(in, out, uid, gid, NULL, why, sizeof why);
  if (rc) snprintf(err, errsz, "%s", why);
  close(in);
  close(out);
  return rc;
}

int lsb_snapshot_path(const char *root, const char *snap, char *out, size_t outsz) {
  if (!lsb_snapshot_id_valid(snap)) return -EINVAL;
  if ((size_t)snprintf(out, outsz, "%s/%s/%s", root, SNAP_DIR, snap) >= outsz)
    return -ENAMETOOLONG;
  return 0;
}

int lsb_snapshot_restore(const char *root, const char *snap, const char *workspace,
                         uid_t uid, gid_t gid, char *err, size_t errsz) {
  char path[LSB_PATH_MAX];
  struct stat st;
  if (lsb_snapshot_path(root, snap, path, sizeof path) != 0 || stat(path, &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    snprintf(err, errsz, "no snapshot %s under %s", snap, root);
    return -ENOENT;
  }
  return copy_tree(AT_FDCWD, path, AT_FDCWD, workspace, uid, gid, err, errsz) ? -EIO : 0;
}

int lsb_snapshot_drop(const char *root, const char *snap, char *err, size_t errsz) {
  char path[LSB_PATH_MAX], aside[LSB_PATH_MAX + 16];
  int rc;
  err[0] = 0;
  if ((rc = lsb_snapshot_path(root, snap, path, sizeof path)) != 0) return rc;
  snprintf(aside, sizeof aside, "%s/%s/.drop-%s", root, SNAP_DIR, snap);
  if (rename(path, aside) != 0) {
    if (errno == ENOENT) return 0;
    rc = -errno;
    snprintf(err, errsz, "rename %s: %s", path, strerror(errno));
    return rc;
  }
  if ((rc = lsb_rmtree_at(AT_FDCWD, aside)) != 0)
    snprintf(err, errsz, "cannot remove %s: %s", aside, strerror(rc < 0 ? -rc : rc));
  return rc;
}

int lsb_snapshot_take(const char *root, const char *id, char snap[LSB_ID_LEN + 1],
                      char *err, size_t errsz, char *warn, size_t warnsz) {
  char dir[2 * LSB_PATH_MAX], tmp[3 * LSB_PATH_MAX], dst[3 * LSB_PATH_MAX];
  char why[LSB_PATH_MAX + 128];
  struct stat st;
  lsb_box b;
  lsb_cgroup cg;
  lsb_frozen fz = LSB_FROZEN_INIT;
  int rc, frozen = 0;
  err[0] = warn[0] = 0;
  if (!lsb_id_valid(id)) return -ENOENT;
  snprintf(dir, sizeof dir, "%s/%s", root, SNAP_DIR);
  if (lsb_box_open(root, id, 0, &b) != 0) b.dirfd = -1;
  else if (fstatat(b.dirfd, "workspace", &st, AT_SYMLINK_NOFOLLOW) != 0 ||
           !S_ISDIR(st.st_mode)) {
    lsb_box_close(&b);
    b.dirfd = -1;
  }
  if (b.dirfd < 0) return -ENOENT;
  if ((rc = lsb_id_new(snap)) != 0 || (rc = lash_mkdirs(dir, 0700)) != 0) {
    lsb_box_close(&b);
    snprintf(err, errsz, "cannot make a snapshot under %s: %s", dir, strerror(-rc));
    return rc;
  }
  memcpy(snap, SNAP_PREFIX, 3);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, snap);
  snprintf(dst, sizeof dst, "%s/%s", dir, snap);
  /* under the sandbox's shared lock: destroy and gc wait for the copy;
  ** its processes held still, so the copy is one moment of the workspace */
  if (lsb_cgroup_load(b.dirfd, id, &cg, NULL, NULL) == 0 &&
      (frozen = lsb_freeze(&cg, &fz, why, sizeof why)) < 0)
    snprintf(warn, warnsz, "the snapshot is taken with its commands running: %s", why);
  if (mkdir(tmp, 0700) != 0) {
    rc = -errno;
    snprintf(err, errsz, "mkdir %s: %s", tmp, strerror(errno));
  } else if (copy_tree(b.dirfd, "workspace", AT_FDCWD, tmp, LSB_COPY_KEEP_OWNER,
                       (gid_t)-1, err, errsz) != 0) {
    rc = -EIO;
  } else if (rename(tmp, dst) != 0) {
    rc = -errno;
    snprintf(err, errsz, "rename to %s: %s", dst, strerror(errno));
  }
  if (frozen > 0) lsb_thaw(&fz);
  lsb_box_close(&b);
  if (rc) lsb_rmtree_at(AT_FDCWD, tmp);
  return rc;
}
