/*
** netpolicy.c: egress rules and the decisions over them (netpolicy.h).
** One owner for what a rule may say, what a special address is and who
** wins between allow and deny, so the proxy, the DNS answers, the attach
** check and the messages all agree.
*/
#include "netpolicy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- addresses ------------------------------------------------------ */

int lash_netaddr_parse(const char *s, size_t len, lash_netaddr *a) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  memset(a, 0, sizeof *a);
  if (memchr(buf, ':', len)) {
    if (inet_pton(AF_INET6, buf, a->b) != 1) return -1;
    a->family = 6;
    return 0;
  }
  if (inet_pton(AF_INET, buf, a->b) != 1) return -1;
  a->family = 4;
  return 0;
}

char *lash_netaddr_format(const lash_netaddr *a, char *out) {
  if (!inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->b, out, 46))
    strcpy(out, "?");
  return out;
}

int lash_netaddr_in(const lash_netaddr *a, const lash_netaddr *net, int bits) {
  int full = bits / 8, rest = bits % 8;
  if (a->family != net->family) return 0;
  if (memcmp(a->b, net->b, (size_t)full) != 0) return 0;
  if (rest) {
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    if ((a->b[full] & mask) != (net->b[full] & mask)) return 0;
  }
  return 1;
}

typedef struct special {
  uint8_t family, bits;
  uint8_t net[16];
  const char *what;
} special;

/* IANA's special-purpose registries, most specific first */
static const special specials[] = {
  {4, 32, {169, 254, 169, 254}, "the cloud metadata address"},
  {4, 8, {0}, "unspecified"},
  {4, 8, {10}, "private"},
  {4, 10, {100, 64}, "shared (carrier-grade NAT)"},
  {4, 8, {127}, "loopback"},
  {4, 16, {169, 254}, "link-local"},
  {4, 12, {172, 16}, "private"},
  {4, 24, {192, 0, 0}, "reserved"},
  {4, 24, {192, 0, 2}, "documentation"},
  {4, 24, {192, 88, 99}, "reserved"},
  {4, 16, {192, 168}, "private"},
  {4, 15, {198, 18}, "benchmarking"},
  {4, 24, {198, 51, 100}, "documentation"},
  {4, 24, {203, 0, 113}, "documentation"},
  {4, 4, {224}, "multicast"},
  {4, 4, {240}, "reserved"},
  {6, 128, {0}, "unspecified"},
  {6, 128, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "loopback"},
  {6, 128, {0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54},
   "the cloud metadata address"},
  {6, 96, {0}, "reserved"},                     /* IPv4-compatible */
  {6, 48, {0, 0x64, 0xff, 0x9b, 0, 1}, "reserved"},  /* local NAT64 */
  {6, 64, {1, 0}, "reserved"},                  /* discard-only */
  {6, 32, {0x20, 0x01, 0x0d, 0xb8}, "documentation"},
  {6, 23, {0x20, 0x01}, "reserved"},            /* IETF, Teredo */
  {6, 7, {0xfc}, "private"},
  {6, 10, {0xfe, 0x80}, "link-local"},
  {6, 10, {0xfe, 0xc0}, "reserved"},            /* site-local */
  {6, 8, {0xff}, "multicast"},
};

/* The IPv4 address inside a mapped, NAT64 or 6to4 IPv6 address. */
static int embedded_v4(const lash_netaddr *a, lash_netaddr *v4) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
  if (a->family != 6) return 0;
  memset(v4, 0, sizeof *v4);
  v4->family = 4;
  if (memcmp(a->b, mapped, 12) == 0 || memcmp(a->b, nat64, 12) == 0) {
    memcpy(v4->b, a->b + 12, 4);
    return 1;
  }
  if (a->b[0] == 0x20 && a->b[1] == 0x02) {
    memcpy(v4->b, a->b + 2, 4);
    return 1;
  }
  return 0;
}

const char *lash_netaddr_special(const lash_netaddr *a) {
  lash_netaddr v4;
  size_t i;
  if (embedded_v4(a, &v4)) return lash_netaddr_special(&v4);
  for (i = 0; i < sizeof specials / sizeof *specials; i++) {
    lash_netaddr net;
    net.family = specials[i].family;
    memcpy(net.b, specials[i].net, 16);
    if (lash_netaddr_in(a, &net, specials[i].bits)) return specials[i].what;
  }
  return NULL;
}

/* ---- names ---------------------------------------------------------- */

int lash_netname_norm(const char *s, size_t len, char *out, char *err,
                      size_t errcap) {
  size_t i, label = 0;
  if (len > 0 && s[len - 1] == '.') len--;
  if (len == 0) {
    snprintf(err, errcap, "an empty host name");
    return -1;
  }
  if (len > LASH_NETNAME_MAX) {
    snprintf(err, errcap, "a host name longer than %d characters",
             LASH_NETNAME_MAX);
    return -1;
  }
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
    if (c == '.') {
      if (label == 0) {
        snprintf(err, errcap, "'%.*s' has an empty label", (int)len, s);
        return -1;
      }
      label = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_') {
      if (++label > 63) {
        snprintf(err, errcap, "'%.*s' has a label longer than 63 characters",
                 (int)len, s);
        return -1;
      }
    } else {
      snprintf(err, errcap, "'%.*s' is not a host name (letters, digits, "
               "'-' and '.'; write international names in punycode)",
               (int)len, s);
      return -1;
    }
    out[i] = (char)c;
  }
  if (label == 0) {
    snprintf(err, errcap, "'%.*s' has an empty label", (int)len, s);
    return -1;
  }
  out[len] = '\0';
  return 0;
}

/* ---- rules ---------------------------------------------------------- */

#define FORMS "give a host (\"pypi.org\"), a host and port (\"pypi.org:443\"), " \
              "subdomains (\"*.example.org\"), an address (\"10.0.0.5:5432\", " \
              "\"[2001:db8::1]:443\") or a range (\"10.0.0.0/8\")"

static int parse_port(const char *s, size_t len, uint16_t *port) {
  unsigned long v = 0;
  size_t i;
  if (len == 0 || len > 5) return -1;
  for (i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (unsigned long)(s[i] - '0');
  }
  if (v == 0 || v > 65535) return -1;
  *port = (uint16_t)v;
  return 0;
}

/* an address or a range "a/bits" into r */
static int parse_range(const char *s, size_t len, lash_netrule *r) {
  const char *slash = memchr(s, '/', len);
  size_t alen = slash ? (size_t)(slash - s) : len;
  int max, bits, i;
  if (lash_netaddr_parse(s, alen, &r->addr) != 0) return -1;
  max = r->addr.family == 6 ? 128 : 32;
  bits = max;
  if (slash) {
    const char *p = slash + 1;
    size_t n = len - alen - 1;
    if (n == 0 || n > 3) return -1;
    bits = 0;
    for (i = 0; i < (int)n; i++) {
      if (p[i] < '0' || p[i] > '9') return -1;
      bits = bits * 10 + (p[i] - '0');
    }
    if (bits > max) return -1;
  }
  /* host bits off: 10.0.0.5/8 is 10.0.0.0/8 */
  for (i = bits; i < max; i++) r->addr.b[i / 8] &= (uint8_t)~(0x80u >> (i % 8));
  r->bits = (uint8_t)bits;
  r->kind = LASH_NETRULE_ADDR;
  return 0;
}

int lash_netrule_parse(const char *s, size_t len, lash_netrule *r, char *err,
                       size_t errcap) {
  const char *host = s;
  size_t hlen = len, i, colons = 0;
  char why[160];
  memset(r, 0, sizeof *r);
  for (i = 0; i < len; i++) {
    if (s[i] == ':') colons++;
    if (s[i] == ' ' || s[i] == '\t' || (unsigned char)s[i] < 32) {
      snprintf(err, errcap, "'%.*s' holds a space or control character; "
               FORMS, (int)len, s);
      return -1;
    }
  }
  if (len == 0) {
    snprintf(err, errcap, "an empty rule; " FORMS);
    return -1;
  }
  if (len > 3 && memmem(s, len, "://", 3)) {
    snprintf(err, errcap, "'%.*s' is a URL; give its host and port "
             "(\"pypi.org:443\")", (int)len, s);
    return -1;
  }
  if (s[0] == '[') {
    const char *close = memchr(s, ']', len);
    if (!close) goto bad;
    host = s + 1;
    hlen = (size_t)(close - host);
    if (close + 1 < s + len) {
      if (close[1] != ':' ||
          parse_port(close + 2, (size_t)(s + len - close - 2), &r->port) != 0)
        goto badport;
    }
    if (parse_range(host, hlen, r) != 0 || r->addr.family != 6) goto bad;
    return 0;
  }
  if (colons > 1) {                 /* a bare IPv6 address or range */
    if (parse_range(s, len, r) != 0) goto bad;
    return 0;
  }
  if (colons == 1) {
    const char *c = memchr(s, ':', len);
    hlen = (size_t)(c - s);
    if (parse_port(c + 1, len - hlen - 1, &r->port) != 0) goto badport;
  }
  if (hlen == 1 && host[0] == '*') {
    snprintf(err, errcap, "'%.*s' would allow every host; say network = "
             "\"on\" for that, or list the hosts", (int)len, s);
    return -1;
  }
  if (memchr(host, '/', hlen) || lash_netaddr_parse(host, hlen, &r->addr) == 0) {
    if (parse_range(host, hlen, r) != 0) goto bad;
    return 0;
  }
  if (hlen > 2 && host[0] == '*' && host[1] == '.') {
    if (lash_netname_norm(host + 2, hlen - 2, r->name, why, sizeof why) != 0)
      goto badname;
    r->kind = LASH_NETRULE_SUFFIX;
    return 0;
  }
  if (memchr(host, '*', hlen)) {
    snprintf(err, errcap, "'%.*s': a '*' may only open a rule, as in "
             "\"*.example.org\" (its subdomains)", (int)len, s);
    return -1;
  }
  if (lash_netname_norm(host, hlen, r->name, why, sizeof why) != 0) goto badname;
  r->kind = LASH_NETRULE_NAME;
  return 0;
badname:
  snprintf(err, errcap, "%s; " FORMS, why);
  return -1;
badport:
  snprintf(err, errcap, "'%.*s' has a bad port (1 to 65535)", (int)len, s);
  return -1;
bad:
  snprintf(err, errcap, "'%.*s' is not a rule; " FORMS, (int)len, s);
  return -1;
}

size_t lash_netrule_format(const lash_netrule *r, char *out, size_t cap) {
  char a[46], port[8] = "";
  int n;
  if (r->port) snprintf(port, sizeof port, ":%u", (unsigned)r->port);
  if (r->kind == LASH_NETRULE_ADDR) {
    int whole = r->bits == (r->addr.family == 6 ? 128 : 32);
    char bits[8] = "";
    lash_netaddr_format(&r->addr, a);
    if (!whole) snprintf(bits, sizeof bits, "/%u", (unsigned)r->bits);
    if (r->addr.family == 6 && r->port)
      n = snprintf(out, cap, "[%s%s]%s", a, bits, port);
    else
      n = snprintf(out, cap, "%s%s%s", a, bits, port);
  } else {
    n = snprintf(out, cap, "%s%s%s", r->kind == LASH_NETRULE_SUFFIX ? "*." : "",
                 r->name, port);
  }
  if (n < 0) return 0;
  return (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
}

/* ---- policies ------------------------------------------------------- */

void lash_netpol_init(lash_netpolicy *p) {
  memset(p, 0, sizeof *p);
}

void lash_netpol_free(lash_netpolicy *p) {
  free(p->allow);
  free(p->deny);
  free(p->hosts);
  lash_netpol_init(p);
}

int lash_netpol_add(lash_netpolicy *p, int deny, const char *s, size_t len,
                    char *err, size_t errcap) {
  lash_netrule r, *grown;
  lash_netrule **list = deny ? &p->deny : &p->allow;
  size_t *n = deny ? &p->ndeny : &p->nallow;
  if (lash_netrule_parse(s, len, &r, err, errcap) != 0) return -1;
  grown = realloc(*list, (*n + 1) * sizeof **list);
  if (!grown) return -2;
  grown[(*n)++] = r;
  *list = grown;
  return 0;
}

int lash_netpol_add_host(lash_netpolicy *p, const char *name, size_t nlen,
                         const char *addr, size_t alen, char *err,
                         size_t errcap) {
  lash_nethost h, *grown;
  char why[160];
  if (lash_netname_norm(name, nlen, h.name, why, sizeof why) != 0) {
    snprintf(err, errcap, "hosts: %s", why);
    return -1;
  }
  if (lash_netaddr_parse(addr, alen, &h.addr) != 0) {
    snprintf(err, errcap, "hosts: '%.*s' for %s is not an IPv4 or IPv6 "
             "address", (int)alen, addr, h.name);
    return -1;
  }
  grown = realloc(p->hosts, (p->nhosts + 1) * sizeof *p->hosts);
  if (!grown) return -2;
  grown[p->nhosts++] = h;
  p->hosts = grown;
  return 0;
}

/* port 0 asks "on some port" (a DNS answer): any allow rule can grant
** that, only a deny rule for every port takes it away */
static int allow_port(const lash_netrule *r, uint16_t port) {
  return port == 0 || r->port == 0 || r->port == port;
}

static int deny_port(const lash_netrule *r, uint16_t port) {
  return r->port == 0 || r->port == port;
}

static int name_matches(const lash_netrule *r, const char *name) {
  size_t nl, sl;
  if (r->kind == LASH_NETRULE_NAME) return strcmp(r->name, name) == 0;
  if (r->kind != LASH_NETRULE_SUFFIX) return 0;
  nl = strlen(name);
  sl = strlen(r->name);
  return nl > sl + 1 && name[nl - sl - 1] == '.' &&
         strcmp(name + nl - sl, r->name) == 0;
}

static int addr_matches(const lash_netrule *r, const lash_netaddr *a) {
  lash_netaddr v4;
  if (r->kind != LASH_NETRULE_ADDR) return 0;
  if (lash_netaddr_in(a, &r->addr, r->bits)) return 1;
  /* an IPv4 rule also covers the address written as mapped IPv6 */
  return embedded_v4(a, &v4) && lash_netaddr_in(&v4, &r->addr, r->bits);
}

int lash_netpol_check_name(const lash_netpolicy *p, const char *name,
                           uint16_t port) {
  size_t i;
  int verdict = LASH_NETPOL_UNLISTED;
  for (i = 0; i < p->ndeny; i++)
    if (deny_port(&p->deny[i], port) && name_matches(&p->deny[i], name))
      return LASH_NETPOL_DENIED;
  for (i = 0; i < p->nallow && verdict; i++)
    if (allow_port(&p->allow[i], port) && name_matches(&p->allow[i], name))
      verdict = LASH_NETPOL_ALLOW;
  if (verdict == LASH_NETPOL_ALLOW && p->outer &&
      lash_netpol_check_name(p->outer, name, port) != LASH_NETPOL_ALLOW)
    verdict = LASH_NETPOL_OUTER;
  return verdict;
}

int lash_netpol_check_addr(const lash_netpolicy *p, const lash_netaddr *a,
                           uint16_t port, int by_name, int pinned) {
  size_t i;
  int by_addr = 0, verdict;
  for (i = 0; i < p->ndeny; i++)
    if (deny_port(&p->deny[i], port) && addr_matches(&p->deny[i], a))
      return LASH_NETPOL_DENIED;
  for (i = 0; i < p->nallow && !by_addr; i++)
    by_addr = allow_port(&p->allow[i], port) && addr_matches(&p->allow[i], a);
  if (by_addr || (by_name && pinned)) verdict = LASH_NETPOL_ALLOW;
  else if (lash_netaddr_special(a)) verdict = LASH_NETPOL_SPECIAL;
  else verdict = by_name ? LASH_NETPOL_ALLOW : LASH_NETPOL_UNLISTED;
  if (verdict == LASH_NETPOL_ALLOW && p->outer) {
    int o = lash_netpol_check_addr(p->outer, a, port, by_name, pinned);
    if (o != LASH_NETPOL_ALLOW) verdict = o == LASH_NETPOL_SPECIAL ? o : LASH_NETPOL_OUTER;
  }
  return verdict;
}

const lash_netaddr *lash_netpol_pinned(const lash_netpolicy *p,
                                       const char *name) {
  size_t i;
  /* pins are the creator's: a narrowing cannot point a name elsewhere */
  while (p->outer) p = p->outer;
  for (i = 0; i < p->nhosts; i++)
    if (strcmp(p->hosts[i].name, name) == 0) return &p->hosts[i].addr;
  return NULL;
}

static int port_covers(const lash_netrule *q, const lash_netrule *r) {
  return q->port == 0 || q->port == r->port;
}

int lash_netpol_covers(const lash_netpolicy *p, const lash_netrule *r) {
  size_t i;
  for (i = 0; i < p->nallow; i++) {
    const lash_netrule *q = &p->allow[i];
    if (!port_covers(q, r)) continue;
    switch (r->kind) {
    case LASH_NETRULE_NAME:
      if (name_matches(q, r->name)) return 1;
      break;
    case LASH_NETRULE_SUFFIX:
      if (q->kind == LASH_NETRULE_SUFFIX &&
          (strcmp(q->name, r->name) == 0 || name_matches(q, r->name)))
        return 1;
      break;
    default:
      if (q->kind == LASH_NETRULE_ADDR && q->bits <= r->bits &&
          lash_netaddr_in(&r->addr, &q->addr, q->bits))
        return 1;
      break;
    }
  }
  return 0;
}

size_t lash_netpol_describe(const lash_netpolicy *p, char *out, size_t cap) {
  size_t i, n = 0;
  if (cap == 0) return 0;
  out[0] = '\0';
  if (p->nallow == 0) {
    snprintf(out, cap, "nothing");
    return strlen(out);
  }
  for (i = 0; i < p->nallow && n + 1 < cap; i++) {
    if (i) {
      snprintf(out + n, cap - n, ", ");
      n += strlen(out + n);
    }
    if (n + 1 < cap) n += lash_netrule_format(&p->allow[i], out + n, cap - n);
  }
  return n;
}
