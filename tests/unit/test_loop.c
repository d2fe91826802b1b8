/* test_loop.c: the event loop on its own: timers, fds, children, curl. */
#include "loop.h"
#include "t.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int order[8], norder;
static void on_timer(lash_loop *l, lash_timer *t) { (void)l; order[norder++] = (int)(intptr_t)t->data; }

static char got[64];
static size_t ngot;
static int hup;
static void on_read(lash_loop *l, lash_io *io, unsigned ev) {
  ssize_t n = read(io->fd, got + ngot, sizeof got - 1 - ngot);
  if (n > 0) ngot += (size_t)n;
  if (n == 0 || (ev & LASH_HUP)) { hup = 1; lash_io_stop(l, io); }
}

static int child_status = -1;
static void on_child(lash_loop *l, lash_child *c, int status) { (void)l; (void)c; child_status = status; }

static CURLcode curl_rc = CURLE_OK;
static int curl_done;
static void on_curl(lash_loop *l, CURL *e, CURLcode rc, void *d) { (void)l; (void)e; (void)d; curl_rc = rc; curl_done = 1; }

int main(void) {
  lash_loop *loop = lash_loop_new();
  lash_timer t[4];
  int i, fds[2];
  T_OK(loop != NULL, "loop created");
  T_OK(!lash_loop_alive(loop), "a new loop is idle");

  /* timers fire in deadline order, a stopped one never fires */
  for (i = 0; i < 4; i++) lash_timer_init(&t[i]);
  lash_timer_start(loop, &t[0], 30000000, on_timer, (void *)(intptr_t)3);
  lash_timer_start(loop, &t[1], 10000000, on_timer, (void *)(intptr_t)1);
  lash_timer_start(loop, &t[2], 20000000, on_timer, (void *)(intptr_t)2);
  lash_timer_start(loop, &t[3], 15000000, on_timer, (void *)(intptr_t)9);
  lash_timer_stop(loop, &t[3]);
  lash_timer_stop(loop, &t[3]);
  T_OK(lash_loop_alive(loop), "armed timers keep the loop alive");
  while (lash_loop_alive(loop)) lash_loop_run_once(loop, -1);
  T_EQ_INT(norder, 3, "three timers fired");
  T_OK(order[0] == 1 && order[1] == 2 && order[2] == 3, "in deadline order");
  T_OK(!lash_timer_active(&t[0]), "fired timers are disarmed");

  /* a bounded wait returns on time with nothing to do */
  {
    int n = norder;
    lash_timer_start(loop, &t[0], 5000000000ull, on_timer, (void *)(intptr_t)7);
    T_EQ_INT(lash_loop_run_once(loop, 20), 0, "run_once(20ms) returns with nothing ready");
    T_OK(norder == n && lash_timer_active(&t[0]), "and does not wait for the far timer (still armed)");
    T_OK(lash_loop_next_timeout(loop) > 1000, "next timeout reports the far timer");
    lash_timer_stop(loop, &t[0]);
  }

  /* a delay past what the clock can count means never, not at once */
  {
    int n = norder;
    lash_timer_start(loop, &t[0], UINT64_MAX, on_timer, (void *)(intptr_t)8);
    lash_timer_start(loop, &t[1], UINT64_MAX / 2 + 1, on_timer, (void *)(intptr_t)8);
    T_EQ_INT(lash_loop_run_once(loop, 10), 0, "a saturated timer does not fire");
    T_EQ_INT(norder, n, "nothing fired");
    T_EQ_INT(lash_loop_next_timeout(loop), INT_MAX, "next timeout is clamped to INT_MAX ms");
    lash_timer_stop(loop, &t[0]);
    lash_timer_stop(loop, &t[1]);
  }

  /* fd readiness and hang-up */
  {
    lash_io io = {0};
    T_OK(pipe(fds) == 0, "pipe");
    T_EQ_INT(lash_io_start(loop, &io, fds[0], LASH_READ, on_read, NULL), 0, "watch the read end");
    T_OK(write(fds[1], "hello", 5) == 5, "write");
    close(fds[1]);
    while (!hup) lash_loop_run_once(loop, 1000);
    T_EQ_MEM(got, ngot, "hello", 5, "read what was written");
    T_OK(!io.active, "watcher stopped itself at EOF");
    lash_io_stop(loop, &io);
    close(fds[0]);
  }

  /* children through pidfds: exit status and signals */
  {
    lash_child c;
    pid_t pid = fork();
    if (pid == 0) _exit(7);
    T_EQ_INT(lash_child_start(loop, &c, pid, on_child, NULL), 0, "watch child");
    while (child_status < 0) lash_loop_run_once(loop, 1000);
    T_OK(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 7, "exit status 7 reported");
    T_OK(waitpid(pid, NULL, WNOHANG) < 0, "child already reaped (no zombie)");
    child_status = -1;
    pid = fork();
    if (pid == 0) { pause(); _exit(0); }
    T_EQ_INT(lash_child_start(loop, &c, pid, on_child, NULL), 0, "watch sleeping child");
    T_EQ_INT(lash_child_kill(&c, SIGKILL), 0, "kill through the pidfd");
    while (child_status < 0) lash_loop_run_once(loop, 1000);
    T_OK(WIFSIGNALED(child_status) && WTERMSIG(child_status) == SIGKILL, "killed by SIGKILL");
    T_EQ_INT(lash_child_kill(&c, SIGKILL), -ESRCH, "kill after exit is refused");
  }

  /* a curl transfer to a closed port ends with a connect error */
  {
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, "http://127.0.0.1:1/");
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    T_EQ_INT(lash_curl_add(loop, e, on_curl, NULL), 0, "transfer added");
    while (!curl_done) lash_loop_run_once(loop, 1000);
    T_EQ_INT(curl_rc, CURLE_COULDNT_CONNECT, "connect refused is reported");
    lash_curl_remove(loop, e);  /* idempotent after done */
    curl_easy_cleanup(e);
  }

  T_OK(!lash_loop_alive(loop), "everything finished: the loop is idle");
  lash_loop_free(loop);
  return T_DONE();
}
