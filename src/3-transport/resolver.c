/*
** resolver.c: the stub resolver (resolver.h). A lookup per name in flight
** carries its waiters; it sends the A and the AAAA question to the first
** server, moves to the next on a timeout, and asks over TCP for a type
** whose UDP answer was truncated. Answers are checked against the id and
** the question we sent (a connected socket per question, so only the
** server we asked can answer, from the port we asked).
*/
#include "resolver.h"

#include "dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SERVERS 3
#define CACHE_SIZE 128
#define TTL_MIN 5
#define TTL_MAX 300
#define NEG_TTL 30
#define MSG_MAX 4096
#define TCP_MSG_MAX 65535

typedef struct lookup lookup;

struct lash_resolve_req {
  lash_resolve_req *next;
  lookup *lk;
  lash_resolve_cb cb;
  void *data;
};

typedef struct question {
  lookup *lk;
  uint16_t qtype, id;
  int fd, tcp, done;
  lash_io io;
  int rcode;
  uint32_t ttl;
  size_t n;
  lash_netaddr addrs[LASH_RESOLVE_MAX_ADDRS];
  uint8_t *tcpbuf;              /* TCP: the query, then the answer */
  size_t tcphave, tcpwant, tcpsent, tcpqlen;
} question;

struct lookup {
  lookup *next;
  lash_resolver *r;
  char name[LASH_NETNAME_MAX + 1];
  lash_resolve_req *waiters;
  question q[2];                /* A, AAAA */
  int server, tries;
  lash_timer timer;
  int status;                   /* when answered from hosts or the cache */
  int ready;
  size_t n;
  uint32_t ttl;
  lash_netaddr addrs[LASH_RESOLVE_MAX_ADDRS];
};

typedef struct cached {
  char name[LASH_NETNAME_MAX + 1];
  uint64_t expires_ns, used;
  int status;
  size_t n;
  uint32_t ttl;
  lash_netaddr addrs[LASH_RESOLVE_MAX_ADDRS];
} cached;

typedef struct hostent_ {
  char name[LASH_NETNAME_MAX + 1];
  lash_netaddr addr;
} hostent_;

struct lash_resolver {
  lash_loop *loop;
  struct sockaddr_storage servers[MAX_SERVERS];
  socklen_t server_len[MAX_SERVERS];
  size_t nservers;
  int timeout_ms, attempts;
  hostent_ *hosts;
  size_t nhosts;
  cached cache[CACHE_SIZE];
  uint64_t uses;
  lookup *lookups;
};

/* ---- configuration -------------------------------------------------- */

static int parse_server(const char *s, struct sockaddr_storage *ss,
                        socklen_t *len) {
  char host[64];
  const char *port = NULL;
  size_t hl;
  unsigned long p = 53;
  memset(ss, 0, sizeof *ss);
  if (*s == '[') {
    const char *c = strchr(s, ']');
    if (!c) return -1;
    hl = (size_t)(c - s - 1);
    if (hl >= sizeof host) return -1;
    memcpy(host, s + 1, hl);
    host[hl] = '\0';
    if (c[1] == ':') port = c + 2;
  } else {
    const char *c = strchr(s, ':');
    hl = strlen(s);
    if (c && !strchr(c + 1, ':')) {   /* one colon: IPv4 with a port */
      hl = (size_t)(c - s);
      port = c + 1;
    }
    if (hl >= sizeof host) return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
  }
  if (port) {
    char *end;
    p = strtoul(port, &end, 10);
    if (*end || p == 0 || p > 65535) return -1;
  }
  if (strchr(host, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    char *pct = strchr(host, '%');     /* a scope: not for us */
    if (pct) *pct = '\0';
    if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) return -1;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)p);
    *len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) return -1;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)p);
    *len = sizeof *a;
  }
  return 0;
}

static void read_resolv(lash_resolver *r, const char *path) {
  FILE *f = fopen(path, "re");
  char line[512];
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char *save, *key = strtok_r(line, " \t\r\n", &save), *v;
    if (!key || *key == '#' || *key == ';') continue;
    if (strcmp(key, "nameserver") == 0) {
      v = strtok_r(NULL, " \t\r\n", &save);
      if (v && r->nservers < MAX_SERVERS &&
          parse_server(v, &r->servers[r->nservers],
                       &r->server_len[r->nservers]) == 0)
        r->nservers++;
    } else if (strcmp(key, "options") == 0) {
      while ((v = strtok_r(NULL, " \t\r\n", &save))) {
        if (strncmp(v, "timeout:", 8) == 0) {
          int t = atoi(v + 8);
          if (t >= 1) r->timeout_ms = (t > 5 ? 5 : t) * 1000;
        } else if (strncmp(v, "attempts:", 9) == 0) {
          int a = atoi(v + 9);
          if (a >= 1) r->attempts = a > 3 ? 3 : a;
        }
      }
    }
  }
  fclose(f);
}

static void read_hosts(lash_resolver *r, const char *path) {
  FILE *f = fopen(path, "re");
  char line[1024];
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char *save, *a, *name, *hash = strchr(line, '#');
    lash_netaddr addr;
    if (hash) *hash = '\0';
    a = strtok_r(line, " \t\r\n", &save);
    if (!a || lash_netaddr_parse(a, strlen(a), &addr) != 0) continue;
    while ((name = strtok_r(NULL, " \t\r\n", &save))) {
      hostent_ *grown;
      char norm[LASH_NETNAME_MAX + 1], err[160];
      if (lash_netname_norm(name, strlen(name), norm, err, sizeof err) != 0)
        continue;
      grown = realloc(r->hosts, (r->nhosts + 1) * sizeof *r->hosts);
      if (!grown) break;
      r->hosts = grown;
      strcpy(r->hosts[r->nhosts].name, norm);
      r->hosts[r->nhosts].addr = addr;
      r->nhosts++;
    }
  }
  fclose(f);
}

lash_resolver *lash_resolver_new(lash_loop *loop, const char *resolv_conf,
                                 const char *hosts) {
  lash_resolver *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->loop = loop;
  r->timeout_ms = 5000;
  r->attempts = 2;
  read_resolv(r, resolv_conf ? resolv_conf : "/etc/resolv.conf");
  read_hosts(r, hosts ? hosts : "/etc/hosts");
  return r;
}

size_t lash_resolver_servers(const lash_resolver *r) { return r->nservers; }

/* ---- the cache ------------------------------------------------------ */

static cached *cache_find(lash_resolver *r, const char *name) {
  uint64_t now = lash_now_ns();
  size_t i;
  for (i = 0; i < CACHE_SIZE; i++) {
    cached *c = &r->cache[i];
    if (c->name[0] && c->expires_ns > now && strcmp(c->name, name) == 0) {
      c->used = ++r->uses;
      return c;
    }
  }
  return NULL;
}

static void cache_put(lash_resolver *r, const lookup *lk) {
  cached *victim = &r->cache[0];
  uint32_t ttl;
  size_t i;
  if (lk->status == LASH_RESOLVE_FAILED) return;
  ttl = lk->status == LASH_RESOLVE_OK ? lk->ttl : NEG_TTL;
  if (ttl < TTL_MIN) ttl = TTL_MIN;
  if (ttl > TTL_MAX) ttl = TTL_MAX;
  for (i = 0; i < CACHE_SIZE; i++) {
    if (strcmp(r->cache[i].name, lk->name) == 0) {
      victim = &r->cache[i];
      break;
    }
    if (r->cache[i].used < victim->used) victim = &r->cache[i];
  }
  strcpy(victim->name, lk->name);
  victim->expires_ns = lash_now_ns() + (uint64_t)ttl * 1000000000u;
  victim->used = ++r->uses;
  victim->status = lk->status;
  victim->n = lk->n;
  victim->ttl = ttl;
  memcpy(victim->addrs, lk->addrs, lk->n * sizeof *lk->addrs);
}

/* ---- lookups -------------------------------------------------------- */

static void question_close(lookup *lk, question *q) {
  lash_io_stop(lk->r->loop, &q->io);
  if (q->fd >= 0) close(q->fd);
  q->fd = -1;
  free(q->tcpbuf);
  q->tcpbuf = NULL;
}

static void lookup_free(lookup *lk) {
  lash_resolver *r = lk->r;
  lookup **pp;
  int i;
  for (pp = &r->lookups; *pp; pp = &(*pp)->next)
    if (*pp == lk) {
      *pp = lk->next;
      break;
    }
  lash_timer_stop(r->loop, &lk->timer);
  for (i = 0; i < 2; i++) question_close(lk, &lk->q[i]);
  while (lk->waiters) {
    lash_resolve_req *w = lk->waiters;
    lk->waiters = w->next;
    free(w);
  }
  free(lk);
}

/* Hand the result to every waiter; the lookup is gone after. A callback
** may ask or cancel, never free the resolver. */
static void deliver(lookup *lk) {
  lash_resolver *r = lk->r;
  lookup **pp;
  /* off the list first, so a callback that asks again starts afresh */
  for (pp = &r->lookups; *pp; pp = &(*pp)->next)
    if (*pp == lk) {
      *pp = lk->next;
      break;
    }
  lk->next = NULL;
  lash_timer_stop(r->loop, &lk->timer);
  while (lk->waiters) {
    lash_resolve_req *w = lk->waiters;
    lk->waiters = w->next;
    if (w->cb) w->cb(w->data, lk->status, lk->addrs, lk->n, lk->ttl);
    free(w);
  }
  {
    int i;
    for (i = 0; i < 2; i++) question_close(lk, &lk->q[i]);
  }
  free(lk);
}

/* Both questions are done (or given up): merge them. */
static void finish(lookup *lk) {
  question *a = &lk->q[0], *aaaa = &lk->q[1];
  size_t i;
  uint32_t ttl = UINT32_MAX;
  lk->n = 0;
  for (i = 0; i < 2; i++) {
    question *q = &lk->q[i];
    size_t j;
    if (q->rcode != LASH_DNS_NOERROR) continue;
    for (j = 0; j < q->n && lk->n < LASH_RESOLVE_MAX_ADDRS; j++)
      lk->addrs[lk->n++] = q->addrs[j];
    if (q->n && q->ttl < ttl) ttl = q->ttl;
  }
  lk->ttl = ttl == UINT32_MAX ? NEG_TTL : ttl;
  if (a->rcode == LASH_DNS_NOERROR || aaaa->rcode == LASH_DNS_NOERROR)
    lk->status = LASH_RESOLVE_OK;
  else if (a->rcode == LASH_DNS_NXDOMAIN || aaaa->rcode == LASH_DNS_NXDOMAIN)
    lk->status = LASH_RESOLVE_NXDOMAIN;
  else
    lk->status = LASH_RESOLVE_FAILED;
  cache_put(lk->r, lk);
  deliver(lk);
}

static void maybe_finish(lookup *lk) {
  if (lk->q[0].done && lk->q[1].done) finish(lk);
}

static void on_tcp(lash_loop *loop, lash_io *io, unsigned ev);

static int open_socket(lookup *lk, question *q, int type) {
  const struct sockaddr_storage *ss = &lk->r->servers[lk->server];
  int fd = socket(ss->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr *)ss, lk->r->server_len[lk->server]) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  q->fd = fd;
  return 0;
}

static void on_udp(lash_loop *loop, lash_io *io, unsigned ev) {
  question *q = io->data;
  lookup *lk = q->lk;
  uint8_t msg[MSG_MAX];
  for (;;) {
    lash_dns_result res;
    ssize_t n = recv(q->fd, msg, sizeof msg, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return;       /* ICMP refused and the like: the timeout moves on */
    }
    if (lash_dns_parse_answer(msg, (size_t)n, q->id, lk->name, q->qtype,
                              q->addrs, LASH_RESOLVE_MAX_ADDRS, &res) != 0)
      continue;     /* not our answer: keep waiting */
    if (res.truncated) {
      /* the whole answer over TCP, from the same server */
      size_t ql;
      question_close(lk, q);
      q->tcpbuf = malloc(TCP_MSG_MAX + 2);
      if (!q->tcpbuf) goto give_up;
      ql = lash_dns_build_query(q->tcpbuf + 2, TCP_MSG_MAX, q->id, lk->name,
                                q->qtype);
      if (!ql || open_socket(lk, q, SOCK_STREAM) != 0) goto give_up;
      q->tcpbuf[0] = (uint8_t)(ql >> 8);
      q->tcpbuf[1] = (uint8_t)ql;
      q->tcpqlen = ql + 2;
      q->tcpsent = q->tcphave = q->tcpwant = 0;
      q->tcp = 1;
      if (lash_io_start(loop, &q->io, q->fd, LASH_WRITE, on_tcp, q) != 0)
        goto give_up;
      return;
    }
    if (res.rcode == LASH_DNS_SERVFAIL || res.rcode == LASH_DNS_REFUSED ||
        res.rcode == LASH_DNS_NOTIMP || res.rcode == LASH_DNS_FORMERR)
      return;       /* let the timeout try the next server */
    q->rcode = res.rcode;
    q->n = res.n;
    q->ttl = res.ttl;
    q->done = 1;
    question_close(lk, q);
    maybe_finish(lk);
    return;
  }
give_up:
  question_close(lk, q);
  q->rcode = LASH_DNS_SERVFAIL;
  q->done = 1;
  maybe_finish(lk);
}

static void on_tcp(lash_loop *loop, lash_io *io, unsigned ev) {
  question *q = io->data;
  lookup *lk = q->lk;
  if (q->tcpsent < q->tcpqlen) {
    ssize_t n = send(q->fd, q->tcpbuf + q->tcpsent, q->tcpqlen - q->tcpsent,
                     MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      goto fail;
    }
    q->tcpsent += (size_t)n;
    if (q->tcpsent == q->tcpqlen &&
        lash_io_start(loop, &q->io, q->fd, LASH_READ, on_tcp, q) != 0)
      goto fail;
    return;
  }
  for (;;) {
    size_t want = q->tcpwant ? q->tcpwant + 2 : 2;
    ssize_t n = recv(q->fd, q->tcpbuf + q->tcphave, want - q->tcphave, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      goto fail;
    }
    if (n == 0) goto fail;
    q->tcphave += (size_t)n;
    if (!q->tcpwant && q->tcphave == 2) {
      q->tcpwant = (size_t)q->tcpbuf[0] << 8 | q->tcpbuf[1];
      if (q->tcpwant == 0) goto fail;
      continue;
    }
    if (q->tcpwant && q->tcphave == q->tcpwant + 2) {
      lash_dns_result res;
      if (lash_dns_parse_answer(q->tcpbuf + 2, q->tcpwant, q->id, lk->name,
                                q->qtype, q->addrs, LASH_RESOLVE_MAX_ADDRS,
                                &res) != 0)
        goto fail;
      q->rcode = res.rcode;
      q->n = res.n;
      q->ttl = res.ttl;
      q->done = 1;
      question_close(lk, q);
      maybe_finish(lk);
      return;
    }
  }
fail:
  question_close(lk, q);
  q->rcode = LASH_DNS_SERVFAIL;
  q->done = 1;
  maybe_finish(lk);
}

/* (Re)send every unanswered UDP question to the current server. */
static void send_all(lookup *lk) {
  int i;
  for (i = 0; i < 2; i++) {
    question *q = &lk->q[i];
    uint8_t msg[MSG_MAX];
    size_t n;
    if (q->done || q->tcp) continue;
    question_close(lk, q);
    if (getrandom(&q->id, sizeof q->id, GRND_NONBLOCK) != sizeof q->id)
      q->id = (uint16_t)(lash_now_ns() ^ (uintptr_t)q);
    n = lash_dns_build_query(msg, sizeof msg, q->id, lk->name, q->qtype);
    if (!n || open_socket(lk, q, SOCK_DGRAM) != 0 ||
        lash_io_start(lk->r->loop, &q->io, q->fd, LASH_READ, on_udp, q) != 0 ||
        send(q->fd, msg, n, MSG_NOSIGNAL) < 0) {
      question_close(lk, q);   /* this server is no use: the timer moves on */
    }
  }
}

static void on_timeout(lash_loop *loop, lash_timer *t) {
  lookup *lk = t->data;
  int i;
  if (lk->ready) {              /* answered from hosts or the cache */
    deliver(lk);
    return;
  }
  if (++lk->tries >= lk->r->attempts * (int)lk->r->nservers) {
    for (i = 0; i < 2; i++)
      if (!lk->q[i].done) {
        question_close(lk, &lk->q[i]);
        lk->q[i].rcode = LASH_DNS_SERVFAIL;
        lk->q[i].done = 1;
      }
    finish(lk);
    return;
  }
  lk->server = (lk->server + 1) % (int)lk->r->nservers;
  send_all(lk);
  lash_timer_start(loop, &lk->timer, (uint64_t)lk->r->timeout_ms * 1000000u,
                   on_timeout, lk);
}

static lookup *lookup_new(lash_resolver *r, const char *name) {
  lookup *lk = calloc(1, sizeof *lk);
  int i;
  if (!lk) return NULL;
  lk->r = r;
  strcpy(lk->name, name);
  lash_timer_init(&lk->timer);
  for (i = 0; i < 2; i++) {
    lk->q[i].lk = lk;
    lk->q[i].fd = -1;
    lk->q[i].qtype = i == 0 ? LASH_DNS_A : LASH_DNS_AAAA;
  }
  lk->next = r->lookups;
  r->lookups = lk;
  return lk;
}

/* Answer from the hosts file or the cache: a lookup that is ready and
** delivers on the next turn of the loop. */
static int answer_locally(lash_resolver *r, lookup *lk) {
  const cached *c;
  size_t i;
  for (i = 0; i < r->nhosts; i++)
    if (strcmp(r->hosts[i].name, lk->name) == 0 && lk->n < LASH_RESOLVE_MAX_ADDRS)
      lk->addrs[lk->n++] = r->hosts[i].addr;
  if (lk->n) {
    lk->status = LASH_RESOLVE_OK;
    lk->ttl = TTL_MIN;
  } else if ((c = cache_find(r, lk->name))) {
    lk->status = c->status;
    lk->n = c->n;
    lk->ttl = c->ttl;
    memcpy(lk->addrs, c->addrs, c->n * sizeof *c->addrs);
  } else if (r->nservers == 0) {
    lk->status = LASH_RESOLVE_FAILED;
  } else {
    return 0;
  }
  lk->ready = 1;
  return 1;
}

lash_resolve_req *lash_resolve(lash_resolver *r, const char *name,
                               lash_resolve_cb cb, void *data) {
  lash_resolve_req *w = calloc(1, sizeof *w);
  lookup *lk;
  if (!w) return NULL;
  for (lk = r->lookups; lk; lk = lk->next)
    if (strcmp(lk->name, name) == 0) break;
  if (!lk) {
    if (strlen(name) > LASH_NETNAME_MAX || !(lk = lookup_new(r, name))) {
      free(w);
      return NULL;
    }
    if (answer_locally(r, lk)) {
      if (lash_timer_start(r->loop, &lk->timer, 0, on_timeout, lk) != 0) {
        lookup_free(lk);
        free(w);
        return NULL;
      }
    } else {
      send_all(lk);
      if (lash_timer_start(r->loop, &lk->timer,
                           (uint64_t)r->timeout_ms * 1000000u, on_timeout,
                           lk) != 0) {
        lookup_free(lk);
        free(w);
        return NULL;
      }
    }
  }
  w->lk = lk;
  w->cb = cb;
  w->data = data;
  w->next = lk->waiters;
  lk->waiters = w;
  return w;
}

void lash_resolve_cancel(lash_resolve_req *q) {
  /* the lookup goes on for the others (and fills the cache) */
  q->cb = NULL;
}

void lash_resolver_free(lash_resolver *r) {
  if (!r) return;
  while (r->lookups) lookup_free(r->lookups);
  free(r->hosts);
  free(r);
}
