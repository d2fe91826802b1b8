/*
** jaild.c: the supervisor inside a local sandbox's jail (lash-jaild).
** bubblewrap builds the jail once per sandbox (namespaces, mounts, rlimits,
** uid) and runs this program as pid 1 of its pid namespace (--as-pid-1).
** It owns, inside the jail: receiving exec requests from lash over the
** socketpair at fd LSB_JD_CTL_FD (protocol in sandbox_jaild.h), spawning
** each command in a session of its own with exactly the fds lash passed,
** reaping every process of the namespace, and killing what a command left
** behind when it ends or is killed (its session, and every process no
** longer descended from a running command). It exits, taking the whole
** namespace with it, when lash closes the socket, when lash dies (bwrap's
** --die-with-parent) and when the sandbox expires (argv[1]: seconds left).
** Output is never read here: the pipes go straight to lash, which caps it.
** Built static (the jail's rootfs may be any tree) and handed to bwrap as
** a memfd, so nothing of it needs to exist inside the jail.
*/
#include "sandbox_jaild.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CMDS 256
#define MAX_PROCS 8192
#define CTL 3

typedef struct cmd {
  uint32_t id;
  pid_t pid;            /* also its session and process group */
  int exited;           /* reaped, status kept until it is reported */
  int status;
} cmd;

static cmd cmds[MAX_CMDS];
static int ncmds;

static void close_from(int lo) {
  if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0u) != 0) {
    int fd;
    for (fd = lo; fd < 65536; fd++) close(fd);
  }
}

static void reply(uint32_t type, uint32_t id, int32_t status, uint32_t stage) {
  lsb_jd_msg m;
  memset(&m, 0, sizeof m);
  m.magic = LSB_JD_MAGIC;
  m.type = type;
  m.id = id;
  m.status = status;
  m.stage = stage;
  while (send(CTL, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR) {}
}

/* ---- killing what a command left behind ---------------------------- */

/* Decimal parsing and formatting by hand: no stdio in this program, which
** keeps the static executable small (lash maps it to hand it to bwrap). */
static const char *parse_long(const char *p, long *out) {
  long v = 0;
  int neg = 0, any = 0;
  while (*p == ' ') p++;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  while (*p >= '0' && *p <= '9') {
    v = v * 10 + (*p++ - '0');
    any = 1;
  }
  *out = neg ? -v : v;
  return any ? p : NULL;
}

typedef struct proc {
  pid_t pid, ppid, sid;
} proc;

static proc procs[MAX_PROCS];

static int read_procs(void) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  int n = 0;
  if (!d) return 0;
  while ((e = readdir(d)) != NULL && n < MAX_PROCS) {
    char path[64], buf[512], *p;
    const char *q;
    int fd;
    ssize_t r;
    long pid;
    size_t nl = strlen(e->d_name);
    q = parse_long(e->d_name, &pid);
    if (!q || *q || pid <= 1 || nl > 20) continue;
    memcpy(path, "/proc/", 6);
    memcpy(path + 6, e->d_name, nl);
    memcpy(path + 6 + nl, "/stat", 6);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) continue;
    r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) continue;
    buf[r] = '\0';
    /* pid (comm) state ppid pgrp session: comm may hold anything but the
    ** last ')' ends it */
    if (!(p = strrchr(buf, ')'))) continue;
    {
      long ppid, pgrp, sid;
      q = p + 1;
      while (*q == ' ') q++;
      if (!*q) continue;
      q++;                                   /* the state letter */
      if (!(q = parse_long(q, &ppid)) || !(q = parse_long(q, &pgrp)) ||
          !parse_long(q, &sid))
        continue;
      procs[n].pid = (pid_t)pid;
      procs[n].ppid = (pid_t)ppid;
      procs[n].sid = (pid_t)sid;
      n++;
    }
  }
  closedir(d);
  return n;
}

/* Reap every child that is done, keeping the commands' statuses. */
static void reap_all(void) {
  for (;;) {
    int st, i;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p <= 0) return;
    for (i = 0; i < ncmds; i++)
      if (cmds[i].pid == p) {
        cmds[i].exited = 1;
        cmds[i].status = st;
      }
  }
}

static int running_session(pid_t sid) {
  int i;
  for (i = 0; i < ncmds; i++)
    if (cmds[i].pid == sid) return 1;
  return 0;
}

static const proc *find_proc(int n, pid_t pid) {
  int i;
  for (i = 0; i < n; i++)
    if (procs[i].pid == pid) return &procs[i];
  return NULL;
}

/* A process lives on while it, or one of its ancestors below pid 1, is in
** the session of a running command; everything else (a command's session
** once it ended, a daemon that left its session and lost its parent) is
** killed. With no command running, everything but pid 1 goes. Repeated
** until a round finds nothing, for processes forked meanwhile. */
static void sweep(void) {
  int round;
  for (round = 0; round < 64; round++) {
    int n, i, killed = 0;
    if (ncmds == 0) {
      if (kill(-1, SIGKILL) != 0) return;   /* ESRCH: nobody left */
      killed = 1;
    } else {
      n = read_procs();
      for (i = 0; i < n; i++) {
        const proc *p = &procs[i];
        int depth = 0, keep = 0;
        while (p && depth++ < MAX_PROCS) {
          if (running_session(p->sid)) {
            keep = 1;
            break;
          }
          if (p->ppid <= 1) break;
          p = find_proc(n, p->ppid);
        }
        if (!keep && kill(procs[i].pid, SIGKILL) == 0) killed = 1;
      }
    }
    if (!killed) return;
    /* let the killed go (and be reaped) before looking again */
    reap_all();
    if (ncmds == 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- spawning ------------------------------------------------------ */

/* One request: its header in m, an EXEC_INLINE's payload in inl (room for
** LSB_JD_INLINE_MAX bytes). */
static int recv_request(lsb_jd_msg *m, char *inl, int fds[4], int *nfds) {
  struct msghdr mh;
  struct iovec iov[2];
  union {
    char buf[CMSG_SPACE(4 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct cmsghdr *c;
  ssize_t n;
  memset(&mh, 0, sizeof mh);
  iov[0].iov_base = m;
  iov[0].iov_len = sizeof *m;
  iov[1].iov_base = inl;
  iov[1].iov_len = LSB_JD_INLINE_MAX;
  mh.msg_iov = iov;
  mh.msg_iovlen = 2;
  mh.msg_control = u.buf;
  mh.msg_controllen = sizeof u.buf;
  *nfds = 0;
  do n = recvmsg(CTL, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return n < 0 && errno == EAGAIN ? 1 : -1;
  for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)), i;
      for (i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (*nfds < 4) fds[(*nfds)++] = fd;
        else close(fd);
      }
    }
  }
  if (n < (ssize_t)sizeof *m || m->magic != LSB_JD_MAGIC ||
      (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return 2;
  if (m->type == LSB_JD_EXEC_INLINE
          ? m->len > LSB_JD_INLINE_MAX || (uint64_t)n != sizeof *m + m->len
          : n != (ssize_t)sizeof *m)
    return 2;
  return 0;
}

static char *read_payload(int fd, uint64_t len) {
  char *buf;
  uint64_t off = 0;
  if (len > LSB_JD_PAYLOAD_MAX || !(buf = malloc(len + 1))) return NULL;
  while (off < len) {
    ssize_t r = pread(fd, buf + off, len - off, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(buf);
      return NULL;
    }
    off += (uint64_t)r;
  }
  buf[len] = '\0';
  return buf;
}

/* Split the payload into cwd, argv and env (pointers into buf). */
static int split(char *buf, uint64_t len, uint32_t argc, uint32_t envc,
                 char **cwd, char ***argv, char ***envp) {
  char **v;
  uint64_t off = 0;
  uint32_t i, total = 1 + argc + envc;
  if (argc < 1 || argc > (1u << 20) || envc > (1u << 20)) return -1;
  if (!(v = calloc((size_t)total + 2, sizeof *v))) return -1;
  for (i = 0; i < total; i++) {
    size_t l;
    if (off >= len) {
      free(v);
      return -1;
    }
    l = strnlen(buf + off, (size_t)(len - off));
    if (off + l >= len) {
      free(v);
      return -1;
    }
    /* cwd, then argv and a NULL, then env and a NULL */
    v[i < 1 + argc ? i : i + 1] = buf + off;
    off += l + 1;
  }
  *cwd = v[0];
  *argv = v + 1;
  (*argv)[argc] = NULL;
  *envp = v + 2 + argc;
  (*envp)[envc] = NULL;
  return 0;
}

typedef struct spawn_err {
  int err, stage;
} spawn_err;

static void child(int in, int out, int err, int st, const char *cwd,
                  char **argv, char **envp) {
  spawn_err se;
  sigset_t none;
  int sig;
  for (sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setsid();
  /* 0..2 first from copies above 9, so no source is clobbered */
  in = fcntl(in, F_DUPFD, 10);
  out = fcntl(out, F_DUPFD, 10);
  err = fcntl(err, F_DUPFD, 10);
  st = fcntl(st, F_DUPFD_CLOEXEC, 10);
  if (in < 0 || out < 0 || err < 0 || st < 0 || dup2(in, 0) < 0 ||
      dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup3(st, 3, O_CLOEXEC) < 0)
    _exit(127);
  close_from(4);        /* the socket, the memfd, the other commands' pipes */
  se.stage = LSB_JD_STAGE_CHDIR;
  if (chdir(cwd) != 0) goto fail;
  se.stage = LSB_JD_STAGE_EXEC;
  execvpe(argv[0], argv, envp);
fail:
  se.err = errno;
  if (write(3, &se, sizeof se) < 0) { /* lash sees the command exit 127 */ }
  _exit(127);
}

/* A command from an EXEC (payload in the memfd fds[0]) or EXEC_INLINE
** (payload in inl, no memfd). */
static char *inline_payload(const char *inl, uint64_t len) {
  char *buf = malloc(len + 1);
  if (buf) {
    memcpy(buf, inl, len);
    buf[len] = '\0';
  }
  return buf;
}

static void do_exec(const lsb_jd_msg *m, const char *inl, int *fds, int nfds,
                    int devnull) {
  char *buf = NULL, *cwd, **argv = NULL, **envp;
  int in_msg = m->type == LSB_JD_EXEC_INLINE, out = in_msg ? 0 : 1;
  int need = out + (m->has_stdin ? 3 : 2), stp[2] = {-1, -1}, i;
  spawn_err se;
  pid_t pid;
  ssize_t n;
  if (nfds != need || ncmds >= MAX_CMDS ||
      !(buf = in_msg ? inline_payload(inl, m->len)
                     : read_payload(fds[0], m->len)) ||
      split(buf, m->len, m->argc, m->envc, &cwd, &argv, &envp) != 0) {
    reply(LSB_JD_STARTED, m->id, EINVAL, LSB_JD_STAGE_REQUEST);
    goto done;
  }
  if (pipe2(stp, O_CLOEXEC) != 0) {
    reply(LSB_JD_STARTED, m->id, errno, LSB_JD_STAGE_FORK);
    goto done;
  }
  pid = fork();
  if (pid < 0) {
    reply(LSB_JD_STARTED, m->id, errno, LSB_JD_STAGE_FORK);
    goto done;
  }
  if (pid == 0)
    child(m->has_stdin ? fds[out + 2] : devnull, fds[out], fds[out + 1], stp[1],
          cwd, argv, envp);
  close(stp[1]);
  stp[1] = -1;
  do n = read(stp[0], &se, sizeof se);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof se) {
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    reply(LSB_JD_STARTED, m->id, se.err ? se.err : EIO, (uint32_t)se.stage);
    goto done;
  }
  cmds[ncmds].id = m->id;
  cmds[ncmds].pid = pid;
  cmds[ncmds].exited = 0;
  ncmds++;
  reply(LSB_JD_STARTED, m->id, 0, 0);
done:
  if (stp[0] >= 0) close(stp[0]);
  if (stp[1] >= 0) close(stp[1]);
  for (i = 0; i < nfds; i++) close(fds[i]);
  free(argv ? argv - 1 : NULL);
  free(buf);
}

/* Report every command that exited, after killing what it left behind. */
static void finish_exited(void) {
  int i;
  for (i = 0; i < ncmds; i++) {
    if (cmds[i].exited) {
      pid_t sid = cmds[i].pid;
      uint32_t id = cmds[i].id;
      int status = cmds[i].status;
      cmds[i] = cmds[--ncmds];
      kill(-sid, SIGKILL);
      sweep();
      reply(LSB_JD_EXITED, id, status, 0);
      i = -1;   /* the sweep may have reaped more */
    }
  }
}

static void do_kill(uint32_t id) {
  int i;
  for (i = 0; i < ncmds; i++)
    if (cmds[i].id == id) {
      kill(-cmds[i].pid, SIGKILL);
      /* the exit status arrives through SIGCHLD */
      return;
    }
}

int main(int argc, char **argv) {
  static char inl[LSB_JD_INLINE_MAX];   /* an EXEC_INLINE's payload */
  sigset_t mask;
  int sfd, devnull;
  long left = 0;
  struct timespec t0;
  if (argc > 1 && !parse_long(argv[1], &left)) left = 0;
  /* only ever pid 1 of a jail's own pid namespace: anywhere else its
  ** kill(-1) would reach every process of the caller's uid */
  if (getpid() != 1) {
    static const char m[] = "lash-jaild: runs only as pid 1 of a lash jail\n";
    if (write(2, m, sizeof m - 1) < 0) { /* nothing more to say */ }
    return 120;
  }
  /* never ptraceable by the commands, which share its uid */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  if (dup2(LSB_JD_CTL_FD, CTL) != CTL) return 121;
  close_from(CTL + 1);  /* bwrap's args and info fds, our own executable */
  devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return 122;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN);
  sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 123;
  fcntl(CTL, F_SETFD, FD_CLOEXEC);
  /* from here on lash reads nothing of ours on stdout/stderr */
  dup2(devnull, 0);
  dup2(devnull, 1);
  dup2(devnull, 2);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  reply(LSB_JD_HELLO, 0, 0, 0);
  for (;;) {
    struct pollfd p[2] = {{CTL, POLLIN, 0}, {sfd, POLLIN, 0}};
    int timeout = -1;
    if (left > 0) {
      struct timespec now;
      long ms;
      clock_gettime(CLOCK_MONOTONIC, &now);
      ms = left * 1000 - ((now.tv_sec - t0.tv_sec) * 1000 +
                          (now.tv_nsec - t0.tv_nsec) / 1000000);
      if (ms <= 0) break;          /* the sandbox expired */
      timeout = ms > 86400000 ? 86400000 : (int)ms;
    }
    if (poll(p, 2, timeout) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {}
      reap_all();
      finish_exited();
    }
    if (p[0].revents & POLLIN) {
      lsb_jd_msg m;
      int fds[4], nfds, r = recv_request(&m, inl, fds, &nfds);
      if (r < 0) break;            /* lash is gone */
      if (r == 2) {
        int i;
        for (i = 0; i < nfds; i++) close(fds[i]);
        continue;
      }
      if (r == 1) continue;
      if (m.type == LSB_JD_EXEC || m.type == LSB_JD_EXEC_INLINE)
        do_exec(&m, inl, fds, nfds, devnull);
      else {
        int i;
        for (i = 0; i < nfds; i++) close(fds[i]);
        if (m.type == LSB_JD_KILL) do_kill(m.id);
      }
    } else if (p[0].revents & (POLLHUP | POLLERR)) {
      break;
    }
  }
  /* pid 1 leaving takes the namespace with it; say so explicitly */
  ncmds = 0;
  sweep();
  return 0;
}
