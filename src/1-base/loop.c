/*
** loop.c: the event loop. epoll for descriptors, a binary min-heap for
** timers, pidfds for child processes and libcurl's multi socket interface
** wired onto both. Single-threaded; everything hangs off struct lash_loop.
** Prefix lash_ by watcher (loop.h): lash_loop_, lash_io_, lash_timer_,
** lash_child_, lash_signal_, lash_curl_, and the clocks lash_now_ns and
** lash_wall_now. No Lua.
*/
#include "loop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define NOT_ARMED ((size_t)-1)

/* A descriptor libcurl asked us to watch. */
typedef struct curl_sock {
  lash_io io;
  curl_socket_t fd;
  lash_loop *loop;
} curl_sock;

/* What we keep per transfer; stored as CURLOPT_PRIVATE. */
typedef struct curl_xfer {
  lash_curl_done done;
  void *data;
} curl_xfer;

struct lash_loop {
  int epfd;
  int nio;                 /* active lash_io watchers (curl's included) */
  lash_timer **heap;
  size_t nheap, capheap;
  size_t nweak;            /* weak timers in the heap */
  CURLM *multi;
  lash_timer curl_timer;
  int ncurl;               /* transfers added and not yet done */
  int nchildren;
  /* The epoll batch being dispatched, so that stopping a watcher can drop
  ** its pending event (its memory may be freed right after the stop). */
  struct epoll_event *batch;
  int batch_len;
  /* Notification for hosts that wait on epfd themselves (lash_fd): an
  ** eventfd (wakes) and a timerfd (the earliest timer), -1 until
  ** lash_loop_notify_enable. */
  int evfd, tfd;
  int woken;               /* evfd is signalled and not yet drained */
  uint64_t tfd_due;        /* what tfd is armed for, 0: disarmed */
  lash_io ev_io, t_io;
};

uint64_t lash_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double lash_wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- fd watchers ---------------------------------------------------- */

static uint32_t to_epoll(unsigned ev) {
  uint32_t e = 0;
  if (ev & LASH_READ) e |= EPOLLIN | EPOLLRDHUP;
  if (ev & LASH_WRITE) e |= EPOLLOUT;
  return e;
}

int lash_io_start(lash_loop *loop, lash_io *io, int fd, unsigned events,
                  lash_io_cb cb, void *data) {
  struct epoll_event ee;
  memset(&ee, 0, sizeof ee);
  ee.events = to_epoll(events);
  ee.data.ptr = io;
  if (io->active && io->fd != fd) lash_io_stop(loop, io);
  if (epoll_ctl(loop->epfd, io->active ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd,
                &ee) != 0)
    return -errno;
  if (!io->active && !io->weak) loop->nio++;
  io->fd = fd;
  io->events = events;
  io->active = 1;
  io->cb = cb;
  io->data = data;
  return 0;
}

void lash_io_stop(lash_loop *loop, lash_io *io) {
  if (!io->active) return;
  /* The fd may already be closed (EBADF) or replaced; either way it is no
  ** longer in our set once we forget it. */
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
  io->active = 0;
  if (!io->weak) loop->nio--;
  for (int i = 0; i < loop->batch_len; i++)
    if (loop->batch[i].data.ptr == io) loop->batch[i].data.ptr = NULL;
}

/* ---- timers (binary min-heap on due_ns) ------------------------------ */

static void notify_arm(lash_loop *loop);  /* notification fds, below */

static void heap_swap(lash_loop *loop, size_t a, size_t b) {
  lash_timer *t = loop->heap[a];
  loop->heap[a] = loop->heap[b];
  loop->heap[b] = t;
  loop->heap[a]->heap_index = a;
  loop->heap[b]->heap_index = b;
}

static void heap_up(lash_loop *loop, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (loop->heap[p]->due_ns <= loop->heap[i]->due_ns) break;
    heap_swap(loop, p, i);
    i = p;
  }
}

static void heap_down(lash_loop *loop, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < loop->nheap && loop->heap[l]->due_ns < loop->heap[m]->due_ns) m = l;
    if (r < loop->nheap && loop->heap[r]->due_ns < loop->heap[m]->due_ns) m = r;
    if (m == i) break;
    heap_swap(loop, i, m);
    i = m;
  }
}

void lash_timer_init(lash_timer *t) {
  memset(t, 0, sizeof *t);
  t->heap_index = NOT_ARMED;
}

int lash_timer_active(const lash_timer *t) {
  return t->heap_index != NOT_ARMED;
}

void lash_timer_stop(lash_loop *loop, lash_timer *t) {
  size_t i = t->heap_index;
  if (i == NOT_ARMED) return;
  if (t->weak) loop->nweak--;
  loop->nheap--;
  if (i != loop->nheap) {
    loop->heap[i] = loop->heap[loop->nheap];
    loop->heap[i]->heap_index = i;
    heap_down(loop, i);
    heap_up(loop, i);
  }
  t->heap_index = NOT_ARMED;
}

int lash_timer_start(lash_loop *loop, lash_timer *t, uint64_t delay_ns,
                     lash_timer_cb cb, void *data) {
  lash_timer_stop(loop, t);
  if (loop->nheap == loop->capheap) {
    size_t cap = loop->capheap ? loop->capheap * 2 : 64;
    lash_timer **h = realloc(loop->heap, cap * sizeof *h);
    if (!h) return -ENOMEM;
    loop->heap = h;
    loop->capheap = cap;
  }
  t->due_ns = lash_now_ns() + delay_ns;
  if (t->due_ns < delay_ns) t->due_ns = UINT64_MAX;  /* never, not at once */
  t->cb = cb;
  t->data = data;
  t->heap_index = loop->nheap;
  if (t->weak) loop->nweak++;
  loop->heap[loop->nheap++] = t;
  heap_up(loop, t->heap_index);
  if (loop->tfd >= 0) notify_arm(loop);  /* lash_fd: see notify_arm */
  return 0;
}

int lash_loop_next_timeout(const lash_loop *loop) {
  uint64_t now, due, ms;
  if (loop->nheap == 0) return -1;
  now = lash_now_ns();
  due = loop->heap[0]->due_ns;
  if (due <= now) return 0;
  /* Round up so we never wake a hair early and spin; a timer further off
  ** than INT_MAX ms (25 days) waits in INT_MAX steps. */
  ms = (due - now) / 1000000 + ((due - now) % 1000000 != 0);
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int run_timers(lash_loop *loop) {
  int n = 0;
  uint64_t now = lash_now_ns();
  /* Timers armed by callbacks for "now" wait for the next round, so a
  ** callback that re-arms itself with delay 0 cannot starve the loop. */
  while (loop->nheap > 0 && loop->heap[0]->due_ns <= now) {
    lash_timer *t = loop->heap[0];
    lash_timer_stop(loop, t);
    t->cb(loop, t);
    n++;
  }
  return n;
}

/* ---- children ----------------------------------------------------- */

static void on_pidfd(lash_loop *loop, lash_io *io, unsigned events) {
  lash_child *c = io->data;
  siginfo_t si;
  int status;
  memset(&si, 0, sizeof si);
  if (waitid(P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) != 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    status = 0xff00;  /* reaped elsewhere: report exit 255 */
  } else if (si.si_pid == 0) {
    return;  /* spurious */
  } else if (si.si_code == CLD_EXITED) {
    status = (si.si_status & 0xff) << 8;
  } else {
    status = si.si_status & 0x7f;  /* killed by signal */
  }
  lash_child_stop(loop, c);
  c->cb(loop, c, status);
}

/* Without pidfds (old kernels, valgrind) poll with waitpid: the pid cannot
** be reused before we reap it, so polling and kill(2) stay safe. */
static void on_child_poll(lash_loop *loop, lash_timer *t) {
  lash_child *c = t->data;
  int status;
  pid_t r = waitpid(c->pid, &status, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) {
    lash_timer_start(loop, &c->poll, 5000000, on_child_poll, c);
    return;
  }
  if (r < 0) status = 0xff00;
  lash_child_stop(loop, c);
  c->cb(loop, c, status);
}

int lash_child_start(lash_loop *loop, lash_child *c, pid_t pid,
                     lash_child_cb cb, void *data) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  int rc;
  c->pid = pid;
  c->cb = cb;
  c->data = data;
  c->polling = 0;
  memset(&c->io, 0, sizeof c->io);
  lash_timer_init(&c->poll);
  if (fd < 0) {
    if (errno != ENOSYS && errno != EPERM) return -errno;
    c->pidfd = -1;
    c->polling = 1;
    loop->nchildren++;
    return lash_timer_start(loop, &c->poll, 1000000, on_child_poll, c);
  }
  c->pidfd = fd;
  rc = lash_io_start(loop, &c->io, fd, LASH_READ, on_pidfd, c);
  if (rc != 0) {
    close(fd);
    c->pidfd = -1;
    return rc;
  }
  loop->nchildren++;
  return 0;
}

void lash_child_stop(lash_loop *loop, lash_child *c) {
  if (c->polling) {
    lash_timer_stop(loop, &c->poll);
    c->polling = 0;
    loop->nchildren--;
    return;
  }
  if (c->pidfd < 0) return;
  lash_io_stop(loop, &c->io);
  close(c->pidfd);
  c->pidfd = -1;
  loop->nchildren--;
}

int lash_child_kill(lash_child *c, int sig) {
  if (c->polling) return kill(c->pid, sig) == 0 ? 0 : -errno;
  if (c->pidfd < 0) return -ESRCH;
  if (syscall(SYS_pidfd_send_signal, c->pidfd, sig, NULL, 0) != 0)
    return -errno;
  return 0;
}

/* ---- signals ------------------------------------------------------- */

static void on_signalfd(lash_loop *loop, lash_io *io, unsigned events) {
  lash_signal *s = io->data;
  struct signalfd_siginfo si;
  (void)events;
  while (s->fd >= 0 && read(s->fd, &si, sizeof si) == (ssize_t)sizeof si)
    s->cb(loop, s, (int)si.ssi_signo);
}

int lash_signal_start(lash_loop *loop, lash_signal *s, const int *sigs,
                      int n, lash_signal_cb cb, void *data) {
  struct epoll_event ee;
  int i, err;
  memset(s, 0, sizeof *s);
  s->fd = -1;
  sigemptyset(&s->mask);
  for (i = 0; i < n; i++) sigaddset(&s->mask, sigs[i]);
  if (sigprocmask(SIG_BLOCK, &s->mask, &s->prev) != 0) return -errno;
  s->fd = signalfd(-1, &s->mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (s->fd < 0) goto fail;
  s->cb = cb;
  s->data = data;
  /* Added by hand, like the notification fds: a signal watcher must not
  ** keep the loop alive, or lash.run() would never return. */
  memset(&ee, 0, sizeof ee);
  ee.events = EPOLLIN;
  ee.data.ptr = &s->io;
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s->fd, &ee) != 0) goto fail;
  s->io.fd = s->fd;
  s->io.events = LASH_READ;
  s->io.active = 1;
  s->io.cb = on_signalfd;
  s->io.data = s;
  return 0;
fail:
  err = errno;
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  sigprocmask(SIG_SETMASK, &s->prev, NULL);
  return -err;
}

void lash_signal_stop(lash_loop *loop, lash_signal *s) {
  if (s->fd < 0) return;
  if (loop && s->io.active) {
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    for (int i = 0; i < loop->batch_len; i++)
      if (loop->batch[i].data.ptr == &s->io) loop->batch[i].data.ptr = NULL;
  }
  s->io.active = 0;
  {
    /* what arrived and was not read is dropped, not delivered with its
    ** default action (death) the moment the mask is restored */
    struct signalfd_siginfo si;
    while (read(s->fd, &si, sizeof si) == (ssize_t)sizeof si) {}
  }
  close(s->fd);
  s->fd = -1;
  sigprocmask(SIG_SETMASK, &s->prev, NULL);
}

/* ---- libcurl ------------------------------------------------------- */

static void check_curl_done(lash_loop *loop) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(loop->multi, &left)) != NULL) {
    if (msg->msg == CURLMSG_DONE) {
      CURL *easy = msg->easy_handle;
      CURLcode rc = msg->data.result;
      curl_xfer *x = NULL;
      curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
      curl_multi_remove_handle(loop->multi, easy);
      curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
      loop->ncurl--;
      if (x) {
        lash_curl_done done = x->done;
        void *data = x->data;
        free(x);
        done(loop, easy, rc, data);
      }
    }
  }
}

static void on_curl_io(lash_loop *loop, lash_io *io, unsigned events) {
  curl_sock *cs = io->data;
  int mask = 0, running;
  if (events & LASH_READ) mask |= CURL_CSELECT_IN;
  if (events & LASH_WRITE) mask |= CURL_CSELECT_OUT;
  if (events & LASH_HUP) mask |= CURL_CSELECT_ERR;
  curl_multi_socket_action(loop->multi, cs->fd, mask, &running);
  check_curl_done(loop);
}

static void on_curl_timer(lash_loop *loop, lash_timer *t) {
  int running;
  curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_curl_done(loop);
}

static int curl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp,
                          void *socketp) {
  lash_loop *loop = userp;
  curl_sock *cs = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (cs) {
      lash_io_stop(loop, &cs->io);
      curl_multi_assign(loop->multi, s, NULL);
      free(cs);
    }
    return 0;
  }
  if (!cs) {
    cs = calloc(1, sizeof *cs);
    if (!cs) return -1;
    cs->fd = s;
    cs->loop = loop;
    curl_multi_assign(loop->multi, s, cs);
  }
  {
    unsigned ev = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ev |= LASH_READ;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ev |= LASH_WRITE;
    if (lash_io_start(loop, &cs->io, s, ev, on_curl_io, cs) != 0) return -1;
  }
  return 0;
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
  lash_loop *loop = userp;
  if (timeout_ms < 0) {
    lash_timer_stop(loop, &loop->curl_timer);
    return 0;
  }
  return lash_timer_start(loop, &loop->curl_timer,
                          (uint64_t)timeout_ms * 1000000u, on_curl_timer,
                          loop) == 0 ? 0 : -1;
}

CURLM *lash_loop_multi(lash_loop *loop) { return loop->multi; }

/* libcurl (before 8.x) makes its sockets without close-on-exec: a pooled
** keep-alive connection would live on in every process the host starts. */
static int curl_sockopt_cb(void *clientp, curl_socket_t fd,
                           curlsocktype purpose) {
  int fl = fcntl(fd, F_GETFD);
  (void)clientp;
  (void)purpose;
  if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
  return CURL_SOCKOPT_OK;
}

int lash_curl_add(lash_loop *loop, CURL *easy, lash_curl_done done,
                  void *data) {
  curl_xfer *x;
  CURLMcode mc;
  if (lash_curl_ready(loop, NULL, 0) != 0) return -EINVAL;
  x = malloc(sizeof *x);
  if (!x) return -ENOMEM;
  x->done = done;
  x->data = data;
  curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, curl_sockopt_cb);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, (char *)x);
  mc = curl_multi_add_handle(loop->multi, easy);
  if (mc != CURLM_OK) {
    curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
    free(x);
    return -EINVAL;
  }
  loop->ncurl++;
  return 0;
}

void lash_curl_remove(lash_loop *loop, CURL *easy) {
  curl_xfer *x = NULL;
  curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
  if (!x) return;  /* not running (already done or never added) */
  curl_multi_remove_handle(loop->multi, easy);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
  free(x);
  loop->ncurl--;
}

/* ---- notification fds (lash_fd) ------------------------------------ */

/* Keep tfd armed no later than the earliest timer. Armed early (that
** timer was stopped) only costs the host one spurious wake-up, after which
** lash_loop_run_once re-arms it, so only a new, earlier minimum needs a
** system call. */
static void notify_arm(lash_loop *loop) {
  struct itimerspec its;
  uint64_t due;
  if (loop->tfd < 0 || loop->nheap == 0) return;
  due = loop->heap[0]->due_ns;
  if (loop->tfd_due && loop->tfd_due <= due) return;
  memset(&its, 0, sizeof its);
  its.it_value.tv_sec = (time_t)(due / 1000000000u);
  its.it_value.tv_nsec = (long)(due % 1000000000u);
  if (timerfd_settime(loop->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
    loop->tfd_due = due;
}

static void on_notify(lash_loop *loop, lash_io *io, unsigned events) {
  uint64_t n;
  (void)events;
  while (read(io->fd, &n, sizeof n) > 0) {}
  if (io == &loop->ev_io) loop->woken = 0;
  else loop->tfd_due = 0;  /* a one-shot timerfd disarms when it fires */
}

int lash_loop_notify_enable(lash_loop *loop) {
  struct epoll_event ee;
  int i;
  lash_io *ios[2];
  if (loop->evfd >= 0) return 0;
  loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  loop->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  ios[0] = &loop->ev_io;
  ios[1] = &loop->t_io;
  ios[0]->fd = loop->evfd;
  ios[1]->fd = loop->tfd;
  for (i = 0; i < 2; i++) {
    /* Added by hand rather than with lash_io_start: they must not count
    ** as watchers, or the loop would never look idle. */
    memset(&ee, 0, sizeof ee);
    ee.events = EPOLLIN;
    ee.data.ptr = ios[i];
    if (ios[i]->fd < 0 || epoll_ctl(loop->epfd, EPOLL_CTL_ADD, ios[i]->fd, &ee) != 0) {
      int err = errno;
      if (loop->evfd >= 0) close(loop->evfd);
      if (loop->tfd >= 0) close(loop->tfd);
      loop->evfd = loop->tfd = -1;
      return -err;
    }
    ios[i]->events = LASH_READ;
    ios[i]->active = 1;
    ios[i]->cb = on_notify;
    ios[i]->data = loop;
  }
  notify_arm(loop);
  return 0;
}

void lash_loop_wake(lash_loop *loop) {
  uint64_t one = 1;
  if (loop->evfd < 0 || loop->woken) return;
  if (write(loop->evfd, &one, sizeof one) == (ssize_t)sizeof one) loop->woken = 1;
}

/* ---- the loop ---------------------------------------------------- */

lash_loop *lash_loop_new(void) {
  lash_loop *loop = calloc(1, sizeof *loop);
  if (!loop) return NULL;
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd < 0) {
    free(loop);
    return NULL;
  }
  lash_timer_init(&loop->curl_timer);
  loop->evfd = loop->tfd = -1;
  return loop;
}

/* The open descriptors of this process (NULL when /proc is not there);
** *n their count. */
static int *open_fds(size_t *n) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int *v = NULL, *nv;
  size_t cap = 0;
  *n = 0;
  if (!d) return NULL;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (atoi(e->d_name) == dirfd(d)) continue;  /* the listing's own */
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      nv = realloc(v, cap * sizeof *v);
      if (!nv) break;
      v = nv;
    }
    v[(*n)++] = atoi(e->d_name);
  }
  closedir(d);
  return v;
}

/* libcurl before 8.8 makes its multi handle's wakeup pair without
** close-on-exec (curl issue 13618): every process started afterwards would
** inherit two sockets. Mark what curl_multi_init opened. */
static void cloexec_since(const int *before, size_t nbefore) {
  size_t nafter, i, j;
  int *after = open_fds(&nafter);
  for (i = 0; i < nafter; i++) {
    int fl, seen = 0;
    for (j = 0; j < nbefore && !seen; j++) seen = before[j] == after[i];
    if (seen) continue;
    fl = fcntl(after[i], F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(after[i], F_SETFD, fl | FD_CLOEXEC);
  }
  free(after);
}

/* libcurl's global state and the multi handle are made at the loop's
** first transfer (or HTTP context), not with the loop: a process that
** never speaks HTTP (`lash sandbox exec`, a host stepping only local
** tools) skips curl_global_init (TLS initialisation) and, in the CLI,
** loading libcurl at all (curl_dl.h). */
int lash_curl_ready(lash_loop *loop, char *err, size_t errsz) {
  if (loop->multi) return 0;
  if (lash_curl_load(err, errsz) != 0) return -1;
  /* Reference-counted by libcurl (and thread-safe since 7.84); paired with
  ** the cleanup in lash_loop_free, so each loop holds one reference. */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    if (err && errsz) snprintf(err, errsz, "libcurl's global initialisation failed");
    return -1;
  }
  {
    size_t nbefore;
    int *before = open_fds(&nbefore);
    loop->multi = curl_multi_init();
    if (loop->multi && before) cloexec_since(before, nbefore);
    free(before);
  }
  if (!loop->multi) {
    curl_global_cleanup();
    if (err && errsz) snprintf(err, errsz, "cannot create a libcurl multi handle");
    return -1;
  }
  curl_multi_setopt(loop->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
  curl_multi_setopt(loop->multi, CURLMOPT_SOCKETDATA, loop);
  curl_multi_setopt(loop->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
  curl_multi_setopt(loop->multi, CURLMOPT_TIMERDATA, loop);
  curl_multi_setopt(loop->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
  /* Multiplexed calls share a connection; libcurl's default cap of 100
  ** streams per connection would open a second one under load (100
  ** concurrent sandbox commands). The server's SETTINGS still applies. */
  curl_multi_setopt(loop->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000L);
  return 0;
}

void lash_loop_free(lash_loop *loop) {
  if (!loop) return;
  /* curl_multi_cleanup calls the socket callback with POLL_REMOVE for the
  ** sockets it still holds, which frees our curl_sock records. */
  if (loop->multi) curl_multi_cleanup(loop->multi);
  if (loop->evfd >= 0) close(loop->evfd);
  if (loop->tfd >= 0) close(loop->tfd);
  close(loop->epfd);
  free(loop->heap);
  if (loop->multi) curl_global_cleanup();
  free(loop);
}

int lash_loop_alive(const lash_loop *loop) {
  /* curl's own timer does not keep the loop alive by itself. */
  size_t timers = loop->nheap - loop->nweak -
                  (lash_timer_active(&loop->curl_timer) ? 1 : 0);
  return loop->ncurl > 0 || loop->nchildren > 0 || timers > 0 ||
         loop->nio > 0;
}

int lash_loop_fd(const lash_loop *loop) { return loop->epfd; }

int lash_loop_run_once(lash_loop *loop, int timeout_ms) {
  struct epoll_event evs[64];
  int next = lash_loop_next_timeout(loop), n, i, ran = 0;
  if (next >= 0 && (timeout_ms < 0 || next < timeout_ms)) timeout_ms = next;
  n = epoll_wait(loop->epfd, evs, 64, timeout_ms);
  if (n < 0) {
    if (errno != EINTR) return -errno;
    n = 0;
  }
  loop->batch = evs;
  loop->batch_len = n;
  for (i = 0; i < n; i++) {
    lash_io *io = evs[i].data.ptr;
    unsigned ev = 0;
    /* A callback earlier in this batch may have stopped this watcher. */
    if (!io || !io->active) continue;
    if (evs[i].events & (EPOLLIN | EPOLLRDHUP)) ev |= LASH_READ;
    if (evs[i].events & EPOLLOUT) ev |= LASH_WRITE;
    if (evs[i].events & (EPOLLHUP | EPOLLERR)) ev |= LASH_HUP | LASH_READ;
    io->cb(loop, io, ev);
    ran++;
  }
  loop->batch = NULL;
  loop->batch_len = 0;
  ran += run_timers(loop);
  if (loop->tfd >= 0) notify_arm(loop);
  return ran;
}
