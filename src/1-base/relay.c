/*
** relay.c: the socket relays of relay.h: one watcher per socket, asking
** for reads while its direction's buffer is empty and for writes while
** the other direction has bytes for it.
*/
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF (64u << 10)

typedef struct way {          /* bytes read from fd[i], going to fd[1-i] */
  size_t len, off;
  int eof;                    /* fd[i] said end of file */
  int shut;                   /* ... and fd[1-i] was told (SHUT_WR) */
  char buf[RELAY_BUF];
} way;

struct lash_relay {
  lash_relay *next, *prev;
  lash_relay_set *set;
  lash_loop *loop;
  int fd[2];
  lash_io io[2];
  way w[2];
};

void lash_relay_set_init(lash_relay_set *set) {
  memset(set, 0, sizeof *set);
}

static void relay_free(lash_relay *r) {
  int i;
  for (i = 0; i < 2; i++) {
    lash_io_stop(r->loop, &r->io[i]);
    if (r->fd[i] >= 0) close(r->fd[i]);
  }
  if (r->prev) r->prev->next = r->next; else r->set->head = r->next;
  if (r->next) r->next->prev = r->prev;
  r->set->n--;
  free(r);
}

static void on_io(lash_loop *loop, lash_io *io, unsigned events);

/* Ask for what each socket is waiting for; end the relay when both ways
** are over. Returns 0, or -1 when r was freed. */
static int rearm(lash_relay *r) {
  int i;
  if (r->w[0].shut && r->w[1].shut) {
    relay_free(r);
    return -1;
  }
  for (i = 0; i < 2; i++) {
    unsigned ev = 0;
    if (!r->w[i].eof && r->w[i].len == 0) ev |= LASH_READ;
    if (r->w[1 - i].len > r->w[1 - i].off) ev |= LASH_WRITE;
    if (ev == 0) {
      lash_io_stop(r->loop, &r->io[i]);
    } else if (!r->io[i].active || r->io[i].events != ev) {
      if (lash_io_start(r->loop, &r->io[i], r->fd[i], ev, on_io, r) != 0) {
        relay_free(r);
        return -1;
      }
    }
  }
  return 0;
}

/* Move way i's bytes on to fd[1-i]; 0, or -1 on a broken socket. */
static int flush(lash_relay *r, int i) {
  way *w = &r->w[i];
  while (w->off < w->len) {
    ssize_t n = send(r->fd[1 - i], w->buf + w->off, w->len - w->off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -1;
    }
    w->off += (size_t)n;
    r->set->bytes += (uint64_t)n;
  }
  w->len = w->off = 0;
  if (w->eof && !w->shut) {
    shutdown(r->fd[1 - i], SHUT_WR);
    w->shut = 1;
  }
  return 0;
}

static void on_io(lash_loop *loop, lash_io *io, unsigned events) {
  lash_relay *r = io->data;
  int i = io == &r->io[0] ? 0 : 1;
  (void)loop;
  if ((events & LASH_WRITE) && flush(r, 1 - i) < 0) {
    relay_free(r);
    return;
  }
  if ((events & (LASH_READ | LASH_HUP)) && !r->w[i].eof && r->w[i].len == 0) {
    ssize_t n;
    do n = recv(r->fd[i], r->w[i].buf, RELAY_BUF, 0); while (n < 0 && errno == EINTR);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      relay_free(r);
      return;
    }
    if (n == 0) r->w[i].eof = 1;
    if (n > 0) r->w[i].len = (size_t)n;
    if (flush(r, i) < 0) {
      relay_free(r);
      return;
    }
  }
  rearm(r);
}

int lash_relay_add(lash_relay_set *set, lash_loop *loop, int a, int b) {
  lash_relay *r;
  int i, fds[2] = {a, b};
  for (i = 0; i < 2; i++) {
    int fl = fcntl(fds[i], F_GETFL);
    if (fl < 0 || fcntl(fds[i], F_SETFL, fl | O_NONBLOCK) != 0) {
      close(a);
      close(b);
      return -EBADF;
    }
  }
  r = calloc(1, sizeof *r);
  if (!r) {
    close(a);
    close(b);
    return -ENOMEM;
  }
  r->set = set;
  r->loop = loop;
  r->fd[0] = a;
  r->fd[1] = b;
  r->next = set->head;
  if (set->head) set->head->prev = r;
  set->head = r;
  set->n++;
  set->started++;
  return rearm(r) == 0 ? 0 : -EIO;
}

void lash_relay_close_all(lash_relay_set *set, lash_loop *loop) {
  (void)loop;
  while (set->head) relay_free(set->head);
}
