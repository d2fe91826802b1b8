/*
** egress.c: the filtering egress proxy (egress.h). A client connection
** goes HEAD (its request: an HTTP head, a SOCKS5 greeting and request, or
** a DNS-over-TCP question) -> RESOLVE -> CONNECT (each allowed address in
** turn) -> RELAY (both directions through two fixed buffers, each side
** read only while the other has room, so a slow end slows its peer instead
** of filling memory), or CLOSING when it is refused: the answer is flushed,
** the write side shut, and what the client still sends is read and
** dropped for a moment so the answer is not lost to a reset. Each callback
** does one read and one write per socket, so 1,000 busy connections cost a
** step of the loop 64 short callbacks, never a long one.
**
** Plain http:// requests go upstream in origin form with the Host header
** set to the authority that was decided on (a different Host would reach
** another site on an allowed server) and "Connection: close"; the first
** response head gets "Connection: close" too, so clients do not reuse the
** connection for another host. Addresses the DNS side handed out are
** remembered for a while, so a client that resolved an allowed name itself
** and connects by address (socks5://, not socks5h://) is judged by that
** name.
*/
#include "egress.h"

#include "dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_LISTENERS 8
#define ACCEPT_BATCH 32
#define DNS_BATCH 16
#define MAX_DNSQ 256
#define HANDOUTS 512
#define HANDOUT_NS (600ull * 1000000000ull)
#define DNS_TTL_MAX 60
#define DRAIN_MS 2000
#define MSG_CAP 1024

enum { S_HEAD, S_RESOLVE, S_CONNECT, S_RELAY, S_CLOSING };

typedef struct conn conn;
typedef struct dnsq dnsq;

typedef struct listener {
  lash_egress *e;
  lash_io io;
  int fd, kind;
} listener;

struct conn {
  lash_egress *e;
  conn *prev, *next;
  int kind, state, socks_stage;
  const char *via;
  int cfd, ufd;
  lash_io cio, uio;
  lash_timer timer;
  lash_resolve_req *rq;
  dnsq *dq;                     /* DNS over TCP: the question in flight */
  char host[LASH_NETNAME_MAX + 1];
  uint16_t port;
  int literal;
  lash_netaddr lit;
  lash_netaddr cand[LASH_RESOLVE_MAX_ADDRS];
  size_t ncand, icand;
  int last_err;
  char addr[46];
  uint8_t *c2u, *u2c;           /* client to upstream, and back */
  size_t c2u_off, c2u_len, u2c_off, u2c_len;
  int c_eof, u_eof, c_shut, u_shut;
  int rewrite_resp;             /* plain HTTP: the first response head */
  uint8_t mem[];                /* the two buffers */
};

struct dnsq {
  lash_egress *e;
  dnsq *prev, *next;
  lash_resolve_req *rq;
  conn *tcp;                    /* or NULL: answer by UDP to from */
  listener *udp;
  struct sockaddr_storage from;
  socklen_t fromlen;
  lash_dns_question q;
  uint8_t query[512];           /* the header and the question */
};

typedef struct handout {
  lash_netaddr addr;
  uint64_t expires_ns;
  char name[LASH_NETNAME_MAX + 1];
} handout;

struct lash_egress {
  lash_loop *loop;
  const lash_netpolicy *pol;
  lash_resolver *res;
  lash_egress_opts o;
  listener ls[MAX_LISTENERS];
  size_t nls;
  int paused;
  lash_timer resume;            /* accept again after EMFILE */
  conn *conns;
  dnsq *dnsqs;
  size_t ndnsq;
  lash_egress_stats st;
  handout *handouts;            /* a ring */
  size_t next_handout;
  uint8_t scratch[LASH_EGRESS_BUF + 256];
};

static int update(conn *c);
static void conn_close(conn *c);

/* ---- messages and events -------------------------------------------- */

size_t lash_egress_refusal(const lash_netpolicy *pol, int verdict,
                           const char *host, uint16_t port, const char *addr,
                           char *out, size_t cap) {
  char allowed[600], what[96], reason[320] = "";
  const lash_netpolicy *top = pol;
  lash_netaddr a;
  int n;
  if (port) {
    int v6 = strchr(host, ':') != NULL;
    snprintf(what, sizeof what, "egress to %s%s%s:%u", v6 ? "[" : "", host,
             v6 ? "]" : "", (unsigned)port);
  } else {
    snprintf(what, sizeof what, "a DNS lookup of %s", host);
  }
  switch (verdict) {
  case LASH_NETPOL_DENIED:
    snprintf(reason, sizeof reason, " (%s is on its deny list)",
             addr ? addr : host);
    break;
  case LASH_NETPOL_SPECIAL:
    if (addr && lash_netaddr_parse(addr, strlen(addr), &a) == 0) {
      if (strcmp(addr, host) == 0)
        snprintf(reason, sizeof reason, " (%s is %s, which only a rule "
                 "naming the address allows)", addr, lash_netaddr_special(&a));
      else
        snprintf(reason, sizeof reason, " (%s resolves to %s, %s, which only "
                 "a rule naming the address allows)", host, addr,
                 lash_netaddr_special(&a));
    }
    break;
  case LASH_NETPOL_OUTER:
    snprintf(reason, sizeof reason, " (the policy of whoever created the "
             "sandbox refuses it; an attach can only narrow that)");
    break;
  default:
    break;
  }
  /* what the holder may reach is its own (narrowest) allow list */
  lash_netpol_describe(top, allowed, sizeof allowed);
  n = snprintf(out, cap, "lash: %s is not allowed by this sandbox's network "
               "policy%s; allowed: %s", what, reason, allowed);
  if (n < 0) return 0;
  return (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
}

static void report(lash_egress *e, int verdict, const char *via,
                   const char *host, uint16_t port, const char *addr,
                   const char *message) {
  lash_egress_event ev;
  if (verdict == LASH_EGRESS_ALLOWED) e->st.allowed++;
  else if (verdict == LASH_EGRESS_DENIED) e->st.denied++;
  else e->st.failed++;
  if (!e->o.on_event) return;
  ev.verdict = verdict;
  ev.via = via;
  ev.host = host;
  ev.port = port;
  ev.addr = addr && *addr ? addr : NULL;
  ev.message = message;
  e->o.on_event(e->o.data, &ev);
}

/* ---- handouts: addresses the DNS side answered with ------------------ */

static void handout_add(lash_egress *e, const lash_netaddr *a,
                        const char *name) {
  handout *h;
  if (!e->handouts &&
      !(e->handouts = calloc(HANDOUTS, sizeof *e->handouts)))
    return;
  h = &e->handouts[e->next_handout++ % HANDOUTS];
  h->addr = *a;
  h->expires_ns = lash_now_ns() + HANDOUT_NS;
  strcpy(h->name, name);
}

static const char *handout_name(lash_egress *e, const lash_netaddr *a) {
  uint64_t now = lash_now_ns();
  size_t i;
  if (!e->handouts) return NULL;
  for (i = 0; i < HANDOUTS; i++) {
    handout *h = &e->handouts[i];
    if (h->expires_ns > now && h->addr.family == a->family &&
        memcmp(h->addr.b, a->b, 16) == 0)
      return h->name;
  }
  return NULL;
}

/* ---- sockets -------------------------------------------------------- */

static int set_io(conn *c, lash_io *io, int fd, unsigned ev, lash_io_cb cb) {
  if (fd < 0 || ev == 0) {
    lash_io_stop(c->e->loop, io);
    return 0;
  }
  if (io->active && io->events == ev) return 0;
  if (!io->active) io->weak = 1;
  return lash_io_start(c->e->loop, io, fd, ev, cb, c) == 0 ? 0 : -1;
}

/* One send of what is pending; 0, or -1 when the peer is gone. */
static int flush(int fd, uint8_t *b, size_t *off, size_t *len, uint64_t *count) {
  if (*off < *len) {
    ssize_t n = send(fd, b + *off, *len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    *off += (size_t)n;
    if (count) *count += (uint64_t)n;
  }
  if (*off == *len) *off = *len = 0;
  return 0;
}

/* One read into the free end of b: >0 bytes, 0 at EOF, -1 on error, -2
** when nothing is there or there is no room. */
static ssize_t fill(int fd, uint8_t *b, size_t *off, size_t *len) {
  ssize_t n;
  if (*len == LASH_EGRESS_BUF && *off > 0) {
    memmove(b, b + *off, *len - *off);
    *len -= *off;
    *off = 0;
  }
  if (*len == LASH_EGRESS_BUF) return -2;
  n = recv(fd, b + *len, LASH_EGRESS_BUF - *len, MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? -2 : -1;
  *len += (size_t)n;
  return n;
}

static void queue_reply(conn *c, const void *p, size_t n) {
  if (n > LASH_EGRESS_BUF - c->u2c_len) n = LASH_EGRESS_BUF - c->u2c_len;
  memcpy(c->u2c + c->u2c_len, p, n);
  c->u2c_len += n;
}

/* ---- answers to the client ------------------------------------------ */

static void on_timer(lash_loop *loop, lash_timer *t);

static void start_closing(conn *c) {
  c->state = S_CLOSING;
  c->rewrite_resp = 0;          /* what goes out now is our own answer */
  c->c2u_off = c->c2u_len = 0;
  if (c->ufd >= 0) {
    lash_io_stop(c->e->loop, &c->uio);
    close(c->ufd);
    c->ufd = -1;
  }
  lash_timer_start(c->e->loop, &c->timer, DRAIN_MS * 1000000ull, on_timer, c);
}

static void http_error(conn *c, int code, const char *tag, const char *msg) {
  char head[2 * MSG_CAP + 256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8"
                   "\r\nContent-Length: %zu\r\nConnection: close\r\n"
                   "Proxy-Agent: lash\r\nX-Lash-Egress: %s\r\n\r\n%s\n",
                   code, msg, strlen(msg) + 1, tag, msg);
  if (n > 0) queue_reply(c, head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
}

static void socks_reply(conn *c, uint8_t rep) {
  uint8_t r[10] = {5, rep, 0, 1, 0, 0, 0, 0, 0, 0};
  queue_reply(c, r, sizeof r);
}

static int socks_code(int err) {
  switch (err) {
  case ECONNREFUSED: return 5;
  case ENETUNREACH: return 3;
  case EHOSTUNREACH: case ETIMEDOUT: return 4;
  default: return 1;
  }
}

/* Refuse the request (a policy verdict): tell the client, report, close. */
static int refuse(conn *c, int verdict, const char *addr) {
  char msg[MSG_CAP];
  lash_egress_refusal(c->e->pol, verdict, c->host, c->port, addr, msg,
                      sizeof msg);
  if (c->kind == LASH_EGRESS_SOCKS) socks_reply(c, 2);
  else http_error(c, 403, "denied", msg);
  report(c->e, LASH_EGRESS_DENIED, c->via, c->host, c->port, addr, msg);
  start_closing(c);
  return update(c);
}

/* The request was allowed but cannot be carried out. */
static int failed(conn *c, int err, const char *why) {
  char msg[MSG_CAP];
  snprintf(msg, sizeof msg, "lash: egress to %s:%u failed: %s", c->host,
           (unsigned)c->port, why);
  if (c->kind == LASH_EGRESS_SOCKS) socks_reply(c, (uint8_t)socks_code(err));
  else http_error(c, err == ETIMEDOUT ? 504 : 502, "failed", msg);
  report(c->e, LASH_EGRESS_FAILED, c->via, c->host, c->port, c->addr, msg);
  start_closing(c);
  return update(c);
}

static int bad_request(conn *c, int code, const char *msg) {
  if (c->kind == LASH_EGRESS_SOCKS) socks_reply(c, 1);
  else if (c->kind == LASH_EGRESS_HTTP) http_error(c, code, "refused", msg);
  start_closing(c);
  return update(c);
}

/* ---- connecting ----------------------------------------------------- */

static void on_upstream(lash_loop *loop, lash_io *io, unsigned ev);

static void to_sockaddr(const lash_netaddr *a, uint16_t port,
                        struct sockaddr_storage *ss, socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  if (a->family == 6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(port);
    memcpy(&s6->sin6_addr, a->b, 16);
    *len = sizeof *s6;
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    memcpy(&s4->sin_addr, a->b, 4);
    *len = sizeof *s4;
  }
}

static int connected(conn *c) {
  static const char ok[] = "HTTP/1.1 200 Connection established\r\n"
                           "Proxy-Agent: lash\r\n\r\n";
  lash_timer_stop(c->e->loop, &c->timer);
  report(c->e, LASH_EGRESS_ALLOWED, c->via, c->host, c->port, c->addr, NULL);
  if (strcmp(c->via, "connect") == 0) queue_reply(c, ok, sizeof ok - 1);
  else if (c->kind == LASH_EGRESS_SOCKS) socks_reply(c, 0);
  c->state = S_RELAY;
  if (flush(c->ufd, c->c2u, &c->c2u_off, &c->c2u_len, &c->e->st.bytes_up) != 0)
    return failed(c, EPIPE, "the connection closed at once");
  return update(c);
}

/* Try the next allowed address; the last error tells the client why none
** answered. */
static int connect_next(conn *c) {
  lash_egress *e = c->e;
  while (c->icand < c->ncand) {
    struct sockaddr_storage ss;
    socklen_t len;
    const lash_netaddr *a = &c->cand[c->icand++];
    int fd = socket(a->family == 6 ? AF_INET6 : AF_INET,
                    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    lash_netaddr_format(a, c->addr);
    if (fd < 0) {
      c->last_err = errno;
      continue;
    }
    to_sockaddr(a, c->port, &ss, &len);
    if (connect(fd, (struct sockaddr *)&ss, len) == 0) {
      c->ufd = fd;
      return connected(c);
    }
    if (errno != EINPROGRESS) {
      c->last_err = errno;
      close(fd);
      continue;
    }
    c->ufd = fd;
    c->state = S_CONNECT;
    lash_timer_start(e->loop, &c->timer,
                     (uint64_t)e->o.connect_ms * 1000000u, on_timer, c);
    return update(c);
  }
  {
    char why[160];
    snprintf(why, sizeof why, "%s (%s)",
             c->last_err == ETIMEDOUT ? "no answer in time"
                                      : strerror(c->last_err ? c->last_err : EHOSTUNREACH),
             c->addr);
    return failed(c, c->last_err ? c->last_err : EHOSTUNREACH, why);
  }
}

static void on_resolved(void *data, int status, const lash_netaddr *addrs,
                        size_t n, uint32_t ttl) {
  conn *c = data;
  const lash_netpolicy *pol = c->e->pol;
  int first = LASH_NETPOL_ALLOW;
  char first_addr[46] = "";
  size_t i;
  (void)ttl;
  c->rq = NULL;
  if (status == LASH_RESOLVE_NXDOMAIN) {
    failed(c, EHOSTUNREACH, "the name does not exist");
    return;
  }
  if (status != LASH_RESOLVE_OK) {
    failed(c, EHOSTUNREACH, "the host's name servers did not answer");
    return;
  }
  c->ncand = c->icand = 0;
  for (i = 0; i < n; i++) {
    int v = lash_netpol_check_addr(pol, &addrs[i], c->port, 1, 0);
    if (v == LASH_NETPOL_ALLOW) c->cand[c->ncand++] = addrs[i];
    else if (first == LASH_NETPOL_ALLOW) {
      first = v;
      lash_netaddr_format(&addrs[i], first_addr);
    }
  }
  if (c->ncand == 0) {
    if (n == 0) failed(c, EHOSTUNREACH, "the name has no address");
    else refuse(c, first, first_addr);
    return;
  }
  connect_next(c);
}

/* The request is parsed (host, port, literal): decide, then go on. */
static int decide(conn *c) {
  lash_egress *e = c->e;
  const lash_netpolicy *pol = e->pol;
  const lash_netaddr *pin;
  int v;
  lash_timer_stop(e->loop, &c->timer);
  c->ncand = c->icand = 0;
  if (c->port == 0) return bad_request(c, 400, "lash: port 0 cannot be reached");
  if (c->literal) {
    const char *name = handout_name(e, &c->lit);
    lash_netaddr_format(&c->lit, c->addr);
    if (name && lash_netpol_check_name(pol, name, c->port) == LASH_NETPOL_ALLOW) {
      pin = lash_netpol_pinned(pol, name);
      v = lash_netpol_check_addr(pol, &c->lit, c->port, 1,
                                 pin && memcmp(pin, &c->lit, sizeof *pin) == 0);
    } else {
      v = lash_netpol_check_addr(pol, &c->lit, c->port, 0, 0);
    }
    if (v != LASH_NETPOL_ALLOW) return refuse(c, v, c->addr);
    c->cand[c->ncand++] = c->lit;
    return connect_next(c);
  }
  v = lash_netpol_check_name(pol, c->host, c->port);
  if (v != LASH_NETPOL_ALLOW) return refuse(c, v, NULL);
  if ((pin = lash_netpol_pinned(pol, c->host))) {
    lash_netaddr_format(pin, c->addr);
    v = lash_netpol_check_addr(pol, pin, c->port, 1, 1);
    if (v != LASH_NETPOL_ALLOW) return refuse(c, v, c->addr);
    c->cand[c->ncand++] = *pin;
    return connect_next(c);
  }
  c->state = S_RESOLVE;
  c->rq = lash_resolve(e->res, c->host, on_resolved, c);
  if (!c->rq) return failed(c, ENOMEM, "out of memory");
  return update(c);
}

/* host (a name, an IPv4 literal or an IPv6 one without brackets) into c */
static int set_host(conn *c, const char *h, size_t len) {
  char err[200];
  if (lash_netaddr_parse(h, len, &c->lit) == 0) {
    c->literal = 1;
    lash_netaddr_format(&c->lit, c->host);
    return 0;
  }
  c->literal = 0;
  return lash_netname_norm(h, len, c->host, err, sizeof err);
}

/* "host:port", "[v6]:port" or "host" (def) */
static int parse_authority(conn *c, const char *s, size_t len, uint16_t def) {
  const char *h = s, *colon = NULL;
  size_t hl = len;
  unsigned long port = def;
  if (len && s[0] == '[') {
    const char *close = memchr(s, ']', len);
    if (!close) return -1;
    h = s + 1;
    hl = (size_t)(close - h);
    if (close + 1 < s + len) {
      if (close[1] != ':') return -1;
      colon = close + 1;
    }
  } else {
    colon = memrchr(s, ':', len);
    if (colon) hl = (size_t)(colon - s);
  }
  if (colon) {
    const char *p = colon + 1;
    size_t pl = (size_t)(s + len - p), i;
    if (pl == 0 || pl > 5) return -1;
    port = 0;
    for (i = 0; i < pl; i++) {
      if (p[i] < '0' || p[i] > '9') return -1;
      port = port * 10 + (unsigned long)(p[i] - '0');
    }
  }
  if (port == 0 || port > 65535 || hl == 0 || memchr(h, '@', hl)) return -1;
  c->port = (uint16_t)port;
  return set_host(c, h, hl);
}

/* ---- HTTP ----------------------------------------------------------- */

static int header_is(const char *line, size_t len, const char *name) {
  size_t n = strlen(name);
  return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

static int dropped_header(const char *line, size_t len) {
  return header_is(line, len, "connection") ||
         header_is(line, len, "proxy-connection") ||
         header_is(line, len, "keep-alive") ||
         header_is(line, len, "proxy-authorization") ||
         header_is(line, len, "host");
}

static int http_head(conn *c) {
  lash_egress *e = c->e;
  uint8_t *b = c->c2u;
  uint8_t *end = memmem(b, c->c2u_len, "\r\n\r\n", 4);
  const char *line, *sp1, *sp2, *eol, *target;
  size_t hlen, rest, tlen;
  if (!end) {
    if (c->c2u_len == LASH_EGRESS_BUF)
      return bad_request(c, 431, "lash: the request head is larger than the "
                                 "proxy takes (8 KiB)");
    return update(c);
  }
  hlen = (size_t)(end - b) + 4;
  rest = c->c2u_len - hlen;
  line = (const char *)b;
  eol = memmem(line, hlen, "\r\n", 2);
  sp1 = memchr(line, ' ', (size_t)(eol - line));
  sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0)
    return bad_request(c, 400, "lash: not an HTTP/1 proxy request");
  target = sp1 + 1;
  tlen = (size_t)(sp2 - target);
  if ((size_t)(sp1 - line) == 7 && memcmp(line, "CONNECT", 7) == 0) {
    c->via = "connect";
    if (parse_authority(c, target, tlen, 0) != 0)
      return bad_request(c, 400, "lash: CONNECT needs host:port");
    /* what the client sent after the head (a TLS hello) goes upstream */
    memmove(b, b + hlen, rest);
    c->c2u_len = rest;
    c->c2u_off = 0;
    return decide(c);
  }
  if (tlen > 7 && strncasecmp(target, "http://", 7) == 0) {
    const char *auth = target + 7, *path;
    size_t alen, o, plen;
    const char *p;
    path = auth;
    while (path < target + tlen && *path != '/' && *path != '?') path++;
    alen = (size_t)(path - auth);
    plen = (size_t)(target + tlen - path);
    c->via = "http";
    if (parse_authority(c, auth, alen, 80) != 0)
      return bad_request(c, 400, "lash: the URL has no usable host");
    /* the head again, in origin form, with our Host and Connection */
    o = (size_t)snprintf((char *)e->scratch, sizeof e->scratch, "%.*s %s%.*s %.*s\r\n",
                         (int)(sp1 - line), line, plen ? "" : "/", (int)plen,
                         path, (int)(eol - sp2 - 1), sp2 + 1);
    for (p = eol + 2; p < (const char *)end + 2;) {
      const char *le = memmem(p, (size_t)((const char *)end + 2 - p), "\r\n", 2);
      size_t ll = (size_t)(le - p);
      if (!dropped_header(p, ll)) {
        if (o + ll + 2 > LASH_EGRESS_BUF) goto too_big;
        memcpy(e->scratch + o, p, ll);
        memcpy(e->scratch + o + ll, "\r\n", 2);
        o += ll + 2;
      }
      p = le + 2;
    }
    if (o + alen + 40 > LASH_EGRESS_BUF) goto too_big;
    o += (size_t)snprintf((char *)e->scratch + o, sizeof e->scratch - o,
                          "Host: %.*s\r\nConnection: close\r\n\r\n", (int)alen,
                          auth);
    if (o + rest > LASH_EGRESS_BUF) goto too_big;
    memcpy(e->scratch + o, b + hlen, rest);
    memcpy(b, e->scratch, o + rest);
    c->c2u_len = o + rest;
    c->c2u_off = 0;
    c->rewrite_resp = 1;
    return decide(c);
  too_big:
    return bad_request(c, 431, "lash: the request head is larger than the "
                               "proxy takes (8 KiB)");
  }
  if (tlen > 8 && strncasecmp(target, "https://", 8) == 0)
    return bad_request(c, 400, "lash: https:// goes through CONNECT (set "
                               "https_proxy, not http_proxy, to this proxy)");
  return bad_request(c, 400, "lash: this is the sandbox's egress proxy; ask "
                             "it for http:// URLs or CONNECT host:port");
}

/* The first response head of a plain request: say Connection: close. */
static void rewrite_response(conn *c) {
  lash_egress *e = c->e;
  uint8_t *b = c->u2c + c->u2c_off;
  size_t have = c->u2c_len - c->u2c_off, hlen, o = 0;
  uint8_t *end = memmem(b, have, "\r\n\r\n", 4);
  const char *p;
  if (!end) {
    /* not all here yet: wait, unless it can never fit */
    if (c->u2c_len == LASH_EGRESS_BUF && c->u2c_off == 0) c->rewrite_resp = 0;
    return;
  }
  c->rewrite_resp = 0;
  hlen = (size_t)(end - b) + 4;
  for (p = (const char *)b; p < (const char *)end + 2;) {
    const char *le = memmem(p, (size_t)((const char *)end + 2 - p), "\r\n", 2);
    size_t ll = (size_t)(le - p);
    if (!(header_is(p, ll, "connection") || header_is(p, ll, "keep-alive") ||
          header_is(p, ll, "proxy-connection"))) {
      memcpy(e->scratch + o, p, ll + 2);
      o += ll + 2;
    }
    p = le + 2;
  }
  memcpy(e->scratch + o, "Connection: close\r\n\r\n", 21);
  o += 21;
  if (o + have - hlen > LASH_EGRESS_BUF) return;   /* as it came, then */
  memcpy(e->scratch + o, b + hlen, have - hlen);
  memcpy(c->u2c, e->scratch, o + have - hlen);
  c->u2c_off = 0;
  c->u2c_len = o + have - hlen;
}

/* ---- SOCKS5 --------------------------------------------------------- */

static int socks_head(conn *c) {
  uint8_t *b = c->c2u;
  size_t n = c->c2u_len, need;
  if (c->socks_stage == 0) {
    size_t i;
    int noauth = 0;
    if (n < 2) return update(c);
    if (b[0] != 5) return bad_request(c, 0, NULL);   /* SOCKS4 and others */
    need = 2 + (size_t)b[1];
    if (n < need) return update(c);
    for (i = 2; i < need; i++) noauth |= b[i] == 0;
    if (!noauth) {
      static const uint8_t no[2] = {5, 0xff};
      queue_reply(c, no, 2);
      start_closing(c);
      return update(c);
    }
    {
      static const uint8_t yes[2] = {5, 0};
      queue_reply(c, yes, 2);
    }
    memmove(b, b + need, n - need);
    c->c2u_len = n -= need;
    c->socks_stage = 1;
  }
  if (n < 5) return update(c);
  if (b[0] != 5) return bad_request(c, 0, NULL);
  switch (b[3]) {
  case 1: need = 4 + 4 + 2; break;
  case 3: need = 4 + 1 + (size_t)b[4] + 2; break;
  case 4: need = 4 + 16 + 2; break;
  default:
    socks_reply(c, 8);
    start_closing(c);
    return update(c);
  }
  if (n < need) return update(c);
  c->via = "socks5";
  if (b[1] != 1) {                     /* BIND, UDP ASSOCIATE */
    socks_reply(c, 7);
    start_closing(c);
    return update(c);
  }
  c->port = (uint16_t)(b[need - 2] << 8 | b[need - 1]);
  if (b[3] == 3) {
    if (set_host(c, (const char *)b + 5, b[4]) != 0) {
      snprintf(c->host, sizeof c->host, "%s", "(a bad name)");
      return refuse(c, LASH_NETPOL_UNLISTED, NULL);
    }
  } else {
    memset(&c->lit, 0, sizeof c->lit);
    c->lit.family = b[3] == 1 ? 4 : 6;
    memcpy(c->lit.b, b + 4, b[3] == 1 ? 4 : 16);
    c->literal = 1;
    lash_netaddr_format(&c->lit, c->host);
  }
  memmove(b, b + need, n - need);
  c->c2u_len = n - need;
  c->c2u_off = 0;
  return decide(c);
}

/* ---- DNS ------------------------------------------------------------ */

static void dnsq_free(dnsq *q) {
  lash_egress *e = q->e;
  if (q->rq) lash_resolve_cancel(q->rq);
  if (q->prev) q->prev->next = q->next;
  else e->dnsqs = q->next;
  if (q->next) q->next->prev = q->prev;
  if (q->tcp) q->tcp->dq = NULL;
  e->ndnsq--;
  free(q);
}

/* Send the answer: by UDP to the asker, or onto its TCP connection. */
static void dns_send(dnsq *q, int rcode, const lash_netaddr *addrs, size_t n,
                     uint32_t ttl) {
  uint8_t out[LASH_EGRESS_BUF];
  size_t cap = q->tcp ? sizeof out - 2 : 512;
  size_t len = lash_dns_build_answer(q->tcp ? out + 2 : out, cap, q->query,
                                     &q->q, rcode, addrs, n, ttl);
  if (!len) return;
  if (q->tcp) {
    conn *c = q->tcp;
    out[0] = (uint8_t)(len >> 8);
    out[1] = (uint8_t)len;
    queue_reply(c, out, len + 2);
    c->state = S_HEAD;  /* its owner updates it */
  } else {
    sendto(q->udp->fd, out, len, MSG_DONTWAIT | MSG_NOSIGNAL,
           (struct sockaddr *)&q->from, q->fromlen);
  }
}

static void dns_refuse(lash_egress *e, const char *name, int verdict,
                       const char *addr) {
  char msg[MSG_CAP];
  lash_egress_refusal(e->pol, verdict, name, 0, addr, msg, sizeof msg);
  report(e, LASH_EGRESS_DENIED, "dns", name, 0, addr, msg);
}

static int wanted_family(uint16_t qtype) {
  return qtype == LASH_DNS_A ? 4 : qtype == LASH_DNS_AAAA ? 6 : 0;
}

static void on_dns_resolved(void *data, int status, const lash_netaddr *addrs,
                            size_t n, uint32_t ttl) {
  dnsq *q = data;
  lash_egress *e = q->e;
  lash_netaddr ok[LASH_RESOLVE_MAX_ADDRS];
  size_t i, nok = 0, others = 0;
  int first = LASH_NETPOL_ALLOW, fam = wanted_family(q->q.qtype);
  char first_addr[46] = "";
  q->rq = NULL;
  if (status == LASH_RESOLVE_NXDOMAIN) {
    dns_send(q, LASH_DNS_NXDOMAIN, NULL, 0, 0);
  } else if (status != LASH_RESOLVE_OK) {
    dns_send(q, LASH_DNS_SERVFAIL, NULL, 0, 0);
  } else {
    for (i = 0; i < n; i++) {
      int v;
      if (addrs[i].family != fam) {
        others++;
        continue;
      }
      v = lash_netpol_check_addr(e->pol, &addrs[i], 0, 1, 0);
      if (v == LASH_NETPOL_ALLOW) {
        ok[nok++] = addrs[i];
        handout_add(e, &addrs[i], q->q.name);
      } else if (first == LASH_NETPOL_ALLOW) {
        first = v;
        lash_netaddr_format(&addrs[i], first_addr);
      }
    }
    if (nok == 0 && first != LASH_NETPOL_ALLOW) {
      /* every address of that type is one the policy keeps out */
      dns_refuse(e, q->q.name, first, first_addr);
      dns_send(q, LASH_DNS_REFUSED, NULL, 0, 0);
    } else {
      dns_send(q, LASH_DNS_NOERROR, ok, nok,
               ttl < DNS_TTL_MAX ? ttl : DNS_TTL_MAX);
    }
  }
  (void)others;
  {
    conn *tcp = q->tcp;
    dnsq_free(q);
    if (tcp) update(tcp);
  }
}

/* One question from the jail (msg), asked by UDP (l, from) or on a TCP
** connection (tcp). */
static void dns_question(lash_egress *e, const uint8_t *msg, size_t n,
                         listener *l, const struct sockaddr_storage *from,
                         socklen_t fromlen, conn *tcp) {
  dnsq *q;
  char name[LASH_NETNAME_MAX + 1], err[200];
  const lash_netaddr *pin;
  int v;
  if (e->ndnsq >= MAX_DNSQ) return;            /* it asks again */
  if (!(q = calloc(1, sizeof *q))) return;
  q->e = e;
  q->tcp = tcp;
  q->udp = l;
  if (from) {
    q->from = *from;
    q->fromlen = fromlen;
  }
  q->next = e->dnsqs;
  if (e->dnsqs) e->dnsqs->prev = q;
  e->dnsqs = q;
  e->ndnsq++;
  if (tcp) tcp->dq = q;
  if (lash_dns_parse_query(msg, n, &q->q) != 0 || q->q.end > sizeof q->query) {
    dnsq_free(q);                              /* nothing to answer to */
    return;
  }
  memcpy(q->query, msg, q->q.end);
  if (q->q.flags & 0x7800) {                   /* not a standard query */
    dns_send(q, LASH_DNS_NOTIMP, NULL, 0, 0);
    dnsq_free(q);
    return;
  }
  if (lash_netname_norm(q->q.name, strlen(q->q.name), name, err, sizeof err) != 0) {
    dns_send(q, LASH_DNS_REFUSED, NULL, 0, 0);
    dnsq_free(q);
    return;
  }
  v = lash_netpol_check_name(e->pol, name, 0);
  if (v != LASH_NETPOL_ALLOW) {
    dns_refuse(e, name, v, NULL);
    dns_send(q, LASH_DNS_REFUSED, NULL, 0, 0);
    dnsq_free(q);
    return;
  }
  strcpy(q->q.name, name);
  if (!wanted_family(q->q.qtype) || q->q.qclass != 1) {
    dns_send(q, LASH_DNS_NOERROR, NULL, 0, 0); /* no records of that kind */
    dnsq_free(q);
    return;
  }
  if ((pin = lash_netpol_pinned(e->pol, name))) {
    int ok = lash_netpol_check_addr(e->pol, pin, 0, 1, 1) == LASH_NETPOL_ALLOW;
    if (ok) handout_add(e, pin, name);
    dns_send(q, ok ? LASH_DNS_NOERROR : LASH_DNS_REFUSED, pin, ok ? 1 : 0,
             DNS_TTL_MAX);
    dnsq_free(q);
    return;
  }
  q->rq = lash_resolve(e->res, name, on_dns_resolved, q);
  if (!q->rq) {
    dns_send(q, LASH_DNS_SERVFAIL, NULL, 0, 0);
    dnsq_free(q);
    return;
  }
  if (tcp) tcp->state = S_RESOLVE;
}

static void on_dns_udp(lash_loop *loop, lash_io *io, unsigned ev) {
  listener *l = io->data;
  int i;
  (void)loop;
  (void)ev;
  for (i = 0; i < DNS_BATCH; i++) {
    uint8_t msg[4096];
    struct sockaddr_storage from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(l->fd, msg, sizeof msg, MSG_DONTWAIT,
                         (struct sockaddr *)&from, &fl);
    if (n < 0) return;
    dns_question(l->e, msg, (size_t)n, l, &from, fl, NULL);
  }
}

/* DNS over TCP: two bytes of length, then the question */
static int dns_tcp_head(conn *c) {
  size_t want;
  if (c->c2u_len < 2) return update(c);
  want = (size_t)c->c2u[0] << 8 | c->c2u[1];
  if (want == 0 || want > LASH_EGRESS_BUF - 2) {
    conn_close(c);
    return -1;
  }
  if (c->c2u_len < want + 2) return update(c);
  c->state = S_RESOLVE;         /* until the answer is queued */
  dns_question(c->e, c->c2u + 2, want, NULL, NULL, 0, c);
  memmove(c->c2u, c->c2u + want + 2, c->c2u_len - want - 2);
  c->c2u_len -= want + 2;
  if (!c->dq && c->state == S_RESOLVE) c->state = S_HEAD;
  return update(c);
}

/* ---- connections ---------------------------------------------------- */

static void on_client(lash_loop *loop, lash_io *io, unsigned ev);
static void on_accept(lash_loop *loop, lash_io *io, unsigned ev);

static void resume_accepting(lash_egress *e) {
  size_t i;
  for (i = 0; i < e->nls; i++)
    if (e->ls[i].kind != LASH_EGRESS_DNS_UDP)
      lash_io_start(e->loop, &e->ls[i].io, e->ls[i].fd, LASH_READ, on_accept,
                    &e->ls[i]);
}

static void conn_close(conn *c) {
  lash_egress *e = c->e;
  lash_io_stop(e->loop, &c->cio);
  lash_io_stop(e->loop, &c->uio);
  lash_timer_stop(e->loop, &c->timer);
  if (c->rq) lash_resolve_cancel(c->rq);
  if (c->dq) {
    c->dq->tcp = NULL;
    dnsq_free(c->dq);
  }
  if (c->cfd >= 0) close(c->cfd);
  if (c->ufd >= 0) close(c->ufd);
  if (c->prev) c->prev->next = c->next;
  else e->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  e->st.open--;
  free(c);
  if (e->paused && e->st.open < e->o.max_conns) {
    e->paused = 0;
    resume_accepting(e);
  }
}

/* Watch what each side can do now; -1 when the connection had to go. */
static int update(conn *c) {
  unsigned ce = 0, ue = 0;
  int c_room = c->c2u_len < LASH_EGRESS_BUF || c->c2u_off > 0;
  int u_room = c->u2c_len < LASH_EGRESS_BUF || c->u2c_off > 0;
  int to_client = c->u2c_len > c->u2c_off && !c->rewrite_resp;
  int to_up = c->c2u_len > c->c2u_off;
  switch (c->state) {
  case S_HEAD:
    ce = (c_room ? LASH_READ : 0) | (to_client ? LASH_WRITE : 0);
    break;
  case S_RESOLVE:
    ce = to_client ? LASH_WRITE : 0;
    break;
  case S_CONNECT:
    ue = LASH_WRITE;
    break;
  case S_RELAY:
    ce = (!c->c_eof && c_room ? LASH_READ : 0) | (to_client ? LASH_WRITE : 0);
    ue = (!c->u_eof && u_room ? LASH_READ : 0) | (to_up ? LASH_WRITE : 0);
    if (c->c_eof && !to_up && !c->u_shut) {
      shutdown(c->ufd, SHUT_WR);
      c->u_shut = 1;
    }
    if (c->u_eof && !to_client && !c->c_shut) {
      shutdown(c->cfd, SHUT_WR);
      c->c_shut = 1;
    }
    if (c->u_shut && c->c_shut) {
      conn_close(c);
      return -1;
    }
    break;
  case S_CLOSING:
    if (!to_client && !c->c_shut) {
      shutdown(c->cfd, SHUT_WR);
      c->c_shut = 1;
    }
    ce = LASH_READ | (to_client ? LASH_WRITE : 0);
    break;
  }
  if (set_io(c, &c->cio, c->cfd, ce, on_client) != 0 ||
      set_io(c, &c->uio, c->ufd, ue, on_upstream) != 0) {
    conn_close(c);
    return -1;
  }
  return 0;
}

static void on_client(lash_loop *loop, lash_io *io, unsigned ev) {
  conn *c = io->data;
  lash_egress *e = c->e;
  (void)loop;
  if (ev & LASH_WRITE) {
    if (c->u2c_len > c->u2c_off && !c->rewrite_resp &&
        flush(c->cfd, c->u2c, &c->u2c_off, &c->u2c_len, &e->st.bytes_down) != 0) {
      conn_close(c);
      return;
    }
  }
  if (ev & LASH_READ) {
    if (c->state == S_CLOSING) {
      char sink[4096];
      ssize_t n = recv(c->cfd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        conn_close(c);
        return;
      }
    } else if (!c->c_eof) {
      ssize_t n = fill(c->cfd, c->c2u, &c->c2u_off, &c->c2u_len);
      if (n == -1 || (n == 0 && c->state != S_RELAY)) {
        conn_close(c);
        return;
      }
      if (n == 0) c->c_eof = 1;
      if (n > 0 && c->state == S_HEAD) {
        if (c->kind == LASH_EGRESS_HTTP) http_head(c);
        else if (c->kind == LASH_EGRESS_SOCKS) socks_head(c);
        else dns_tcp_head(c);
        return;
      }
      if (n > 0 && c->state == S_RELAY &&
          flush(c->ufd, c->c2u, &c->c2u_off, &c->c2u_len, &e->st.bytes_up) != 0) {
        conn_close(c);
        return;
      }
    }
  }
  update(c);
}

static void on_upstream(lash_loop *loop, lash_io *io, unsigned ev) {
  conn *c = io->data;
  lash_egress *e = c->e;
  (void)loop;
  if (c->state == S_CONNECT) {
    int err = 0;
    socklen_t l = sizeof err;
    if (!(ev & (LASH_WRITE | LASH_HUP))) return;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
    if (err) {
      lash_io_stop(e->loop, &c->uio);
      close(c->ufd);
      c->ufd = -1;
      c->last_err = err;
      connect_next(c);
      return;
    }
    connected(c);
    return;
  }
  if (ev & LASH_WRITE) {
    if (flush(c->ufd, c->c2u, &c->c2u_off, &c->c2u_len, &e->st.bytes_up) != 0) {
      conn_close(c);
      return;
    }
  }
  if ((ev & LASH_READ) && !c->u_eof) {
    ssize_t n = fill(c->ufd, c->u2c, &c->u2c_off, &c->u2c_len);
    if (n == -1) {
      conn_close(c);
      return;
    }
    if (n == 0) {
      c->u_eof = 1;
      c->rewrite_resp = 0;
    }
    if (n > 0 && c->rewrite_resp) rewrite_response(c);
    if (n > 0 && !c->rewrite_resp &&
        flush(c->cfd, c->u2c, &c->u2c_off, &c->u2c_len, &e->st.bytes_down) != 0) {
      conn_close(c);
      return;
    }
  }
  update(c);
}

static void on_timer(lash_loop *loop, lash_timer *t) {
  conn *c = t->data;
  (void)loop;
  switch (c->state) {
  case S_CONNECT:
    lash_io_stop(c->e->loop, &c->uio);
    close(c->ufd);
    c->ufd = -1;
    c->last_err = ETIMEDOUT;
    connect_next(c);
    return;
  default:                      /* a head never finished, a drain is over */
    conn_close(c);
    return;
  }
}

static void on_resume(lash_loop *loop, lash_timer *t) {
  (void)loop;
  resume_accepting(t->data);
}

static void pause_accepting(lash_egress *e) {
  size_t i;
  for (i = 0; i < e->nls; i++)
    if (e->ls[i].kind != LASH_EGRESS_DNS_UDP) lash_io_stop(e->loop, &e->ls[i].io);
}

static void on_accept(lash_loop *loop, lash_io *io, unsigned ev) {
  listener *l = io->data;
  lash_egress *e = l->e;
  int i;
  (void)ev;
  for (i = 0; i < ACCEPT_BATCH; i++) {
    conn *c;
    int fd;
    if (e->st.open >= e->o.max_conns) {
      /* the kernel's backlog holds the rest until one closes */
      e->paused = 1;
      pause_accepting(e);
      return;
    }
    fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        pause_accepting(e);
        lash_timer_start(loop, &e->resume, 100 * 1000000ull, on_resume, e);
      }
      return;
    }
    c = calloc(1, sizeof *c + 2 * LASH_EGRESS_BUF);
    if (!c) {
      close(fd);
      return;
    }
    c->e = e;
    c->kind = l->kind;
    c->state = S_HEAD;
    c->via = l->kind == LASH_EGRESS_SOCKS ? "socks5"
             : l->kind == LASH_EGRESS_HTTP ? "http" : "dns";
    c->cfd = fd;
    c->ufd = -1;
    c->c2u = c->mem;
    c->u2c = c->mem + LASH_EGRESS_BUF;
    lash_timer_init(&c->timer);
    c->timer.weak = 1;
    c->next = e->conns;
    if (e->conns) e->conns->prev = c;
    e->conns = c;
    e->st.accepted++;
    if (++e->st.open > e->st.peak) e->st.peak = e->st.open;
    lash_timer_start(loop, &c->timer, (uint64_t)e->o.head_ms * 1000000u,
                     on_timer, c);
    update(c);
  }
}

/* ---- the proxy ------------------------------------------------------ */

lash_egress *lash_egress_new(lash_loop *loop, const lash_netpolicy *pol,
                             lash_resolver *res, const lash_egress_opts *o) {
  lash_egress *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->loop = loop;
  e->pol = pol;
  e->res = res;
  if (o) e->o = *o;
  if (!e->o.max_conns) e->o.max_conns = LASH_EGRESS_MAX_CONNS;
  if (!e->o.connect_ms) e->o.connect_ms = LASH_EGRESS_CONNECT_MS;
  if (!e->o.head_ms) e->o.head_ms = LASH_EGRESS_HEAD_MS;
  lash_timer_init(&e->resume);
  e->resume.weak = 1;
  return e;
}

int lash_egress_listen(lash_egress *e, int fd, int kind) {
  listener *l;
  int rc;
  if (e->nls == MAX_LISTENERS || kind < LASH_EGRESS_HTTP ||
      kind > LASH_EGRESS_DNS_TCP) {
    close(fd);
    return -EINVAL;
  }
  l = &e->ls[e->nls];
  memset(l, 0, sizeof *l);
  l->e = e;
  l->fd = fd;
  l->kind = kind;
  l->io.weak = 1;
  rc = lash_io_start(e->loop, &l->io, fd, LASH_READ,
                     kind == LASH_EGRESS_DNS_UDP ? on_dns_udp : on_accept, l);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  e->nls++;
  return 0;
}

void lash_egress_free(lash_egress *e) {
  size_t i;
  if (!e) return;
  while (e->conns) conn_close(e->conns);
  while (e->dnsqs) dnsq_free(e->dnsqs);
  lash_timer_stop(e->loop, &e->resume);
  for (i = 0; i < e->nls; i++) {
    lash_io_stop(e->loop, &e->ls[i].io);
    close(e->ls[i].fd);
  }
  free(e->handouts);
  free(e);
}

void lash_egress_stats_get(const lash_egress *e, lash_egress_stats *s) {
  *s = e->st;
}
