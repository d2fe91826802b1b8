/*
** loop.h: lash's single-threaded event loop (internal API).
** One epoll set over file descriptors, a timer heap, child processes
** (through pidfds, so no process-wide SIGCHLD handler) and libcurl's multi
** interface. No threads. Every watcher is a struct the caller embeds in its
** own object; the loop never allocates on behalf of a watcher, so the owner
** of the object is the owner of the watcher.
** Prefix lash_ by watcher: lash_loop_, lash_io_, lash_timer_, lash_child_,
** lash_signal_, lash_curl_; the clocks lash_now_ns, lash_wall_now.
*/
#ifndef lash_loop_h
#define lash_loop_h

#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <curl/curl.h>
#include "curl_dl.h"

typedef struct lash_loop lash_loop;

/* ---- file descriptors ---------------------------------------------- */

#define LASH_READ  1u
#define LASH_WRITE 2u
#define LASH_HUP   4u   /* reported with READ when the peer hung up / error */

typedef struct lash_io lash_io;
typedef void (*lash_io_cb)(lash_loop *loop, lash_io *io, unsigned events);

struct lash_io {
  int fd;
  unsigned events;       /* what we asked for */
  int active;
  lash_io_cb cb;
  void *data;
  int weak;              /* set while stopped: does not keep the loop alive */
};

/* Start (or change) watching fd for events; returns 0 or -errno. */
int  lash_io_start(lash_loop *loop, lash_io *io, int fd, unsigned events,
                   lash_io_cb cb, void *data);
/* Stop watching; idempotent. Does not close the fd. */
void lash_io_stop(lash_loop *loop, lash_io *io);

/* ---- timers -------------------------------------------------------- */

typedef struct lash_timer lash_timer;
typedef void (*lash_timer_cb)(lash_loop *loop, lash_timer *t);

struct lash_timer {
  uint64_t due_ns;       /* monotonic */
  size_t heap_index;     /* (size_t)-1 when not armed */
  lash_timer_cb cb;
  void *data;
  int weak;              /* set while disarmed (after lash_timer_init): does
                         ** not keep the loop alive */
};

void lash_timer_init(lash_timer *t);
/* Arm a one-shot timer delay_ns from now (re-arms if already armed). */
int  lash_timer_start(lash_loop *loop, lash_timer *t, uint64_t delay_ns,
                      lash_timer_cb cb, void *data);
/* Disarm; idempotent. */
void lash_timer_stop(lash_loop *loop, lash_timer *t);
int  lash_timer_active(const lash_timer *t);

/* ---- child processes ---------------------------------------------- */

typedef struct lash_child lash_child;
/* status is the raw wait status (WIFEXITED etc. apply). */
typedef void (*lash_child_cb)(lash_loop *loop, lash_child *c, int status);

struct lash_child {
  pid_t pid;
  int pidfd;             /* -1 when not watching through a pidfd */
  int polling;           /* watching by waitpid polls (no pidfd support) */
  lash_io io;
  lash_timer poll;
  lash_child_cb cb;
  void *data;
};

/* Watch pid (a child of this process) until it exits, then reap it and
** call cb once. Returns 0 or -errno. */
int  lash_child_start(lash_loop *loop, lash_child *c, pid_t pid,
                      lash_child_cb cb, void *data);
/* Stop watching; does not kill or reap. Idempotent. */
void lash_child_stop(lash_loop *loop, lash_child *c);
/* Send a signal through the pidfd (safe against pid reuse). */
int  lash_child_kill(lash_child *c, int sig);

/* ---- signals ------------------------------------------------------- */

/* Signals read on the loop through a signalfd, for a program that owns the
** process (the CLI host): no handler runs, the callback is an ordinary loop
** callback. Starting blocks the signals in the calling thread (so start it
** before any thread exists: threads inherit the mask) and stopping restores
** the previous mask. Children lash spawns reset their mask before exec. The
** watcher does not keep the loop alive. The library never starts one by
** itself: embedding hosts keep their own signal handling. */
typedef struct lash_signal lash_signal;
typedef void (*lash_signal_cb)(lash_loop *loop, lash_signal *s, int signo);

struct lash_signal {
  int fd;                /* the signalfd, -1 when stopped */
  lash_io io;
  sigset_t mask, prev;
  lash_signal_cb cb;
  void *data;
};

/* Watch signals sigs[0..n-1]. Returns 0 or -errno. */
int  lash_signal_start(lash_loop *loop, lash_signal *s, const int *sigs,
                       int n, lash_signal_cb cb, void *data);
/* Stop watching, close the fd and restore the signal mask; idempotent. A
** loop already freed is passed as NULL. */
void lash_signal_stop(lash_loop *loop, lash_signal *s);

/* ---- libcurl multi ------------------------------------------------- */

typedef void (*lash_curl_done)(lash_loop *loop, CURL *easy, CURLcode rc,
                               void *data);
/* libcurl ready for this loop (loaded, initialised, its multi handle
** made): done at the first transfer; callers that make easy or share
** handles before one call it first. 0, or -1 with why in err. */
int  lash_curl_ready(lash_loop *loop, char *err, size_t errsz);
/* Add an easy handle to the loop's multi handle; done is called once when
** the transfer ends (success or failure). The caller owns the easy handle
** and must call lash_curl_remove before cleaning it up if it is still
** running. */
int  lash_curl_add(lash_loop *loop, CURL *easy, lash_curl_done done,
                   void *data);
void lash_curl_remove(lash_loop *loop, CURL *easy);
CURLM *lash_loop_multi(lash_loop *loop);

/* ---- the loop itself ---------------------------------------------- */

lash_loop *lash_loop_new(void);
/* Frees the loop. Watchers still registered are simply forgotten; their
** owners must have stopped them (the Lua runtime does that first). */
void lash_loop_free(lash_loop *loop);

/* Wait at most timeout_ms (-1: until something happens, 0: poll) and
** dispatch what is ready: fd events, due timers, finished transfers.
** Returns the number of callbacks run, or -errno. */
int  lash_loop_run_once(lash_loop *loop, int timeout_ms);
/* Non-zero while any watcher, timer, child or transfer is registered,
** weak watchers and timers aside (a proxy that serves whoever comes by
** must not make an idle loop wait forever). */
int  lash_loop_alive(const lash_loop *loop);
/* The epoll fd: readable when lash_loop_run_once(loop, 0) has I/O to
** dispatch; after lash_loop_notify_enable also when a timer is due and
** after lash_loop_wake, until the next lash_loop_run_once. */
int  lash_loop_fd(const lash_loop *loop);
/* For hosts that wait on lash_loop_fd themselves (lash_fd in lash.h): add
** an eventfd and a timerfd to the epoll set (neither keeps the loop
** alive). Costs no system call until called. Returns 0 or -errno. */
int  lash_loop_notify_enable(lash_loop *loop);
/* Make lash_loop_fd readable (the runtime calls it when tasks become
** ready). A no-op before lash_loop_notify_enable; cheap while signalled. */
void lash_loop_wake(lash_loop *loop);
/* Milliseconds until the next timer, -1 if none. */
int  lash_loop_next_timeout(const lash_loop *loop);
/* The two clocks, one owner (loop.c) for everyone: lash_now_ns is
** monotonic (durations, deadlines, timers); lash_wall_now is the wall clock
** in seconds since the Unix epoch, with a fraction (timestamps, expiry
** times that outlive the process). */
uint64_t lash_now_ns(void);
double   lash_wall_now(void);

#endif
