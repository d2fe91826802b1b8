/*
** egress.h: a filtering egress proxy on lash's loop (prefix lash_egress_):
** HTTP (CONNECT tunnels and plain http:// requests), SOCKS5 (CONNECT) and
** DNS (UDP and TCP) on listening sockets its owner hands over -- for a
** local sandbox, sockets inside the jail's network namespace, which has
** no other way out. Every request is decided by a lash_netpolicy by name
** and by the addresses the name resolves to (resolver.h), so an allowed
** name cannot lead to a loopback, link-local, metadata or private address
** the policy does not allow by address. TLS is tunnelled, never opened.
** A refusal answers in the protocol's own terms with a message a model
** can act on, and every decision is reported to the owner's callback.
** Memory is bounded: at most max_conns connections of two fixed buffers
** each, at most a fixed number of DNS questions in flight. Every watcher
** is weak: the proxy serves while the loop runs, never keeps it running.
*/
#ifndef lash_egress_h
#define lash_egress_h

#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "netpolicy.h"
#include "resolver.h"

#define LASH_EGRESS_MAX_CONNS 2048
#define LASH_EGRESS_BUF 8192            /* per direction and connection */
#define LASH_EGRESS_CONNECT_MS 10000
#define LASH_EGRESS_HEAD_MS 30000

typedef struct lash_egress lash_egress;

enum {                                  /* what a listening socket speaks */
  LASH_EGRESS_HTTP, LASH_EGRESS_SOCKS, LASH_EGRESS_DNS_UDP, LASH_EGRESS_DNS_TCP
};

enum {                                  /* lash_egress_event.verdict */
  LASH_EGRESS_ALLOWED, LASH_EGRESS_DENIED, LASH_EGRESS_FAILED
};

typedef struct lash_egress_event {
  int verdict;
  const char *via;          /* "connect", "http", "socks5", "dns" */
  const char *host;         /* as asked: a name or an address */
  uint16_t port;            /* 0 for a DNS question */
  const char *addr;         /* the address connected to or refused, or NULL */
  const char *message;      /* denied or failed: what the client was told */
} lash_egress_event;

typedef void (*lash_egress_cb)(void *data, const lash_egress_event *ev);

typedef struct lash_egress_opts {
  size_t max_conns;         /* 0: LASH_EGRESS_MAX_CONNS */
  unsigned connect_ms;      /* 0: LASH_EGRESS_CONNECT_MS, per address */
  unsigned head_ms;         /* 0: LASH_EGRESS_HEAD_MS, to send a request */
  lash_egress_cb on_event;  /* may be NULL */
  void *data;
} lash_egress_opts;

typedef struct lash_egress_stats {
  size_t open, peak;        /* client connections now, and at most */
  uint64_t accepted, allowed, denied, failed;
  uint64_t bytes_up, bytes_down;
} lash_egress_stats;

/* A proxy deciding by pol (which must outlive it) and resolving through
** res (likewise). NULL when out of memory. */
lash_egress *lash_egress_new(lash_loop *loop, const lash_netpolicy *pol,
                             lash_resolver *res, const lash_egress_opts *o);
/* Serve the listening (or, for DNS_UDP, bound) socket fd, which the proxy
** now owns and closes. 0 or -errno (fd closed all the same). */
int  lash_egress_listen(lash_egress *e, int fd, int kind);
/* Close every socket and free it all. Callbacks do not run after. */
void lash_egress_free(lash_egress *e);
void lash_egress_stats_get(const lash_egress *e, lash_egress_stats *s);

/* The refusal of host:port (port 0: a DNS lookup) as a client reads it:
** "lash: egress to example.com:443 is not allowed by this sandbox's
** network policy; allowed: ...", with the reason for verdict (see
** netpolicy.h) and, when given, the address it concerns. Returns the
** length (truncated to cap - 1). */
size_t lash_egress_refusal(const lash_netpolicy *pol, int verdict,
                           const char *host, uint16_t port, const char *addr,
                           char *out, size_t cap);

#endif
