/*
** test_sandbox_local.c: the local sandbox backend's pure parts, without
** Lua and without bubblewrap: ids, path normalization, the state root,
** locked atomic metadata files, tree removal, the sandbox's view and path
** resolution (symlinks through the view, never onto the host), the file
** operations, the bwrap command line, spawning with closed fds and limits,
** job records, and the reservation of host uids.
*/
#include "t.h"
#include "sandbox_jail.h"
#include "sandbox_cgroup.h"
#include "sandbox_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[256];

static void sh(const char *fmt, const char *arg) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, fmt, arg, arg, arg, arg, arg, arg, arg, arg);
  if (system(cmd) != 0) printf("# command failed: %s\n", cmd);
}

static void test_ids(void) {
  char a[LSB_ID_LEN + 1], b[LSB_ID_LEN + 1];
  int i, ok = 1;
  T_EQ_INT(lsb_id_new(a), 0, "an id is made");
  T_EQ_INT(strlen(a), 23, "ids are lb- and 20 characters");
  T_OK(strncmp(a, "lb-", 3) == 0, "ids start with lb-");
  T_OK(lsb_id_valid(a), "a fresh id is valid");
  for (i = 0; i < 200; i++) {
    lsb_id_new(b);
    if (strcmp(a, b) == 0 || !lsb_id_valid(b)) ok = 0;
  }
  T_OK(ok, "200 more ids are valid and differ from the first");
  T_OK(!lsb_id_valid("lb-ABCDEFGHIJKLMNOPQRST"), "uppercase is refused");
  T_OK(!lsb_id_valid("lb-abcdefghijklmnopq01"), "0 and 1 are not base32");
  T_OK(!lsb_id_valid("lb-abcdefghijklmnopqrs"), "19 characters are refused");
  T_OK(!lsb_id_valid("../../etc/passwd"), "a path is refused");
  T_OK(!lsb_id_valid("sb-abcdefghijklmnopqrst"), "another prefix is refused");
  T_OK(!lsb_id_valid(NULL), "NULL is refused");
}

static void test_paths(void) {
  char out[LSB_PATH_MAX];
  struct { const char *in, *want; } cases[] = {
    {"/", "/"}, {"//", "/"}, {"/a//b/./c/../d", "/a/b/d"}, {"/..", "/"},
    {"/../../etc/passwd", "/etc/passwd"}, {"/a/b/", "/a/b"},
    {"/workspace/../../../etc/shadow", "/etc/shadow"}, {"/a/./.", "/a"},
    {"/a/b/../../..", "/"}, {"/a/..b/c", "/a/..b/c"},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc = lash_sandbox_path_normalize(cases[i].in, out, sizeof out);
    T_OK(rc == 0 && strcmp(out, cases[i].want) == 0, "normalize %s -> %s (%s)",
         cases[i].in, cases[i].want, rc == 0 ? out : "error");
  }
  T_EQ_INT(lash_sandbox_path_normalize("rel/x", out, sizeof out), -EINVAL,
           "a relative path is refused");
  T_EQ_INT(lash_sandbox_path_normalize("/abcdef", out, 4), -ENAMETOOLONG,
           "a path longer than the buffer is refused");
  T_OK(lash_sandbox_path_join("/workspace", "pkg/a.py", out, sizeof out) == 0 &&
       strcmp(out, "/workspace/pkg/a.py") == 0, "join relative");
  T_OK(lash_sandbox_path_join("/workspace", "../../x", out, sizeof out) == 0 &&
       strcmp(out, "/x") == 0, "join with .. stays under /");
  T_OK(lash_sandbox_path_join("/workspace", "/etc/x", out, sizeof out) == 0 &&
       strcmp(out, "/etc/x") == 0, "join with an absolute path takes it");
  T_OK(lsb_path_under("/a/b", "/a"), "/a/b is under /a");
  T_OK(lsb_path_under("/a", "/a"), "/a is under /a");
  T_OK(!lsb_path_under("/ab", "/a"), "/ab is not under /a");
  T_OK(lsb_path_under("/x", "/"), "everything is under /");
}

static void test_state_root(void) {
  char out[LSB_PATH_MAX];
  setenv("LASH_SANDBOX_ROOT", "/srv/x/../sb", 1);
  T_OK(lsb_state_root(NULL, out, sizeof out) == 0 && strcmp(out, "/srv/sb") == 0,
       "LASH_SANDBOX_ROOT is used, normalized");
  T_OK(lsb_state_root("/opt/s", out, sizeof out) == 0 && strcmp(out, "/opt/s") == 0,
       "a configured root wins over the environment");
  unsetenv("LASH_SANDBOX_ROOT");
  if (geteuid() != 0) {
    setenv("XDG_STATE_HOME", "/home/u/.st", 1);
    T_OK(lsb_state_root(NULL, out, sizeof out) == 0 &&
         strcmp(out, "/home/u/.st/lash/sandboxes") == 0, "XDG_STATE_HOME");
  } else {
    T_OK(lsb_state_root(NULL, out, sizeof out) == 0 &&
         strcmp(out, "/var/lib/lash/sandboxes") == 0,
         "as root: /var/lib/lash/sandboxes (searchable by the jail's uid)");
  }
  lsb_state_dir("/var/lib/lash/sandboxes", out, sizeof out);
  T_EQ_STR(out, "/var/lib/lash", "lash's state dir is the parent of sandboxes");
  lsb_state_dir("/custom/root", out, sizeof out);
  T_EQ_STR(out, "/custom/root", "a custom root is its own state dir");
}

static int count_entries(const char *dir) {
  char cmd[4096];
  FILE *p;
  int n = -1;
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  p = popen(cmd, "r");
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
  }
  return n;
}

static void test_boxes(void) {
  char root[512], path[600], id[LSB_ID_LEN + 1];
  lsb_box b = LSB_BOX_INIT, c = LSB_BOX_INIT;
  char *data;
  size_t len;
  pid_t pid;
  int st;
  snprintf(root, sizeof root, "%s/state", base);
  T_EQ_INT(lash_mkdirs(root, 0711), 0, "mkdirs makes the state root");
  T_EQ_INT(lash_mkdirs(root, 0711), 0, "mkdirs again is fine");
  lsb_id_new(id);
  T_EQ_INT(lsb_box_open(root, id, 0, &b), -ENOENT, "a missing sandbox is ENOENT");
  T_EQ_INT(lsb_box_open(root, "../x", 0, &b), -EINVAL, "a bad id is EINVAL");
  T_EQ_INT(lsb_box_create(root, id, &b), 0, "create a box");
  T_EQ_INT(lsb_box_create(root, id, &c), -EEXIST, "the same id twice is EEXIST");
  T_EQ_INT(lsb_write_atomic(b.dirfd, "meta.json", "{\"a\":1}", 7, 0600), 0,
           "atomic write");
  snprintf(path, sizeof path, "%s/%s", root, id);
  T_EQ_INT(count_entries(path), 2, "no temporary file is left behind");
  /* the creator holds the lock exclusively: a reader elsewhere waits */
  pid = fork();
  if (pid == 0) {
    int fd = open(strcat(path, "/lock"), O_RDWR);
    _exit(flock(fd, LOCK_SH | LOCK_NB) == 0 ? 0 : errno == EWOULDBLOCK ? 3 : 4);
  }
  waitpid(pid, &st, 0);
  T_EQ_INT(WEXITSTATUS(st), 3, "an exclusive lock keeps readers out");
  lsb_box_close(&b);
  lsb_box_close(&b);
  T_EQ_INT(lsb_box_open(root, id, 0, &b), 0, "open the box shared");
  T_EQ_INT(lsb_box_open(root, id, 0, &c), 0, "two shared openers at once");
  T_EQ_INT(lsb_read_all(b.dirfd, "meta.json", 100, &data, &len), 0, "read back");
  T_EQ_MEM(data, len, "{\"a\":1}", 7, "the bytes written");
  free(data);
  T_EQ_INT(lsb_read_all(b.dirfd, "meta.json", 3, &data, &len), -EFBIG,
           "more than max is EFBIG");
  lsb_box_close(&c);
  lsb_box_close(&b);
  /* destroy renames the directory away: openers see it gone */
  snprintf(path, sizeof path, "%s/%s", root, id);
  {
    char moved[700];
    snprintf(moved, sizeof moved, "%s/.trash-%s", root, id);
    rename(path, moved);
    T_EQ_INT(lsb_box_open(root, id, 0, &b), -ENOENT, "a renamed box is gone");
    T_EQ_INT(lsb_rmtree_at(AT_FDCWD, moved), 0, "rmtree the trash");
  }
  /* rmtree does not follow symlinks, and handles unreadable directories */
  snprintf(path, sizeof path, "%s/tree", base);
  sh("mkdir -p %s/a/b %s/keep && echo x > %s/keep/f && ln -s %s/keep %s/a/link",
     path);
  {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a/locked/in && chmod 000 %s/a/locked/in "
             "%s/a/locked && ln -s %s/keep %s/a/link2", path, path, path, path, path);
    if (system(cmd) != 0) printf("# setup failed\n");
    snprintf(cmd, sizeof cmd, "%s/a", path);
    T_EQ_INT(lsb_rmtree_at(AT_FDCWD, cmd), 0, "rmtree of a tree with links and a 000 dir");
    T_OK(access(cmd, F_OK) != 0, "the tree is gone");
    snprintf(cmd, sizeof cmd, "%s/keep/f", path);
    T_OK(access(cmd, F_OK) == 0, "what the symlinks pointed to is untouched");
  }
  T_EQ_INT(lsb_rmtree_at(AT_FDCWD, "/nonexistent/lash/x"), 0, "rmtree of nothing is fine");
}

/* A fake rootfs and a box, for the view tests. */
static char rootfs[300], box[300], state[300];

static void make_fixture(void) {
  snprintf(rootfs, sizeof rootfs, "%s/rootfs", base);
  snprintf(box, sizeof box, "%s/st/lb-aaaaaaaaaaaaaaaaaaaa", base);
  snprintf(state, sizeof state, "%s/st", base);
  sh("mkdir -p %s/etc %s/usr/bin %s/proc %s/dev", rootfs);
  sh("echo 'root:x:0:0' > %s/etc/passwd && echo secret > %s/etc/hostname && "
     "ln -s /etc/passwd %s/etc/abs-link && ln -s usr/bin %s/bin", rootfs);
  sh("mkdir -p %s/workspace/d %s/tmp && echo real > %s/workspace/real", box);
  sh("cd %s/workspace && ln -s ../../../../../../etc/passwd esc && "
     "ln -s /workspace/real abs && ln -s loop2 loop1 && ln -s loop1 loop2 && "
     "ln -s /proc/1/root p1 && ln -s real/x notdir && mkfifo fifo", box);
}

static void test_view(void) {
  lsb_view *v = calloc(1, sizeof *v);
  lsb_layout lay = {box, rootfs, "/workspace", state, 0};
  lsb_res *r = calloc(1, sizeof *r);
  lsb_mount *m;
  int e, i, denies = 0;
  T_EQ_INT(lsb_view_build(v, &lay), 0, "build the view");
  for (i = 0; i < v->n; i++) denies += v->m[i].kind == LSB_MNT_DENY;
  /* and the kernel's key lists in /proc, where the kernel has them */
  T_EQ_INT(denies, access("/proc/keys", F_OK) == 0 ? 5 : 3,
           "a custom rootfs gets /proc /dev /sys (and /proc/keys, /proc/key-users) denied, no host masks");
  m = lsb_view_lookup(v, "/workspace/x/y");
  T_OK(m && m->kind == LSB_MNT_RW && strcmp(m->view, "/workspace") == 0,
       "the workspace is read-write at the workdir");
  m = lsb_view_lookup(v, "/tmp/x");
  T_OK(m && m->kind == LSB_MNT_RW && strcmp(m->view, "/tmp") == 0,
       "/tmp is the sandbox's own, read-write");
  m = lsb_view_lookup(v, "/usr/bin/sh");
  T_OK(m && m->kind == LSB_MNT_RO && strcmp(m->view, "/") == 0, "the rest is the rootfs, read-only");
  T_OK(lsb_view_lookup(v, "/workspaces") == m, "/workspaces is not the workspace");
  T_EQ_INT(lsb_view_open(v), 0, "open the view's directories");

  T_EQ_INT(lsb_resolve(v, "/workspace/real", 1, 0, r, &e), LSB_OK, "a plain file");
  T_OK(strcmp(r->rel, "real") == 0 && r->mount->kind == LSB_MNT_RW, "  in the workspace");
  T_EQ_INT(lsb_resolve(v, "/workspace/esc", 1, 0, r, &e), LSB_OK,
           "a ../ symlink climbing out of the workspace");
  T_OK(strcmp(r->view, "/etc/passwd") == 0 && strcmp(r->mount->view, "/") == 0 &&
       strcmp(r->rel, "etc/passwd") == 0,
       "  lands on the sandbox's /etc/passwd (the rootfs), not the host's");
  T_EQ_INT(lsb_resolve(v, "/workspace/abs", 1, 0, r, &e), LSB_OK,
           "an absolute symlink");
  T_OK(strcmp(r->view, "/workspace/real") == 0, "  restarts at the sandbox's /");
  T_EQ_INT(lsb_resolve(v, "/etc/abs-link", 1, 0, r, &e), LSB_OK,
           "an absolute symlink inside the rootfs");
  T_OK(strcmp(r->rel, "etc/passwd") == 0, "  stays in the rootfs");
  T_EQ_INT(lsb_resolve(v, "/bin/sh", 1, 1, r, &e), LSB_OK, "/bin -> usr/bin");
  T_OK(strcmp(r->view, "/usr/bin/sh") == 0 && r->missing, "  followed, sh missing");
  T_EQ_INT(lsb_resolve(v, "/workspace/loop1", 1, 0, r, &e), LSB_E_LOOP, "a symlink loop");
  T_EQ_INT(lsb_resolve(v, "/workspace/p1/etc/hostname", 1, 0, r, &e), LSB_E_DENIED,
           "/proc/1/root is not followed");
  T_EQ_INT(lsb_resolve(v, "/proc/self/environ", 1, 0, r, &e), LSB_E_DENIED, "/proc is denied");
  T_EQ_INT(lsb_resolve(v, "/dev/null", 1, 0, r, &e), LSB_E_DENIED, "/dev is denied");
  T_EQ_INT(lsb_resolve(v, "/workspace/nope", 1, 0, r, &e), LSB_E_NOTFOUND, "missing");
  T_EQ_INT(lsb_resolve(v, "/workspace/real/x", 1, 0, r, &e), LSB_E_NOTDIR,
           "a file used as a directory");
  T_EQ_INT(lsb_resolve(v, "/workspace/new/dir/f", 1, 1, r, &e), LSB_OK,
           "missing components, allowed");
  T_OK(r->missing && strcmp(r->view + r->missing_at, "new/dir/f") == 0,
       "  reports where the missing part starts");
  T_EQ_INT(lsb_resolve(v, "/workspace/new/../f", 1, 1, r, &e), LSB_E_NOTFOUND,
           "a .. after a missing directory fails, as the kernel's would");
  T_EQ_INT(lsb_resolve(v, "/", 1, 0, r, &e), LSB_OK, "the root");
  T_OK(strcmp(r->rel, ".") == 0, "  is the rootfs itself");
  lsb_view_close(v);
  free(v);
  free(r);
}

static void test_host_view(void) {
  lsb_view *v = calloc(1, sizeof *v);
  char st2[300];
  lsb_layout lay = {box, "/", "/home/agent/project", st2, 0};
  lsb_res *r = calloc(1, sizeof *r);
  lsb_mount *m;
  int e;
  snprintf(st2, sizeof st2, "%s/st", base);
  T_EQ_INT(lsb_view_build(v, &lay), 0, "build a view over the host's root");
  m = lsb_view_lookup(v, "/etc/shadow");
  T_OK(m && m->kind == LSB_MNT_DENY && m->how == LSB_HOW_DEVNULL, "/etc/shadow is masked");
  m = lsb_view_lookup(v, "/root/.ssh/id_rsa");
  T_OK(m && m->kind == LSB_MNT_DENY && m->how == LSB_HOW_TMPFS, "/root is masked");
  m = lsb_view_lookup(v, "/home/other/.bashrc");
  T_OK(m && m->kind == LSB_MNT_DENY, "/home is masked");
  m = lsb_view_lookup(v, "/home/agent/project/x");
  T_OK(m && m->kind == LSB_MNT_RW, "but a workdir under /home is the workspace");
  T_EQ_INT(lsb_view_open(v), 0, "open it");
  T_EQ_INT(lsb_resolve(v, "/home/agent", 1, 0, r, &e), LSB_OK,
           "the way to the workdir through a mask");
  T_OK(r->synthetic, "  is a directory the jail makes");
  T_EQ_INT(lsb_resolve(v, "/home/other", 1, 0, r, &e), LSB_E_DENIED,
           "anything else under the mask is denied");
  T_EQ_INT(lsb_resolve(v, "/etc/shadow", 1, 0, r, &e), LSB_E_DENIED, "so is /etc/shadow");
  lsb_view_close(v);
  free(v);
  free(r);
}

/* Run op in-process (the helper's work without the fork) and read the
** reply from a pipe. */
static int run_op(lsb_view *v, lsb_fileop *op, lsb_reply *rep, char *payload,
                  size_t cap, size_t *plen) {
  int p[2], rc;
  ssize_t n;
  size_t got = 0;
  char *buf = malloc(cap + sizeof *rep);
  if (pipe(p) != 0) return -1;
  /* a child writes, so that a reply bigger than the pipe cannot block */
  if (fork() == 0) {
    close(p[0]);
    _exit(lsb_fileop_child(v, op, p[1]));
  }
  close(p[1]);
  while ((n = read(p[0], buf + got, cap + sizeof *rep - got)) > 0) got += (size_t)n;
  close(p[0]);
  wait(&rc);
  memcpy(rep, buf, sizeof *rep);
  *plen = got > sizeof *rep ? got - sizeof *rep : 0;
  if (*plen) memcpy(payload, buf + sizeof *rep, *plen);
  free(buf);
  return WEXITSTATUS(rc);
}

static void test_fileops(void) {
  lsb_view *v = calloc(1, sizeof *v);
  lsb_layout lay = {box, rootfs, "/workspace", state, 0};
  lsb_fileop op;
  lsb_reply rep;
  char buf[4096];
  size_t n;
  lsb_view_build(v, &lay);
  lsb_view_open(v);
  memset(&op, 0, sizeof op);
  op.op = LSB_OP_WRITE;
  op.path = "/workspace/pkg/sub/a.py";
  op.data = "print(1)\n";
  op.len = 9;
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_OK(rep.status == LSB_OK && rep.a == 9, "write creates parents (%d)", rep.status);
  op.op = LSB_OP_READ;
  op.max_bytes = 100;
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_EQ_MEM(buf, n, "print(1)\n", 9, "read it back");
  op.max_bytes = 4;
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_OK(rep.status == LSB_E_TOOLARGE && rep.a == 9 && rep.b == 4,
       "over max_bytes: refused with the size, before reading");
  op.path = "/workspace/fifo";
  op.max_bytes = 100;
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_EQ_INT(rep.status, LSB_E_NOTREG, "a FIFO is refused, not waited on");
  op.op = LSB_OP_WRITE;
  op.path = "/etc/newfile";
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_EQ_INT(rep.status, LSB_E_READONLY, "writing to the rootfs is refused");
  op.path = "/workspace/esc";           /* -> the rootfs's /etc/passwd */
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_EQ_INT(rep.status, LSB_E_READONLY, "writing through a climbing symlink too");
  op.path = "/workspace/real/x/y";
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_EQ_INT(rep.status, LSB_E_NOTDIR, "a parent that is a file");
  op.op = LSB_OP_STAT;
  op.path = "/workspace/pkg/sub/a.py";
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  T_OK(rep.status == LSB_OK && rep.kind == 'f' && rep.a == 9 && rep.mode == 0644,
       "stat: a file of 9 bytes, 0644");
  op.op = LSB_OP_LIST;
  op.path = "/";
  run_op(v, &op, &rep, buf, sizeof buf, &n);
  {
    int has_ws = 0, has_etc = 0, has_bin = 0;
    size_t off = 0;
    while (off < n) {
      char kind = buf[off];
      const char *name = buf + off + 1;
      if (strcmp(name, "workspace") == 0 && kind == 'd') has_ws = 1;
      if (strcmp(name, "etc") == 0 && kind == 'd') has_etc = 1;
      if (strcmp(name, "bin") == 0 && kind == 'l') has_bin = 1;
      off += strlen(name) + 2;
    }
    T_OK(rep.status == LSB_OK && has_ws && has_etc && has_bin,
         "list / shows the rootfs and the workspace mount point");
  }
  lsb_view_close(v);
  free(v);
}

static int has_seq(const lsb_argv *a, const char *x, const char *y,
                   const char *z) {
  size_t i;
  for (i = 0; i < a->n; i++)
    if (strcmp(a->v[i], x) == 0 && (!y || (i + 1 < a->n && strcmp(a->v[i + 1], y) == 0)) &&
        (!z || (i + 2 < a->n && strcmp(a->v[i + 2], z) == 0)))
      return (int)i + 1;
  return 0;
}

static void test_jail_argv(void) {
  lsb_view *v = calloc(1, sizeof *v);
  lsb_layout lay = {box, rootfs, "/workspace", state, 0};
  const char *env[] = {"PATH=/usr/bin", "HOME=/workspace", NULL};
  const char *argv[] = {"sh", "-c", "echo hi", NULL};
  lsb_jail j;
  lsb_argv a;
  char src[400], ws[400];
  int usr, bind, ro;
  lsb_view_build(v, &lay);
  memset(&j, 0, sizeof j);
  j.bwrap = "/usr/bin/bwrap";
  j.view = v;
  j.cwd = "/workspace";
  j.env = env;
  j.disable_userns = 1;
  lsb_argv_init(&a);
  T_EQ_INT(lsb_jail_argv(&j, argv, &a), 0, "build the command line");
  T_EQ_STR(a.v[0], "/usr/bin/bwrap", "bwrap first");
  T_OK(has_seq(&a, "--unshare-user", NULL, NULL) && has_seq(&a, "--unshare-pid", NULL, NULL) &&
       has_seq(&a, "--unshare-ipc", NULL, NULL) && has_seq(&a, "--unshare-uts", NULL, NULL),
       "new user, pid, ipc and uts namespaces");
  T_OK(has_seq(&a, "--unshare-net", NULL, NULL), "network off: a new network namespace");
  T_OK(has_seq(&a, "--disable-userns", NULL, NULL), "no nested user namespaces");
  T_OK(has_seq(&a, "--die-with-parent", NULL, NULL) && has_seq(&a, "--new-session", NULL, NULL),
       "dies with its parent, in a new session");
  snprintf(src, sizeof src, "%s/usr", rootfs);
  usr = has_seq(&a, "--ro-bind", src, "/usr");
  T_OK(usr, "the rootfs's entries bound read-only");
  T_OK(has_seq(&a, "--symlink", "usr/bin", "/bin"), "its symlinks recreated");
  T_OK(!has_seq(&a, "--ro-bind", NULL, "/proc") && has_seq(&a, "--proc", "/proc", NULL),
       "a fresh /proc");
  T_OK(has_seq(&a, "--dev", "/dev", NULL), "a private /dev");
  snprintf(ws, sizeof ws, "%s/workspace", box);
  bind = has_seq(&a, "--bind", ws, "/workspace");
  T_OK(bind > usr, "the workspace bound read-write at the workdir, after the rootfs");
  snprintf(ws, sizeof ws, "%s/tmp", box);
  T_OK(has_seq(&a, "--bind", ws, "/tmp"), "the sandbox's own /tmp");
  ro = has_seq(&a, "--remount-ro", "/", NULL);
  T_OK(ro > bind, "the root remounted read-only after every mount");
  T_OK(has_seq(&a, "--chdir", "/workspace", NULL) > ro, "starts in the cwd");
  T_OK(has_seq(&a, "--clearenv", NULL, NULL) && has_seq(&a, "--setenv", "PATH", "/usr/bin") &&
       has_seq(&a, "--setenv", "HOME", "/workspace"), "cleared environment plus env");
  T_OK(strcmp(a.v[a.n - 4], "--") == 0 && strcmp(a.v[a.n - 1], "echo hi") == 0,
       "the command after --");
  lsb_argv_free(&a);
  j.network = 1;
  lsb_argv_init(&a);
  lsb_jail_argv(&j, NULL, &a);
  T_OK(!has_seq(&a, "--unshare-net", NULL, NULL), "network on: the host's network");
  T_OK(!has_seq(&a, "--", NULL, NULL), "without argv, the options only (for --args)");
  lsb_argv_free(&a);
  free(v);
}

static void read_all_fd(int fd, char *buf, size_t cap) {
  size_t got = 0;
  ssize_t n;
  fcntl(fd, F_SETFL, 0);
  while (got + 1 < cap && (n = read(fd, buf + got, cap - 1 - got)) > 0) got += (size_t)n;
  buf[got] = '\0';
}

static void test_spawn(void) {
  static char sh_[] = "/bin/sh", c_[] = "-c", nope_[] = "/nonexistent/prog",
      script_[] = "ls /proc/self/fd | tr '\\n' ' '; ulimit -n; ulimit -c",
      path_[] = "PATH=/usr/bin:/bin";
  char *argv[] = {sh_, c_, script_, NULL};
  char *envp[] = {path_, NULL};
  lsb_spawn_opts o;
  lsb_spawn sp;
  lsb_limits lim = {0, 0, 77, 0, 0, 0, 0, 0};
  const char *stage;
  char out[512], exe[256];
  int st, leak = open("/dev/null", O_RDONLY);   /* not close-on-exec */
  memset(&o, 0, sizeof o);
  o.path = "/bin/sh";
  o.argv = argv;
  o.envp = envp;
  o.outputs = 2;
  o.limits = &lim;
  T_EQ_INT(lsb_spawn_child(&o, &sp, &stage), 0, "spawn a child");
  read_all_fd(sp.out_fd, out, sizeof out);
  close(sp.out_fd);
  close(sp.err_fd);
  waitpid(sp.pid, &st, 0);
  T_EQ_STR(out, "0 1 2 3 77\n0\n", "only stdin/out/err (3 is ls's own dir), limits applied");
  close(leak);
  argv[0] = nope_;
  o.path = argv[0];
  T_EQ_INT(lsb_spawn_child(&o, &sp, &stage), -ENOENT, "a missing program fails in the parent");
  T_EQ_STR(stage, "exec", "  at exec");
  o.path = "/bin/sh";
  argv[0] = sh_;
  o.chdir = "/nonexistent-dir";
  T_EQ_INT(lsb_spawn_child(&o, &sp, &stage), -ENOENT, "a missing cwd fails");
  T_EQ_STR(stage, "chdir", "  at chdir");
  T_EQ_INT(lsb_find_exe("sh", "/nonexistent:/bin:/usr/bin", exe, sizeof exe), 0, "find sh on PATH");
  T_OK(strcmp(exe, "/bin/sh") == 0, "  /bin/sh");
  T_EQ_INT(lsb_find_exe("no-such-program-lash", "/bin", exe, sizeof exe), -ENOENT,
           "an unknown program");
  T_OK(lsb_traversable("/usr/bin", 65534, 65534, exe, sizeof exe), "/usr/bin is searchable by nobody");
  {
    char p[400];
    snprintf(p, sizeof p, "%s/closed/inner", base);
    sh("mkdir -p %s && chmod 700 %s/..", p);
    T_OK(!lsb_traversable(p, 65534, 65534, exe, sizeof exe), "a 0700 directory is not");
    snprintf(p, sizeof p, "%s/closed", base);
    T_EQ_STR(exe, p, "  and it is named");
  }
}

static void test_jobs(void) {
  char root[400], id[LSB_ID_LEN + 1], name[64];
  lsb_box b = LSB_BOX_INIT;
  pid_t pid;
  int st;
  snprintf(root, sizeof root, "%s/jobs", base);
  lash_mkdirs(root, 0711);
  lsb_id_new(id);
  lsb_box_create(root, id, &b);
  pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  usleep(20000);
  T_OK(lsb_proc_starttime(pid) > 0, "a running process has a start time");
  T_EQ_INT(lsb_job_add(b.dirfd, pid, name, sizeof name), 0, "record a job");
  T_EQ_INT(lsb_jobs_kill(b.dirfd), 1, "destroy's kill finds it");
  waitpid(pid, &st, 0);
  T_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "and SIGKILLs it");
  T_EQ_INT(lsb_jobs_kill(b.dirfd), 0, "a dead job (recycled pid guard) is left alone");
  lsb_job_remove(b.dirfd, name);
  lsb_box_close(&b);
}

typedef struct seq {
  const uint32_t *v;
  int i;
} seq;

static uint32_t seq_next(void *ud) {
  seq *q = ud;
  return q->v[q->i] ? q->v[q->i++] : 0;
}

static void test_uids(void) {
  char dir[400], box1[400], box2[400], box3[400], path[480];
  uint32_t u1 = LSB_UID_BASE + 11, u2 = LSB_UID_BASE + 12,
           u3 = LSB_UID_BASE + 13, u4 = LSB_UID_BASE + 14;
  uint32_t first[] = {u1, 0}, second[] = {65534, u1, u2, 0}, third[] = {u1, 0},
           none_left[] = {u2, 0}, busy[] = {u3, u4, 0};
  seq q;
  uid_t got = 0;
  struct stat st;
  snprintf(dir, sizeof dir, "%s/uids", base);
  snprintf(box1, sizeof box1, "%s/box1", base);
  snprintf(box2, sizeof box2, "%s/box2", base);
  snprintf(box3, sizeof box3, "%s/box3", base);
  mkdir(box1, 0700);
  mkdir(box2, 0700);
  mkdir(box3, 0700);
  q.v = first, q.i = 0;
  T_EQ_INT(lsb_uid_reserve(dir, box1, seq_next, &q, &got), 0, "a free uid is reserved");
  T_EQ_INT(got, u1, "the first candidate");
  q.v = second, q.i = 0;
  T_EQ_INT(lsb_uid_reserve(dir, box2, seq_next, &q, &got), 0, "a second sandbox gets one");
  T_EQ_INT(got, u2, "skipping a host account (65534) and the live sandbox's uid");
  q.v = none_left, q.i = 0;
  T_EQ_INT(lsb_uid_reserve(dir, box3, seq_next, &q, &got), -EAGAIN,
           "no free candidate: refused, never shared");
  rmdir(box1);
  q.v = third, q.i = 0;
  T_EQ_INT(lsb_uid_reserve(dir, box3, seq_next, &q, &got), 0,
           "the uid of a sandbox that is gone is taken over");
  T_EQ_INT(got, u1, "that uid");
  lsb_uid_release(dir, u2, box3);
  snprintf(path, sizeof path, "%s/%u", dir, (unsigned)u2);
  T_OK(stat(path, &st) == 0, "release leaves another sandbox's reservation");
  lsb_uid_release(dir, u2, box2);
  T_OK(stat(path, &st) != 0, "and drops its own");
  if (geteuid() == 0) {
    int p[2], stw;
    char c;
    pid_t pid;
    if (pipe(p) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(p[0]);
      if (setresgid(u3, u3, u3) != 0 || setresuid(u3, u3, u3) != 0) _exit(1);
      if (write(p[1], "x", 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    close(p[1]);
    if (read(p[0], &c, 1) != 1) c = 0;
    close(p[0]);
    q.v = busy, q.i = 0;
    T_EQ_INT(lsb_uid_reserve(dir, box2, seq_next, &q, &got), 0, "with a process running as a candidate uid");
    T_EQ_INT(got, u4, "that uid is skipped");
    kill(pid, SIGKILL);
    waitpid(pid, &stw, 0);
  } else {
    T_OK(1, "# SKIP a uid in use by a process: needs root to take one");
  }
}

int main(void) {
  char tmpl[] = "/tmp/lash-sbtest-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  chmod(tmpl, 0711);
  snprintf(base, sizeof base, "%s", tmpl);
  test_ids();
  test_paths();
  test_state_root();
  test_boxes();
  make_fixture();
  test_view();
  test_host_view();
  test_fileops();
  test_jail_argv();
  test_spawn();
  test_jobs();
  test_uids();
  sh("chmod -R u+rwx %s; rm -rf %s", base);
  return T_DONE();
}
