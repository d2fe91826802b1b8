/*
** sandbox_snapshot.c: snapshots of local sandboxes (what the `snapshot`
** slot of the local backend takes, and what `create{from_snapshot = ...}`
** starts from). A snapshot is a copy of a sandbox's workspace, taken with
** `cp -a --reflink=auto` (copy-on-write where the filesystem can, a plain
** copy elsewhere), kept under the state root as snapshots/<ls-id>, so it is
** masked from every jail as the sandboxes are. It is written under a
** temporary name and renamed into place, so a snapshot id always names a
** complete copy. Restoring copies it into a new sandbox's workspace and
** hands every file to that sandbox's uid. The copy runs as a child process
** waited for in place: it blocks the loop for as long as the copy takes.
*/
#include "sandbox_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

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

/* Run argv (absolute path first), wait for it; 0 when it exited 0. */
static int run(char *const argv[], char *err, size_t errsz) {
  pid_t pid;
  int st, rc;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) {
    snprintf(err, errsz, "cannot run %s: %s", argv[0], strerror(rc));
    return -1;
  }
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) {
      snprintf(err, errsz, "waiting for %s: %s", argv[0], strerror(errno));
      return -1;
    }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  snprintf(err, errsz, "%s %s %d (its message is on stderr)", argv[0],
           WIFEXITED(st) ? "exited" : "was killed by signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  return -1;
}

static int copy_tree(const char *from, const char *to, char *err, size_t errsz) {
  char src[2 * LSB_PATH_MAX], cp[] = "/bin/cp", a[] = "-a", reflink[] = "--reflink=auto";
  if ((size_t)snprintf(src, sizeof src, "%s/.", from) >= sizeof src) {
    snprintf(err, errsz, "path too long: %s", from);
    return -1;
  }
  char *const argv[] = { cp, a, reflink, src, (char *)to, NULL };
  return run(argv, err, errsz);
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
  if (copy_tree(path, workspace, err, errsz) != 0) return -EIO;
  if (geteuid() == 0) {
    char owner[64], chown[] = "/bin/chown", r[] = "-R", h[] = "-h";
    snprintf(owner, sizeof owner, "%d:%d", (int)uid, (int)gid);
    char *const argv[] = { chown, r, h, owner, (char *)workspace, NULL };
    if (run(argv, err, errsz) != 0) return -EIO;
  }
  return 0;
}

int lsb_snapshot_take(const char *root, const char *id, char snap[LSB_ID_LEN + 1],
                      char *err, size_t errsz) {
  char box[2 * LSB_PATH_MAX], ws[3 * LSB_PATH_MAX], dir[2 * LSB_PATH_MAX];
  char tmp[3 * LSB_PATH_MAX], dst[3 * LSB_PATH_MAX];
  struct stat st;
  lsb_box b;
  int rc;
  err[0] = 0;
  if (!lsb_id_valid(id)) return -EINVAL;
  snprintf(box, sizeof box, "%s/%s", root, id);
  snprintf(ws, sizeof ws, "%s/workspace", box);
  snprintf(dir, sizeof dir, "%s/%s", root, SNAP_DIR);
  if (lsb_box_open(root, id, 0, &b) != 0) return -ENOENT;
  if (stat(ws, &st) != 0) { lsb_box_close(&b); return -ENOENT; }
  if ((rc = lsb_id_new(snap)) != 0 || (rc = lash_mkdirs(dir, 0700)) != 0) {
    lsb_box_close(&b);
    snprintf(err, errsz, "cannot make a snapshot under %s: %s", dir, strerror(-rc));
    return rc;
  }
  memcpy(snap, SNAP_PREFIX, 3);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, snap);
  snprintf(dst, sizeof dst, "%s/%s", dir, snap);
  /* under the sandbox's shared lock: destroy and gc wait for the copy */
  if (mkdir(tmp, 0700) != 0) {
    rc = -errno;
    snprintf(err, errsz, "mkdir %s: %s", tmp, strerror(errno));
  } else if (copy_tree(ws, tmp, err, errsz) != 0) {
    rc = -EIO;
  } else if (rename(tmp, dst) != 0) {
    rc = -errno;
    snprintf(err, errsz, "rename to %s: %s", dst, strerror(errno));
  }
  lsb_box_close(&b);
  if (rc) lsb_rmtree_at(AT_FDCWD, tmp);
  return rc;
}
