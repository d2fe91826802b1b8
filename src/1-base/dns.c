/*
** dns.c: the DNS wire format (dns.h). Every length is checked against the
** message before it is read; compression pointers are followed a bounded
** number of times, so a hostile message can neither overrun nor loop.
*/
#include "dns.h"

#include <string.h>

#define HDR 12
#define MAX_JUMPS 32
#define MAX_CNAMES 8

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* Read the name at *off into out (lower case, dotted, no final dot; "" for
** the root); *off moves past it in place. -1 when malformed. */
static int read_name(const uint8_t *m, size_t n, size_t *off, char *out) {
  size_t pos = *off, len = 0;
  int jumps = 0, jumped = 0;
  for (;;) {
    uint8_t l;
    if (pos >= n) return -1;
    l = m[pos];
    if ((l & 0xc0) == 0xc0) {
      if (pos + 1 >= n || ++jumps > MAX_JUMPS) return -1;
      if (!jumped) *off = pos + 2;
      jumped = 1;
      pos = (size_t)(l & 0x3f) << 8 | m[pos + 1];
      continue;
    }
    if (l & 0xc0) return -1;
    pos++;
    if (l == 0) break;
    if (pos + l > n || len + l + 1 > LASH_NETNAME_MAX + 1) return -1;
    if (len) out[len++] = '.';
    for (uint8_t i = 0; i < l; i++) {
      char c = (char)m[pos + i];
      out[len++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    pos += l;
  }
  out[len] = '\0';
  if (!jumped) *off = pos;
  return 0;
}

/* Write name in labels at out; returns the bytes, 0 when it does not fit */
static size_t write_name(uint8_t *out, size_t cap, const char *name) {
  size_t o = 0;
  while (*name) {
    const char *dot = strchr(name, '.');
    size_t l = dot ? (size_t)(dot - name) : strlen(name);
    if (l == 0 || l > 63 || o + 1 + l + 1 > cap) return 0;
    out[o++] = (uint8_t)l;
    memcpy(out + o, name, l);
    o += l;
    name += l + (dot ? 1 : 0);
  }
  if (o + 1 > cap) return 0;
  out[o++] = 0;
  return o;
}

int lash_dns_parse_query(const uint8_t *m, size_t n, lash_dns_question *q) {
  size_t off = HDR;
  if (n < HDR) return -1;
  q->id = get16(m);
  q->flags = get16(m + 2);
  if (q->flags & 0x8000) return -1;            /* a response, not a query */
  if (get16(m + 4) != 1) return -1;            /* exactly one question */
  if (read_name(m, n, &off, q->name) != 0) return -1;
  if (off + 4 > n) return -1;
  q->qtype = get16(m + off);
  q->qclass = get16(m + off + 2);
  q->end = off + 4;
  return 0;
}

size_t lash_dns_build_answer(uint8_t *out, size_t cap, const uint8_t *query,
                             const lash_dns_question *q, int rcode,
                             const lash_netaddr *addrs, size_t naddrs,
                             uint32_t ttl) {
  size_t o, i, qlen = q->end - HDR;
  uint16_t ancount = 0;
  int fam = q->qtype == LASH_DNS_A ? 4 : q->qtype == LASH_DNS_AAAA ? 6 : 0;
  if (cap < q->end) return 0;
  memcpy(out, query, q->end);                  /* header and the question */
  /* QR, the client's opcode and RD, RA; AA/TC/Z/AD/CD clear */
  put16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x7900) | 0x0080 | (rcode & 0xf)));
  put16(out + 6, 0);
  put16(out + 8, 0);
  put16(out + 10, 0);
  o = HDR + qlen;
  if (rcode == LASH_DNS_NOERROR && fam && q->qclass == 1) {
    for (i = 0; i < naddrs; i++) {
      size_t rdlen = fam == 4 ? 4 : 16;
      if (addrs[i].family != fam) continue;
      if (o + 12 + rdlen > cap) break;         /* as many as fit */
      put16(out + o, 0xc000 | HDR);            /* the question's name */
      put16(out + o + 2, q->qtype);
      put16(out + o + 4, 1);
      put32(out + o + 6, ttl);
      put16(out + o + 10, (uint16_t)rdlen);
      memcpy(out + o + 12, addrs[i].b, rdlen);
      o += 12 + rdlen;
      ancount++;
    }
  }
  put16(out + 6, ancount);
  return o;
}

size_t lash_dns_build_query(uint8_t *out, size_t cap, uint16_t id,
                            const char *name, uint16_t qtype) {
  size_t nl;
  if (cap < HDR + 4) return 0;
  memset(out, 0, HDR);
  put16(out, id);
  put16(out + 2, 0x0100);                      /* RD */
  put16(out + 4, 1);
  nl = write_name(out + HDR, cap - HDR - 4, name);
  if (nl == 0) return 0;
  put16(out + HDR + nl, qtype);
  put16(out + HDR + nl + 2, 1);                /* IN */
  return HDR + nl + 4;
}

int lash_dns_parse_answer(const uint8_t *m, size_t n, uint16_t id,
                          const char *name, uint16_t qtype,
                          lash_netaddr *addrs, size_t cap,
                          lash_dns_result *res) {
  char qname[LASH_NETNAME_MAX + 1], want[LASH_NETNAME_MAX + 1];
  char rname[LASH_NETNAME_MAX + 1];
  size_t off = HDR, start, i;
  uint16_t flags, qd, an;
  int hops = 0, restart = 1;
  memset(res, 0, sizeof *res);
  if (n < HDR || get16(m) != id) return -1;
  flags = get16(m + 2);
  if (!(flags & 0x8000)) return -1;
  qd = get16(m + 4);
  an = get16(m + 6);
  res->rcode = flags & 0xf;
  res->truncated = (flags & 0x0200) != 0;
  res->ttl = UINT32_MAX;
  if (qd != 1) return -1;
  if (read_name(m, n, &off, qname) != 0 || off + 4 > n) return -1;
  if (strcmp(qname, name) != 0 || get16(m + off) != qtype) return -1;
  off += 4;
  start = off;
  strcpy(want, name);
  /* follow CNAMEs (in any order), then collect want's records */
  while (restart) {
    restart = 0;
    off = start;
    for (i = 0; i < an; i++) {
      uint16_t type, rdlen;
      uint32_t ttl;
      if (read_name(m, n, &off, rname) != 0 || off + 10 > n) return -1;
      type = get16(m + off);
      ttl = get32(m + off + 4);
      rdlen = get16(m + off + 8);
      off += 10;
      if (off + rdlen > n) return -1;
      if (strcmp(rname, want) == 0 && type == LASH_DNS_CNAME) {
        size_t t = off;
        if (++hops > MAX_CNAMES || read_name(m, n, &t, want) != 0) return -1;
        if (ttl < res->ttl) res->ttl = ttl;
        restart = 1;
        res->n = 0;
        break;
      }
      if (strcmp(rname, want) == 0 && type == qtype &&
          ((type == LASH_DNS_A && rdlen == 4) ||
           (type == LASH_DNS_AAAA && rdlen == 16))) {
        if (res->n < cap) {
          memset(&addrs[res->n], 0, sizeof *addrs);
          addrs[res->n].family = type == LASH_DNS_A ? 4 : 6;
          memcpy(addrs[res->n].b, m + off, rdlen);
          res->n++;
        }
        if (ttl < res->ttl) res->ttl = ttl;
      }
      off += rdlen;
    }
  }
  if (res->ttl == UINT32_MAX) res->ttl = 0;
  return 0;
}
