/*
** sandbox_bare.c: the "bare bwrap" side of bench_sandbox.sh. Builds the
** very command line lash's local backend uses for an existing sandbox
** (same view, same masks, same options: lsb_view_build + lsb_jail_argv from
** liblash_internal.a), then runs `bwrap <that> -- CMD...` N times with plain
** fork/exec (taking the sandbox's own uid/gid first when run as root, as
** the jail does; no pipes, no limits, no loop) and prints the median and
** p90 wall time per run in milliseconds. BWRAP "-" runs CMD itself, with
** no jail at all: the bare fork/exec floor.
**
** usage: sandbox_bare N STATE_ROOT ID WORKDIR BWRAP CMD [ARGS...]
*/
#include "sandbox_jail.h"
#include "sandbox_cgroup.h"
#include "sandbox_disk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int n, i, root = geteuid() == 0, du, bare;
  uid_t uid = 65534;
  gid_t gid = 65534;
  struct stat st;
  char box[4096];
  lsb_view *v;
  lsb_layout lay;
  lsb_jail j;
  lsb_argv a;
  const char *env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       NULL, NULL};
  char home[4200];
  double *t;
  if (argc < 7) {
    fprintf(stderr, "usage: sandbox_bare N STATE_ROOT ID WORKDIR BWRAP CMD...\n");
    return 2;
  }
  n = atoi(argv[1]);
  snprintf(box, sizeof box, "%s/%s/workspace", argv[2], argv[3]);
  /* as root each sandbox has a host uid of its own: its workspace's owner */
  if (stat(box, &st) == 0 && st.st_uid != 0) {
    uid = st.st_uid;
    gid = st.st_gid;
  }
  snprintf(box, sizeof box, "%s/%s", argv[2], argv[3]);
  bare = strcmp(argv[5], "-") == 0;
  snprintf(home, sizeof home, "HOME=%s", argv[4]);
  env[1] = home;
  v = calloc(1, sizeof *v);
  t = calloc((size_t)n, sizeof *t);
  lay.box = box;
  lay.rootfs = "/";
  lay.workdir = argv[4];
  lay.state_root = argv[2];
  lay.isolation_none = 0;
  if (!v || !t || lsb_view_build(v, &lay) != 0) return 1;
  du = getenv("BARE_NO_DISABLE_USERNS") == NULL;
  memset(&j, 0, sizeof j);
  j.bwrap = argv[5];
  j.view = v;
  j.cwd = argv[4];
  j.disable_userns = du;
  j.env = env;
  j.inner_uid = root && uid >= LSB_UID_BASE ? LSB_INNER_UID : 0;
  lsb_argv_init(&a);
  if (bare) {
    for (i = 6; i < argc; i++) lsb_argv_add(&a, argv[i]);
    if (a.oom) return 1;
  } else if (lsb_jail_argv(&j, (const char *const *)argv + 6, &a) != 0) {
    return 1;
  }
  for (i = 0; i < n; i++) {
    double t0 = now();
    int st;
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open("/dev/null", O_RDWR);
      dup2(fd, 0);
      dup2(fd, 1);
      if (root && (syscall(SYS_setgroups, 0, NULL) != 0 ||
                   syscall(SYS_setresgid, gid, gid, gid) != 0 ||
                   syscall(SYS_setresuid, uid, uid, uid) != 0))
        _exit(126);
      if (bare) execvp(a.v[0], a.v);
      else execv(a.v[0], a.v);
      _exit(127);
    }
    waitpid(pid, &st, 0);
    t[i] = (now() - t0) * 1000;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "sandbox_bare: run %d failed (status %d)\n", i, st);
      return 1;
    }
  }
  qsort(t, (size_t)n, sizeof *t, cmp);
  printf("%.3f %.3f\n", t[n / 2], t[(n * 9) / 10]);
  lsb_argv_free(&a);
  free(v);
  free(t);
  return 0;
}
