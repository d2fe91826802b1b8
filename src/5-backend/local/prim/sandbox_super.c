/*
** sandbox_super.c: lash's side of a local sandbox's supervisor. Builds the
** jail once (bubblewrap through lsb_spawn_child, so the jail's spawn path,
** rlimits and credentials are those of every jail) with the supervisor
** (src/5-backend/local/prim/jaild/jaild.c, embedded in the library and handed over as a memfd)
** as its pid 1; sends it exec and kill requests over a SOCK_SEQPACKET
** socketpair (sandbox_jaild.h) and dispatches its answers to the commands
** waiting on them. Output never passes through here: each command's pipes
** are handed to the jail and read by the exec op, which caps them.
** Stopping kills the jail's pid 1 (taking the namespace with it) and bwrap,
** and reaps bwrap; a job record in the sandbox's directory lets destroy
** from any process do the same.
*/
#include "sandbox_super.h"
#include "sandbox_seccomp.h"
#include "jaild/sandbox_jaild.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* the supervisor's static executable (src/5-backend/local/prim/jaild/blob.S); weak, so that a
** build of the sources without it (the fuzz targets) still links and a
** jail then fails with a clear message */
extern const unsigned char lsb_jaild_image[] __attribute__((weak));
extern const unsigned char lsb_jaild_image_end[] __attribute__((weak));

#define HELLO_MS 20000            /* building a jail on a loaded machine */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void lsb_super_init(lsb_super *s, lash_loop *loop) {
  memset(s, 0, sizeof *s);
  s->loop = loop;
  s->pid = -1;
  s->ctl = s->init_pidfd = s->job_dirfd = -1;
}

/* ---- messages from the jail ----------------------------------------- */

static lsb_super_cmd *find_cmd(lsb_super *s, uint32_t id) {
  lsb_super_cmd *c;
  for (c = s->cmds; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static void unlink_cmd(lsb_super *s, lsb_super_cmd *c) {
  lsb_super_cmd **p;
  for (p = &s->cmds; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  c->next = NULL;
  c->owner = NULL;
  if (!s->cmds && s->io.active) lash_io_stop(s->loop, &s->io);
}

static void dispatch(lsb_super *s, const lsb_jd_msg *m) {
  lsb_super_cmd *c;
  if (m->magic != LSB_JD_MAGIC || !(c = find_cmd(s, m->id))) return;
  if (m->type == LSB_JD_STARTED && !c->started_seen) {
    c->started_seen = 1;
    if (m->status != 0) {
      unlink_cmd(s, c);
      c->started(c, m->status > 0 ? m->status : EIO, (int)m->stage);
    } else {
      c->started(c, 0, 0);
    }
  } else if (m->type == LSB_JD_EXITED) {
    unlink_cmd(s, c);
    c->exited(c, m->status);
  }
}

/* Read what is there. Returns 0, or -1 once the jail is gone. */
static int drain(lsb_super *s) {
  for (;;) {
    lsb_jd_msg m;
    union {
      char buf[CMSG_SPACE(4 * sizeof(int))];
      struct cmsghdr align;
    } u;
    struct msghdr mh;
    struct iovec iov;
    struct cmsghdr *cm;
    ssize_t n;
    memset(&mh, 0, sizeof mh);
    iov.iov_base = &m;
    iov.iov_len = sizeof m;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof u.buf;
    n = recvmsg(s->ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    if (n <= 0) return -1;
    /* the jail has no business sending fds: close whatever came */
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int), i;
        for (i = 0; i < k; i++) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
          close(fd);
        }
      }
    if (n == (ssize_t)sizeof m && !(mh.msg_flags & MSG_TRUNC)) dispatch(s, &m);
  }
}

static void on_ctl(lash_loop *loop, lash_io *io, unsigned ev) {
  lsb_super *s = io->data;
  (void)loop;
  (void)ev;
  if (drain(s) != 0) lsb_super_stop(s);
}

int lsb_super_alive(lsb_super *s) {
  struct pollfd p;
  if (s->pid <= 0 || s->ctl < 0) return 0;
  /* the usual case, nothing said and no hangup, in one call */
  p.fd = s->ctl;
  p.events = POLLIN;
  p.revents = 0;
  if (poll(&p, 1, 0) == 0) return 1;
  if (drain(s) != 0) {
    lsb_super_stop(s);
    return 0;
  }
  p.fd = s->ctl;
  p.events = POLLIN;
  p.revents = 0;
  if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
    lsb_super_stop(s);
    return 0;
  }
  return 1;
}

/* ---- stopping ------------------------------------------------------- */

void lsb_super_stop(lsb_super *s) {
  if (s->io.active) lash_io_stop(s->loop, &s->io);
  if (s->init_pidfd >= 0)
    syscall(SYS_pidfd_send_signal, s->init_pidfd, SIGKILL, NULL, 0);
  close_fd(&s->init_pidfd);
  close_fd(&s->ctl);
  if (s->pid > 0) {
    int st;
    kill(s->pid, SIGKILL);   /* our unreaped child: the pid is still ours */
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {}
    s->pid = -1;
  }
  if (s->job_dirfd >= 0) {
    lsb_job_remove(s->job_dirfd, s->job);
    close_fd(&s->job_dirfd);
  }
  s->job[0] = '\0';
  /* every command still waiting ends as killed */
  while (s->cmds) {
    lsb_super_cmd *c = s->cmds;
    int started = c->started_seen;
    unlink_cmd(s, c);
    if (!started) {
      c->started_seen = 1;
      c->started(c, 0, 0);
    }
    c->exited(c, SIGKILL);
  }
}

/* ---- starting ------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t len) {
  const char *b = p;
  while (len) {
    ssize_t w = write(fd, b, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -(w < 0 ? errno : EIO);
    b += w;
    len -= (size_t)w;
  }
  return 0;
}

/* The NUL-separated strings `first` (when given), then v from index
** `from`, then w (when given), joined in a new buffer of *len bytes, or
** NULL (out of memory). */
static char *strings_join(const char *first, char *const *v, size_t from,
                          char *const *w, size_t *len) {
  size_t total = first ? strlen(first) + 1 : 0, i, at = 0;
  char *buf;
  for (i = from; v && v[i]; i++) total += strlen(v[i]) + 1;
  for (i = 0; w && w[i]; i++) total += strlen(w[i]) + 1;
  if ((buf = malloc(total ? total : 1)) == NULL) return NULL;
#define PUT(str) do { size_t l_ = strlen(str) + 1; memcpy(buf + at, (str), l_); at += l_; } while (0)
  if (first) PUT(first);
  for (i = from; v && v[i]; i++) PUT(v[i]);
  for (i = 0; w && w[i]; i++) PUT(w[i]);
#undef PUT
  *len = total;
  return buf;
}

/* len bytes of data in a new memfd (in one write), left at its end.
** Returns the fd or -errno. */
static int data_memfd(const char *name, const char *data, size_t len) {
  int fd = memfd_create(name, MFD_CLOEXEC), rc;
  if (fd < 0) return -errno;
  if ((rc = write_all(fd, data, len)) != 0) {
    close(fd);
    return rc;
  }
  return fd;
}

int lsb_strings_memfd(const char *name, char *const *v, size_t from,
                      const char *first) {
  size_t len;
  char *buf = strings_join(first, v, from, NULL, &len);
  int fd;
  if (!buf) return -ENOMEM;
  fd = data_memfd(name, buf, len);
  free(buf);
  return fd;
}

/* Where the image lies in the file it was loaded from (the library or the
** executable), by /proc/self/maps: 0 and an open fd at *off, or -1. The
** file must still be the mapped one (same device and inode). */
static int image_file(const void *image, off_t *off) {
  FILE *f = fopen("/proc/self/maps", "re");
  char line[4096 + 128];
  uintptr_t a = (uintptr_t)image;
  int fd = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, foff, ino;
    unsigned int maj, min;
    int n = 0;
    char *path;
    struct stat st;
    if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu %n", &lo, &hi, &foff, &maj,
               &min, &ino, &n) != 6 || a < lo || a >= hi)
      continue;
    path = line + n;
    path[strcspn(path, "\n")] = '\0';
    if (path[0] != '/' || ino == 0) break;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_ino != ino ||
                    major(st.st_dev) != maj || minor(st.st_dev) != min)) {
      close(fd);
      fd = -1;
    }
    *off = (off_t)(a - lo + foff);
    break;
  }
  fclose(f);
  return fd;
}

static int image_memfd(void) {
  const unsigned char *start = lsb_jaild_image, *end = lsb_jaild_image_end;
  int fd, rc;
  if (!start || !end || end <= start) return -ENOEXEC;
  fd = memfd_create("lash-jaild", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  /* copied file to file by the kernel: the ~700 KiB never get mapped into
  ** this process (its peak RSS); from memory when that cannot be done */
  {
    off_t off = 0;
    size_t len = (size_t)(end - start), done = 0;
    int src = image_file(start, &off);
    while (src >= 0 && done < len) {
      ssize_t n = sendfile(fd, src, &off, len - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += (size_t)n;
    }
    if (src >= 0) close(src);
    if (done == len) return fd;
    if (done && (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)) {
      close(fd);
      return -errno;
    }
  }
  rc = write_all(fd, start, (size_t)(end - start));
  if (rc) {
    close(fd);
    return rc;
  }
  return fd;
}

/* bwrap's --info-fd JSON (complete and closed by bwrap before the jail's
** pid 1 runs, so before its hello): the pid of that pid 1 */
static int read_init_pidfd(int fd) {
  char buf[512];
  size_t got = 0;
  char *p;
  long pid;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  while (got < sizeof buf - 1) {
    ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  buf[got] = '\0';
  if (!(p = strstr(buf, "\"child-pid\"")) || !(p = strchr(p, ':'))) return -1;
  pid = strtol(p + 1, NULL, 10);
  if (pid <= 1) return -1;
  return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
}

static void read_reason(int fd, char *msg, size_t msgsz) {
  size_t got = 0;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  while (got + 1 < msgsz) {
    ssize_t n = read(fd, msg + got, msgsz - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  msg[got] = '\0';
  while (got && msg[got - 1] == '\n') msg[--got] = '\0';
}

int lsb_super_start(lsb_super *s, const lsb_super_spec *spec, char *msg,
                    size_t msgsz) {
  lsb_argv jargv, outer;
  lsb_spawn_opts so = spec->spawn;
  lsb_spawn sp;
  const char *stage = NULL;
  char *empty[] = {NULL};
  int sv[2] = {-1, -1}, infop[2] = {-1, -1}, argsfd = -1, imgfd = -1, scfd = -1, rc;
  lsb_jd_msg hello;
  msg[0] = '\0';
  lsb_argv_init(&jargv);
  lsb_argv_init(&outer);
  sp.pid = -1;
  sp.in_fd = sp.out_fd = sp.err_fd = -1;
  rc = lsb_jail_argv(spec->jail, NULL, &jargv);
  /* the filter (sandbox_seccomp.c) on the supervisor and all it runs */
  lsb_argv_add(&jargv, "--seccomp");
  lsb_argv_add(&jargv, "8");
  lsb_argv_add(&jargv, "--as-pid-1");
  lsb_argv_add(&jargv, "--info-fd");
  lsb_argv_add(&jargv, "5");
  if (!rc && jargv.oom) rc = -ENOMEM;
  /* the options through --args, as for every jail: no host path shows in
  ** ps or in the jail's /proc */
  if (!rc) {
    argsfd = lsb_strings_memfd("lash-bwrap-args", jargv.v, 1, NULL);
    if (argsfd < 0) rc = argsfd;
    else if (lseek(argsfd, 0, SEEK_SET) != 0) rc = -errno;
  }
  if (!rc && (imgfd = image_memfd()) < 0) {
    rc = imgfd;
    if (rc == -ENOEXEC) {
      snprintf(msg, msgsz, "this build of lash has no jail supervisor "
               "(src/5-backend/local/prim/jaild/blob.S was not linked in)");
      goto out;
    }
  }
  if (!rc && (scfd = lsb_seccomp_memfd()) < 0) {
    rc = scfd;
    snprintf(msg, msgsz, "cannot build the jail's seccomp filter: %s", strerror(-rc));
    goto out;
  }
  if (!rc && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    rc = -errno;
  if (!rc && pipe2(infop, O_CLOEXEC) != 0) rc = -errno;
  lsb_argv_add(&outer, spec->jail->bwrap);
  lsb_argv_add(&outer, "--args");
  lsb_argv_add(&outer, "4");
  lsb_argv_add(&outer, "--");
  lsb_argv_addf(&outer, "/proc/self/fd/%d", LSB_JD_EXE_FD);
  lsb_argv_addf(&outer, "%ld", spec->expires_in);
  if (!rc && outer.oom) rc = -ENOMEM;
  if (rc) {
    snprintf(msg, msgsz, "cannot prepare the jail: %s", strerror(-rc));
    goto out;
  }
  so.path = spec->jail->bwrap;
  so.argv = outer.v;
  so.envp = empty;
  /* a session of its own: the terminal's Ctrl-C (SIGINT to lash's process
  ** group) must not kill the jail under a `lash chat` that only cancels a
  ** turn; lash's own exit still ends it (stop, and PR_SET_PDEATHSIG) */
  so.new_session = 1;
  so.want_stdin = 0;
  so.outputs = 2;
  so.pass_fd = argsfd;
  so.pass_fd2 = infop[1];
  so.pass_fd3 = sv[1];
  so.pass_fd4 = imgfd;
  so.pass_fd5 = scfd;
  so.fresh_keyring = 1;
  rc = lsb_spawn_child(&so, &sp, &stage);
  close_fd(&scfd);
  close_fd(&sv[1]);
  close_fd(&infop[1]);
  close_fd(&argsfd);
  close_fd(&imgfd);
  if (rc) {
    snprintf(msg, msgsz, "cannot run %s (%s: %s)", spec->jail->bwrap,
             stage ? stage : "?", strerror(-rc));
    goto out;
  }
  s->pid = sp.pid;
  s->ctl = sv[0];
  sv[0] = -1;
  /* until the supervisor says hello (or bwrap gives up: the socket ends) */
  for (;;) {
    struct pollfd p = {s->ctl, POLLIN, 0};
    ssize_t n;
    int pr = poll(&p, 1, HELLO_MS);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      rc = -ETIMEDOUT;
      snprintf(msg, msgsz, "the jail did not start within %d s", HELLO_MS / 1000);
      break;
    }
    n = recv(s->ctl, &hello, sizeof hello, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == (ssize_t)sizeof hello && hello.magic == LSB_JD_MAGIC &&
        hello.type == LSB_JD_HELLO) {
      rc = 0;
      break;
    }
    rc = -ECHILD;
    read_reason(sp.err_fd, msg, msgsz);
    if (!msg[0]) snprintf(msg, msgsz, "the jail's supervisor did not start");
    break;
  }
  /* a pidfd on the jail's pid 1 kills it whatever bwrap does; without
  ** one (kernels before 5.3) killing bwrap does, through the pid 1's
  ** parent-death signal (--die-with-parent) */
  if (!rc) s->init_pidfd = read_init_pidfd(infop[0]);
  if (!rc) {
    s->job_dirfd = fcntl(spec->box_dirfd, F_DUPFD_CLOEXEC, 3);
    if (s->job_dirfd < 0 ||
        lsb_job_add(s->job_dirfd, s->pid, s->job, sizeof s->job) != 0)
      s->job[0] = '\0';
  }
  close_fd(&sp.out_fd);
  close_fd(&sp.err_fd);
  if (rc) lsb_super_stop(s);
out:
  close_fd(&sv[0]);
  close_fd(&sv[1]);
  close_fd(&infop[0]);
  close_fd(&infop[1]);
  close_fd(&argsfd);
  close_fd(&imgfd);
  close_fd(&scfd);
  close_fd(&sp.out_fd);
  close_fd(&sp.err_fd);
  lsb_argv_free(&jargv);
  lsb_argv_free(&outer);
  return rc;
}

/* ---- commands ------------------------------------------------------- */

int lsb_super_exec(lsb_super *s, lsb_super_cmd *c, const char *cwd,
                   char *const *argv, char *const *envp, int in_fd,
                   int out_fd, int err_fd) {
  lsb_jd_msg m;
  struct msghdr mh;
  struct iovec iov[2];
  union {
    char buf[CMSG_SPACE(4 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct cmsghdr *cm;
  int fds[4], nfd = 0, payload = -1, rc = 0;
  size_t argc = 0, envc = 0, len = 0;
  ssize_t n;
  char *data;
  if (s->ctl < 0) return -ESRCH;
  while (argv[argc]) argc++;
  while (envp && envp[envc]) envc++;
  /* cwd, argv, env: in the message when small (most commands), else in a
  ** memfd */
  if ((data = strings_join(cwd, argv, 0, envp, &len)) == NULL) return -ENOMEM;
  if (len > LSB_JD_INLINE_MAX) {
    payload = data_memfd("lash-exec", data, len);
    free(data);
    data = NULL;
    if (payload < 0) return payload;
  }
  memset(&m, 0, sizeof m);
  m.magic = LSB_JD_MAGIC;
  m.type = data ? LSB_JD_EXEC_INLINE : LSB_JD_EXEC;
  m.id = ++s->next_id ? s->next_id : ++s->next_id;
  m.argc = (uint32_t)argc;
  m.envc = (uint32_t)envc;
  m.has_stdin = in_fd >= 0;
  m.len = (uint64_t)len;
  if (payload >= 0) fds[nfd++] = payload;
  fds[nfd++] = out_fd;
  fds[nfd++] = err_fd;
  if (in_fd >= 0) fds[nfd++] = in_fd;
  memset(&mh, 0, sizeof mh);
  memset(&u, 0, sizeof u);
  iov[0].iov_base = &m;
  iov[0].iov_len = sizeof m;
  iov[1].iov_base = data;
  iov[1].iov_len = data ? len : 0;
  mh.msg_iov = iov;
  mh.msg_iovlen = data ? 2 : 1;
  mh.msg_control = u.buf;
  mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
  cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
  memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
  do n = sendmsg(s->ctl, &mh, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  rc = n == (ssize_t)(sizeof m + (data ? len : 0)) ? 0 : -(n < 0 ? errno : EIO);
  free(data);
  if (payload >= 0) close(payload);
  if (rc) return rc;
  c->id = m.id;
  c->owner = s;
  c->started_seen = 0;
  c->next = s->cmds;
  s->cmds = c;
  if (!s->io.active &&
      (rc = lash_io_start(s->loop, &s->io, s->ctl, LASH_READ, on_ctl, s)) != 0) {
    /* nobody would hear the answer: the command cannot be run */
    lsb_super_kill(c);
    unlink_cmd(s, c);
    return rc;
  }
  return 0;
}

void lsb_super_kill(lsb_super_cmd *c) {
  lsb_super *s = c->owner;
  lsb_jd_msg m;
  if (!s) return;
  memset(&m, 0, sizeof m);
  m.magic = LSB_JD_MAGIC;
  m.type = LSB_JD_KILL;
  m.id = c->id;
  if (s->ctl < 0 ||
      send(s->ctl, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof m)
    lsb_super_stop(s);   /* the jail cannot hear us: end all of it */
}

void lsb_super_forget(lsb_super_cmd *c) {
  if (c->owner) unlink_cmd(c->owner, c);
}
