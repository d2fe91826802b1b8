/*
** sandbox_port.c: a TCP connection to a port inside a local sandbox
** (prefix lsb_port_), no Lua; what `sandbox:connect(port)` and published
** ports are made of.
**
** A local sandbox's commands run in jails (one per supervisor, one per
** background command), each recorded as a job (<box>/jobs/<pid>-<start>,
** sandbox_state.c); with the network off each jail has a network
** namespace of its own. "Port P of the sandbox" is found by trying each
** distinct namespace of its running jails in turn until one accepts: a
** short-lived child enters the namespace through the jail init's pidfd
** (the network namespace alone, or with its user namespace when that is
** where our rights over it are), connects to 127.0.0.1:P (then [::1]:P)
** there and hands the socket back over a socketpair (SCM_RIGHTS). A socket
** stays in the namespace it was made in, so this process then uses it as
** any other. A jail sharing the host's network (network "on", isolation
** "none") is connected to directly.
*/
#include "sandbox_port.h"
#include "sandbox_state.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_NS 64

/* Connect to port on loopback in the current namespace: IPv4, then IPv6
** (a server bound to "localhost" may have only one). Returns the fd or
** -errno of the last try. */
static int connect_here(int port) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  int fd, err;
  memset(&a4, 0, sizeof a4);
  a4.sin_family = AF_INET;
  a4.sin_port = htons((uint16_t)port);
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&a4, sizeof a4) == 0) return fd;
  err = errno;
  close(fd);
  memset(&a6, 0, sizeof a6);
  a6.sin6_family = AF_INET6;
  a6.sin6_port = htons((uint16_t)port);
  a6.sin6_addr = in6addr_loopback;
  fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -err;
  if (connect(fd, (struct sockaddr *)&a6, sizeof a6) == 0) return fd;
  if (errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT) err = errno;
  close(fd);
  return -err;
}

/* In a child: enter the namespace of pidfd, connect, send the fd (or the
** errno as 4 bytes) on sock. Only system calls: the parent may have
** threads. */
static void child_connect(int pidfd, int port, int sock) {
  struct msghdr mh;
  struct iovec iov;
  union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } cm;
  int fd, err = 0;
  if (setns(pidfd, CLONE_NEWNET) != 0 &&
      setns(pidfd, CLONE_NEWUSER | CLONE_NEWNET) != 0)
    err = errno;
  fd = err ? -err : connect_here(port);
  memset(&mh, 0, sizeof mh);
  if (fd < 0) {
    err = -fd;
  } else {
    memset(&cm, 0, sizeof cm);
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
    CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
    CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &fd, sizeof fd);
  }
  iov.iov_base = &err;
  iov.iov_len = sizeof err;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  (void)!sendmsg(sock, &mh, MSG_NOSIGNAL);
  _exit(0);
}

/* Connect to port in the network namespace of pid (through a child).
** Returns the fd or -errno. */
static int connect_in(pid_t pid, int port) {
  int pidfd, sv[2], fd = -1, err = EIO;
  pid_t child;
  struct pollfd p;
  struct msghdr mh;
  struct iovec iov;
  union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } cm;
  pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) return -errno;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    err = errno;
    close(pidfd);
    return -err;
  }
  child = fork();
  if (child == 0) {
    close(sv[0]);
    child_connect(pidfd, port, sv[1]);
  }
  close(pidfd);
  close(sv[1]);
  if (child < 0) {
    err = errno;
    close(sv[0]);
    return -err;
  }
  /* a loopback connect answers at once; a child stuck longer is killed */
  p.fd = sv[0];
  p.events = POLLIN;
  if (poll(&p, 1, 5000) == 1) {
    memset(&mh, 0, sizeof mh);
    memset(&cm, 0, sizeof cm);
    iov.iov_base = &err;
    iov.iov_len = sizeof err;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    if (recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof err) {
      struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
      if (err == 0 && h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
          h->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(h), sizeof fd);
      else if (err == 0)
        err = EIO;
    } else {
      err = EIO;
    }
  } else {
    err = ETIMEDOUT;
    kill(child, SIGKILL);
  }
  close(sv[0]);
  while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
  return fd >= 0 ? fd : -err;
}

/* The pid whose namespaces are the jail's: bwrap's child (the jail's
** init) when the job is a bwrap, else the job itself (no isolation). */
static pid_t jail_init(pid_t job) {
  char path[64], buf[64];
  int fd;
  ssize_t n;
  long child;
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)job, (int)job);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return job;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return job;
  buf[n] = 0;
  child = strtol(buf, NULL, 10);
  return child > 1 ? (pid_t)child : job;
}

static int ns_inode(pid_t pid, ino_t *ino) {
  char path[64];
  struct stat st;
  if (pid) snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
  else snprintf(path, sizeof path, "/proc/self/ns/net");
  if (stat(path, &st) != 0) return -errno;
  *ino = st.st_ino;
  return 0;
}

int lsb_port_connect(int box_dirfd, int port, char *msg, size_t msgsz) {
  ino_t seen[MAX_NS], self_ns = 0, ino = 0;
  int nseen = 0, tried = 0, fd = -1, dfd, last = ECONNREFUSED;
  DIR *d;
  struct dirent *e;
  if (port < 1 || port > 65535) {
    snprintf(msg, msgsz, "port %d is not a TCP port (1-65535)", port);
    return -EINVAL;
  }
  (void)ns_inode(0, &self_ns);
  dfd = openat(box_dirfd, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d && dfd >= 0) close(dfd);
  while (d && fd < 0 && (e = readdir(d)) != NULL) {
    int pid, i, dup = 0;
    unsigned long long st;
    pid_t init;
    if (sscanf(e->d_name, "%d-%llu", &pid, &st) != 2 || pid <= 1) continue;
    if (st == 0 || lsb_proc_starttime(pid) != st) continue;   /* gone, or recycled */
    init = jail_init(pid);
    if (ns_inode(init, &ino) != 0) continue;
    for (i = 0; i < nseen; i++) dup |= seen[i] == ino;
    if (dup || nseen == MAX_NS) continue;
    seen[nseen++] = ino;
    tried++;
    fd = ino == self_ns ? connect_here(port) : connect_in(init, port);
    if (fd < 0) {
      last = -fd;
      fd = -1;
    }
  }
  if (d) closedir(d);
  if (fd >= 0) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
  }
  if (!tried) {
    snprintf(msg, msgsz, "nothing runs in the sandbox to listen on port %d "
             "(start the server first, e.g. in the background)", port);
    return -ESRCH;
  }
  if (last == ECONNREFUSED)
    snprintf(msg, msgsz, "nothing listens on port %d in the sandbox", port);
  else
    snprintf(msg, msgsz, "cannot reach port %d in the sandbox: %s", port, strerror(last));
  return -last;
}
