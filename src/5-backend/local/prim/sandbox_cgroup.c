/*
** sandbox_cgroup.c: the local backend's control group per sandbox. Finds
** a hierarchy lash may write -- cgroup v2 with the pids and memory
** controllers delegated (or $LASH_CGROUP_ROOT), else cgroup v1's pids and
** memory hierarchies -- makes one group per sandbox there with pids.max
** and memory.max (swap included where the controller counts it), lets a
** freshly forked child join it before it execs, kills whatever is left in
** it, and removes it. The group is recorded in the sandbox's directory
** (file "cgroup"), so every lash process that runs the sandbox's commands
** puts them in the same group, and one lost at a reboot is made again. As
** root each group is also listed in LSB_CGROUP_DIR with its sandbox's
** path, so that groups whose sandbox vanished without a destroy (its state
** root deleted) are found and removed when the next sandbox is made.
** Nothing else in the backend knows how cgroups are laid out.
*/
#include "sandbox_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CG_FILE "cgroup"

/* ---- small file helpers --------------------------------------------- */

static int write_str(const char *dir, const char *name, const char *s) {
  char p[LSB_PATH_MAX + 64];
  int fd, rc = 0;
  size_t n = strlen(s);
  if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
    return -ENAMETOOLONG;
  fd = open(p, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (write(fd, s, n) != (ssize_t)n) rc = -errno;
  close(fd);
  return rc;
}

static int write_u64(const char *dir, const char *name, uint64_t v) {
  char s[32];
  if (v == 0) snprintf(s, sizeof s, "max");
  else snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  return write_str(dir, name, s);
}

static int read_small(const char *path, char *buf, size_t sz) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n, got = 0;
  if (fd < 0) return -errno;
  while ((size_t)got < sz - 1 &&
         (n = read(fd, buf + got, sz - 1 - (size_t)got)) > 0)
    got += n;
  close(fd);
  buf[got] = '\0';
  return 0;
}

static int has_word(const char *list, const char *word, const char *seps) {
  size_t wl = strlen(word);
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, seps);
    if (n == wl && strncmp(p, word, wl) == 0) return 1;
    p += n;
    if (*p) p++;
  }
  return 0;
}

static int is_cgroupfs(const char *path, int version) {
  struct statfs sf;
  if (statfs(path, &sf) != 0) return 0;
  return version == 2 ? (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC
                      : (unsigned long)sf.f_type == CGROUP_SUPER_MAGIC;
}

/* ---- where lash is -------------------------------------------------- */

/* The mount point and mounted root of the first cgroup (v1: the one with
** controller ctrl) or cgroup2 (ctrl NULL) file system. */
static int find_mount(const char *ctrl, char *mnt, size_t mntsz, char *root,
                      size_t rootsz) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char line[4096];
  int found = 0;
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) {
    char r[LSB_PATH_MAX], mp[LSB_PATH_MAX], fstype[64], super[1024];
    const char *dash = strstr(line, " - ");
    /* most lines are not cgroups: skip them before any sscanf */
    if (!dash || strncmp(dash + 3, "cgroup", 6) != 0) continue;
    if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, mp) != 2) continue;
    super[0] = '\0';
    if (sscanf(dash + 3, "%63s %*s %1023s", fstype, super) < 1) continue;
    if (ctrl ? strcmp(fstype, "cgroup") != 0 || !has_word(super, ctrl, ",")
             : strcmp(fstype, "cgroup2") != 0)
      continue;
    snprintf(mnt, mntsz, "%s", mp);
    snprintf(root, rootsz, "%s", r);
    found = 1;
  }
  fclose(f);
  return found;
}

/* v1: the sandbox's freezer group (sandbox_freeze.c) lies at its pids
** group's path relative to the freezer hierarchy's mount. */
int lsb_cgroup_freezer_dir(const lsb_cgroup *cg, char *out, size_t outsz) {
  char pids[LSB_PATH_MAX], fr[LSB_PATH_MAX], root[LSB_PATH_MAX];
  size_t n;
  if (cg->version != 1 || !find_mount("pids", pids, sizeof pids, root, sizeof root) ||
      !find_mount("freezer", fr, sizeof fr, root, sizeof root))
    return -ENOENT;
  n = strlen(pids);
  if (strncmp(cg->dir[0], pids, n) != 0 || cg->dir[0][n] != '/') return -ENOENT;
  if ((size_t)snprintf(out, outsz, "%s%s", fr, cg->dir[0] + n) >= outsz)
    return -ENAMETOOLONG;
  return 0;
}

/* v1: a frozen process cannot die, so kill thaws its freezer group first,
** and removal removes it */
static void freezer_thaw(const lsb_cgroup *cg) {
  char fdir[LSB_PATH_MAX];
  if (lsb_cgroup_freezer_dir(cg, fdir, sizeof fdir) == 0)
    write_str(fdir, "freezer.state", "THAWED");
}

static void freezer_remove(const lsb_cgroup *cg) {
  char fdir[LSB_PATH_MAX];
  int tries;
  if (lsb_cgroup_freezer_dir(cg, fdir, sizeof fdir) != 0) return;
  for (tries = 0; tries < 100; tries++) {
    if (rmdir(fdir) == 0 || errno != EBUSY) return;
    usleep(10000);
  }
}

/* lash's own group in that hierarchy (from /proc/self/cgroup), relative
** to the mount's root. */
static int own_path(const char *ctrl, const char *mroot, char *out,
                    size_t outsz) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[4096];
  int found = 0;
  if (!f) return 0;
  while (!found && fgets(line, sizeof line, f)) {
    char *c1 = strchr(line, ':'), *c2, *nl;
    if (!c1 || !(c2 = strchr(c1 + 1, ':'))) continue;
    *c2 = '\0';
    if ((nl = strchr(c2 + 1, '\n'))) *nl = '\0';
    if (ctrl ? !has_word(c1 + 1, ctrl, ",") : (c1[1] != '\0' || line[0] != '0'))
      continue;
    {
      const char *p = c2 + 1;
      size_t rl = strlen(mroot);
      if (strcmp(mroot, "/") != 0 && strncmp(p, mroot, rl) == 0 &&
          (p[rl] == '/' || p[rl] == '\0'))
        p += rl;                         /* a bind of a subtree */
      snprintf(out, outsz, "%s", *p ? p : "/");
    }
    found = 1;
  }
  fclose(f);
  return found;
}

/* ---- v2 ------------------------------------------------------------- */

static int v2_enable(const char *dir) {
  char p[LSB_PATH_MAX + 64], have[512];
  snprintf(p, sizeof p, "%s/cgroup.subtree_control", dir);
  if (read_small(p, have, sizeof have) == 0 && has_word(have, "pids", " \n") &&
      has_word(have, "memory", " \n"))
    return 0;
  return write_str(dir, "cgroup.subtree_control", "+pids +memory");
}

/* The directory under which sandboxes' groups go, with pids and memory
** enabled for its children. */
static int v2_base(char *base, size_t basesz, char *why, size_t whysz) {
  char mnt[LSB_PATH_MAX], mroot[LSB_PATH_MAX], own[LSB_PATH_MAX];
  char p[2 * LSB_PATH_MAX + 64], ctl[512];
  int rc = -ENOENT;
  if (!find_mount(NULL, mnt, sizeof mnt, mroot, sizeof mroot)) {
    snprintf(why, whysz, "no cgroup v2 file system is mounted");
    return -ENOENT;
  }
  snprintf(p, sizeof p, "%s/cgroup.controllers", mnt);
  if (read_small(p, ctl, sizeof ctl) != 0 || !has_word(ctl, "pids", " \n") ||
      !has_word(ctl, "memory", " \n")) {
    snprintf(why, whysz, "cgroup v2 at %.300s offers no pids and memory "
             "controllers (they are bound to cgroup v1 or not enabled)", mnt);
    return -ENOTSUP;
  }
  if (!own_path(NULL, mroot, own, sizeof own)) strcpy(own, "/");
  /* lash's own group may hold processes (lash itself), so the sandboxes
  ** go beside it: the first ancestor that gives its children pids and
  ** memory, or can be made to (the root always can) */
  for (;;) {
    char *slash;
    int top = strcmp(own, "/") == 0;
    if (top) {
      snprintf(p, sizeof p, "%s", mnt);
    } else {
      slash = strrchr(own, '/');
      if (slash == own) strcpy(own, "/");
      else *slash = '\0';
      snprintf(p, sizeof p, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
    }
    if ((rc = v2_enable(p)) == 0) break;
    if (top) {
      snprintf(why, whysz, "cannot enable the pids and memory controllers "
               "for child groups under cgroup v2 at %.300s (%s)%s", p,
               strerror(-rc), rc == -EBUSY ? ": processes live in that "
               "group, and a cgroup v2 group with processes can have no "
               "children with controllers (no internal processes); run lash "
               "in a leaf group whose parent holds none (systemd-run --scope "
               "-p Delegate=yes; in a container, first move the processes of "
               "its root group into a leaf such as /init) or set "
               "LASH_CGROUP_ROOT to an empty group" : "");
      return rc;
    }
  }
  if ((size_t)snprintf(base, basesz, "%s/lash", p) >= basesz) return -ENAMETOOLONG;
  return 0;
}

/* ---- setup ---------------------------------------------------------- */

static int mkdir_ok(const char *p) {
  if (mkdir(p, 0755) == 0 || errno == EEXIST) return 0;
  return -errno;
}

static int apply_limits(const lsb_cgroup *cg, uint64_t pids, uint64_t memory) {
  int rc;
  if (cg->version == 2) {
    if ((rc = write_u64(cg->dir[0], "pids.max", pids)) != 0) return rc;
    if ((rc = write_u64(cg->dir[0], "memory.max", memory)) != 0) return rc;
    /* no swap beyond memory.max: swap is counted in the bound */
    rc = write_str(cg->dir[0], "memory.swap.max", memory ? "0" : "max");
    return rc == -ENOENT ? 0 : rc;
  }
  if ((rc = write_u64(cg->dir[0], "pids.max", pids)) != 0) return rc;
  {
    char s[32];
    /* v1 takes -1 for no limit, and memsw only at or above the limit */
    if (memory) snprintf(s, sizeof s, "%llu", (unsigned long long)memory);
    else snprintf(s, sizeof s, "-1");
    if (!memory) {
      rc = write_str(cg->dir[1], "memory.memsw.limit_in_bytes", s);
      if (rc && rc != -ENOENT) return rc;
    }
    if ((rc = write_str(cg->dir[1], "memory.limit_in_bytes", s)) != 0) return rc;
    if (memory) {
      rc = write_str(cg->dir[1], "memory.memsw.limit_in_bytes", s);
      if (rc && rc != -ENOENT) return rc;
    }
  }
  return 0;
}

/* mkdir each directory of the group; *failed: the one that would not */
static int make_groups(lsb_cgroup *cg, int *failed) {
  int i, rc;
  for (i = 0; i < (cg->version == 2 ? 1 : 2); i++)
    if ((rc = mkdir_ok(cg->dir[i])) != 0) {
      if (failed) *failed = i;
      return rc;
    }
  return 0;
}

int lsb_cgroup_setup(const char *id, uint64_t pids, uint64_t memory,
                     lsb_cgroup *cg, char *why, size_t whysz) {
  const char *env = getenv("LASH_CGROUP_ROOT");
  char base[LSB_PATH_MAX], v2why[1024];
  int rc;
  memset(cg, 0, sizeof *cg);
  why[0] = '\0';
  if (env && strcmp(env, "none") == 0) {
    snprintf(why, whysz, "cgroups are switched off (LASH_CGROUP_ROOT=none)");
    return -ENOTSUP;
  }
  if (env && *env) {
    if (!is_cgroupfs(env, 2)) {
      snprintf(why, whysz, "LASH_CGROUP_ROOT=%s is not a cgroup v2 directory",
               env);
      return -EINVAL;
    }
    if ((rc = v2_enable(env)) != 0) {
      snprintf(why, whysz, "cannot enable the pids and memory controllers in "
               "LASH_CGROUP_ROOT=%s (%s)%s", env, strerror(-rc),
               rc == -EBUSY ? ": that group holds processes, and a cgroup v2 "
               "group with processes cannot have children with controllers "
               "(no internal processes); give lash an empty group" :
               rc == -ENOENT ? ": its parent does not delegate them (add "
               "them to the parent's cgroup.subtree_control)" : "");
      return rc;
    }
    snprintf(base, sizeof base, "%s", env);
    cg->version = 2;
  } else if (v2_base(base, sizeof base, v2why, sizeof v2why) == 0) {
    if ((rc = mkdir_ok(base)) != 0 || (rc = v2_enable(base)) != 0) {
      snprintf(why, whysz, "cannot create %s with the pids and memory "
               "controllers (%s)", base, strerror(-rc));
      return rc;
    }
    cg->version = 2;
  } else {
    /* cgroup v1: one hierarchy per controller */
    static const char *const ctrls[2] = {"pids", "memory"};
    int i;
    for (i = 0; i < 2; i++) {
      char mnt[LSB_PATH_MAX], mroot[LSB_PATH_MAX], own[LSB_PATH_MAX];
      char b[3 * LSB_PATH_MAX];
      if (!find_mount(ctrls[i], mnt, sizeof mnt, mroot, sizeof mroot)) {
        snprintf(why, whysz, "%s; and no cgroup v1 %s hierarchy is mounted",
                 v2why, ctrls[i]);
        return -ENOTSUP;
      }
      if (!own_path(ctrls[i], mroot, own, sizeof own)) strcpy(own, "/");
      snprintf(b, sizeof b, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
      if (access(b, F_OK) != 0) snprintf(b, sizeof b, "%s", mnt);
      if (strlen(b) + 6 + LSB_ID_LEN >= LSB_PATH_MAX) return -ENAMETOOLONG;
      strcat(b, "/lash");
      if ((rc = mkdir_ok(b)) != 0) {
        snprintf(why, whysz, "%s; and cannot create %s in cgroup v1 (%s)",
                 v2why, b, strerror(-rc));
        return rc;
      }
      if (i == 1) write_str(b, "memory.use_hierarchy", "1");  /* old kernels */
      snprintf(cg->dir[i], sizeof cg->dir[i], "%s/%s", b, id);
    }
    cg->version = 1;
  }
  if (cg->version == 2 &&
      (size_t)snprintf(cg->dir[0], sizeof cg->dir[0], "%s/%s", base, id) >=
          sizeof cg->dir[0])
    return -ENAMETOOLONG;
  {
    int failed = 0;
    if ((rc = make_groups(cg, &failed)) != 0 ||
        (rc = apply_limits(cg, pids, memory)) != 0) {
      snprintf(why, whysz, "cannot set up the sandbox's cgroup %s (%s)",
               cg->dir[failed], strerror(-rc));
      lsb_cgroup_remove(cg);
      memset(cg, 0, sizeof *cg);
      return rc;
    }
  }
  return 0;
}

/* ---- the record in the box ------------------------------------------ */

/* A group lash made for sandbox id: in a cgroup file system, named id. */
static int valid(const lsb_cgroup *cg, const char *id) {
  int i, n = cg->version == 2 ? 1 : cg->version == 1 ? 2 : 0;
  if (!n) return 0;
  for (i = 0; i < n; i++) {
    const char *slash = strrchr(cg->dir[i], '/');
    char parent[LSB_PATH_MAX];
    if (!slash || strcmp(slash + 1, id) != 0 || strstr(cg->dir[i], "/../"))
      return 0;
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - cg->dir[i]),
             cg->dir[i]);
    /* its parent may be gone with a reboot: the nearest that exists must
    ** be in cgroupfs */
    while (access(parent, F_OK) != 0) {
      char *up = strrchr(parent, '/');
      if (!up || up == parent) return 0;
      *up = '\0';
    }
    if (!is_cgroupfs(parent, cg->version)) return 0;
  }
  return 1;
}

int lsb_cgroup_save(int boxfd, const lsb_cgroup *cg, uint64_t pids,
                    uint64_t memory) {
  char buf[3 * LSB_PATH_MAX];
  int n = snprintf(buf, sizeof buf, "%d\n%s\n%s\n%llu\n%llu\n", cg->version,
                   cg->dir[0], cg->dir[1], (unsigned long long)pids,
                   (unsigned long long)memory);
  /* unsynced: the groups it names do not survive a power cut either; a
  ** persisted sandbox's record is synced by persist */
  return lsb_write_unsynced(boxfd, CG_FILE, buf, (size_t)n, 0600);
}

int lsb_cgroup_load(int boxfd, const char *id, lsb_cgroup *cg, uint64_t *pids,
                    uint64_t *memory) {
  char *data = NULL, *p, *lines[5];
  size_t len;
  int i, rc = lsb_read_all(boxfd, CG_FILE, 3 * LSB_PATH_MAX, &data, &len);
  memset(cg, 0, sizeof *cg);
  if (rc) return rc;
  p = data;
  for (i = 0; i < 5; i++) {
    char *nl = strchr(p, '\n');
    if (!nl) {
      free(data);
      return -EINVAL;
    }
    *nl = '\0';
    lines[i] = p;
    p = nl + 1;
  }
  cg->version = atoi(lines[0]);
  snprintf(cg->dir[0], sizeof cg->dir[0], "%s", lines[1]);
  snprintf(cg->dir[1], sizeof cg->dir[1], "%s", lines[2]);
  if (pids) *pids = strtoull(lines[3], NULL, 10);
  if (memory) *memory = strtoull(lines[4], NULL, 10);
  free(data);
  if (!valid(cg, id)) {
    memset(cg, 0, sizeof *cg);
    return -EINVAL;
  }
  return 0;
}

/* ---- joining -------------------------------------------------------- */

/* Open cgroup.procs of each group of cg into fds. 0 or -errno. */
static int open_procs(const lsb_cgroup *cg, int n, int fds[2]) {
  int i, rc;
  for (i = 0; i < n; i++) {
    char p[LSB_PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/cgroup.procs", cg->dir[i]);
    fds[i] = open(p, O_WRONLY | O_CLOEXEC);
    if (fds[i] < 0) {
      rc = -errno;
      lsb_cgroup_close(fds);
      return rc;
    }
  }
  return 0;
}

int lsb_cgroup_open(const lsb_cgroup *cg, uint64_t pids, uint64_t memory,
                    int fds[2]) {
  int i, n = cg->version == 2 ? 1 : 2, rc;
  fds[0] = fds[1] = -1;
  if ((rc = open_procs(cg, n, fds)) != -ENOENT) return rc;
  /* gone since it was made (a reboot empties cgroupfs): make it again,
  ** with its parent ("lash") and, on v2, the controllers enabled there */
  for (i = 0; i < n; i++) {
    char parent[LSB_PATH_MAX];
    const char *slash = strrchr(cg->dir[i], '/');
    if (!slash) return -EINVAL;
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - cg->dir[i]),
             cg->dir[i]);
    if (access(parent, F_OK) != 0 && (rc = lash_mkdirs(parent, 0755)) != 0)
      return rc;
    if (cg->version == 2 && (rc = v2_enable(parent)) != 0) return rc;
  }
  if ((rc = make_groups((lsb_cgroup *)cg, NULL)) != 0 ||
      (rc = apply_limits(cg, pids, memory)) != 0)
    return rc;
  return open_procs(cg, n, fds);
}

void lsb_cgroup_close(int fds[2]) {
  int i;
  for (i = 0; i < 2; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
}

/* In the child, between fork and exec: only write(2). "0" is the writer. */
int lsb_cgroup_enter(const int fds[2]) {
  int i;
  for (i = 0; i < 2; i++)
    if (fds[i] >= 0 && write(fds[i], "0", 1) != 1) return -1;
  return 0;
}

/* ---- killing and removing ------------------------------------------- */

static int kill_listed(const char *dir) {
  char p[LSB_PATH_MAX + 32], buf[8192];
  char *s, *e;
  int n = 0;
  snprintf(p, sizeof p, "%s/cgroup.procs", dir);
  if (read_small(p, buf, sizeof buf) != 0) return 0;
  for (s = buf; *s; s = e) {
    long pid = strtol(s, &e, 10);
    if (e == s) break;
    if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0) n++;
    while (*e == '\n') e++;
  }
  return n;
}

int lsb_cgroup_kill(const lsb_cgroup *cg) {
  int i, round, n = cg->version == 2 ? 1 : cg->version == 1 ? 2 : 0, killed = 0;
  if (!n) return 0;
  /* no new processes, then kill until none is listed (a v1-frozen
  ** process cannot die: thawed first) */
  write_str(cg->dir[0], "pids.max", "0");
  if (cg->version == 1) freezer_thaw(cg);
  if (cg->version == 2) write_str(cg->dir[0], "cgroup.kill", "1");
  for (round = 0; round < 200; round++) {
    int k = 0;
    for (i = 0; i < n; i++) k += kill_listed(cg->dir[i]);
    killed += k;
    if (!k) break;
    usleep(5000);
  }
  return killed;
}

int lsb_cgroup_remove(const lsb_cgroup *cg) {
  int i, tries, n = cg->version == 2 ? 1 : cg->version == 1 ? 2 : 0, rc = 0;
  if (!n) return 0;
  lsb_cgroup_kill(cg);
  for (i = 0; i < n; i++) {
    if (!cg->dir[i][0]) continue;
    /* killed processes leave the group as they exit: a moment */
    for (tries = 0; tries < 100; tries++) {
      if (rmdir(cg->dir[i]) == 0 || errno == ENOENT) break;
      if (errno != EBUSY) break;
      lsb_cgroup_kill(cg);
      usleep(10000);
    }
    if (access(cg->dir[i], F_OK) == 0) rc = -EBUSY;
  }
  if (cg->version == 1) freezer_remove(cg);
  return rc;
}

int lsb_cgroup_remove_at(int boxfd, const char *id) {
  lsb_cgroup cg;
  int rc;
  if (lsb_cgroup_load(boxfd, id, &cg, NULL, NULL) != 0) return 0;
  rc = lsb_cgroup_remove(&cg);
  if (rc == 0) lsb_cgroup_unregister(id);
  return rc;
}

/* ---- the list of groups (as root) ----------------------------------- */

void lsb_cgroup_register(const char *id, const char *box) {
  char body[LSB_PATH_MAX + 2];
  int dfd, n;
  if (geteuid() != 0 || lash_mkdirs(LSB_CGROUP_DIR, 0700) != 0) return;
  dfd = open(LSB_CGROUP_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  n = snprintf(body, sizeof body, "%s\n", box);
  /* unsynced: after a power cut there is no group left to sweep */
  lsb_write_unsynced(dfd, id, body, (size_t)n, 0600);
  close(dfd);
}

void lsb_cgroup_unregister(const char *id) {
  char p[LSB_PATH_MAX];
  if (!lsb_id_valid(id)) return;
  snprintf(p, sizeof p, "%s/%s", LSB_CGROUP_DIR, id);
  unlink(p);
}

int lsb_cgroup_sweep(const lsb_cgroup *cg) {
  int i, n = cg->version == 2 ? 1 : cg->version == 1 ? 2 : 0, removed = 0;
  int dfd = open(LSB_CGROUP_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return 0;
  for (i = 0; i < n; i++) {
    char base[LSB_PATH_MAX];
    const char *slash = strrchr(cg->dir[i], '/');
    DIR *d;
    struct dirent *e;
    if (!slash) continue;
    snprintf(base, sizeof base, "%.*s", (int)(slash - cg->dir[i]), cg->dir[i]);
    if (!(d = opendir(base))) continue;
    while ((e = readdir(d)) != NULL) {
      lsb_cgroup one;
      if (!lsb_id_valid(e->d_name) || lsb_record_live(dfd, e->d_name)) continue;
      /* its sandbox is gone: what is left in the group, then the group */
      memset(&one, 0, sizeof one);
      one.version = 2;               /* one directory at a time */
      if (strlen(base) + 1 + strlen(e->d_name) >= sizeof one.dir[0]) continue;
      strcpy(one.dir[0], base);
      strcat(one.dir[0], "/");
      strcat(one.dir[0], e->d_name);
      if (lsb_cgroup_remove(&one) == 0) {
        removed++;
        if (i == n - 1) unlinkat(dfd, e->d_name, 0);
      }
    }
    closedir(d);
  }
  close(dfd);
  return removed;
}
