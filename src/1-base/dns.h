/*
** dns.h: the DNS wire format (RFC 1035, prefix lash_dns_), as far as an
** egress filter needs it: reading a client's query and writing the answer
** (A and AAAA records, or a bare rcode), writing a stub resolver's query and
** reading the server's answer (following CNAMEs inside the message). Names
** come out lower case, without the final dot. Pure: no I/O, no Lua.
*/
#ifndef lash_dns_h
#define lash_dns_h

#include <stddef.h>
#include <stdint.h>

#include "netpolicy.h"

enum {
  LASH_DNS_A = 1, LASH_DNS_CNAME = 5, LASH_DNS_AAAA = 28, LASH_DNS_ANY = 255
};
enum {
  LASH_DNS_NOERROR = 0, LASH_DNS_FORMERR = 1, LASH_DNS_SERVFAIL = 2,
  LASH_DNS_NXDOMAIN = 3, LASH_DNS_NOTIMP = 4, LASH_DNS_REFUSED = 5
};

typedef struct lash_dns_question {
  uint16_t id, flags;
  uint16_t qtype, qclass;
  size_t end;                   /* offset just past the question */
  char name[LASH_NETNAME_MAX + 1];
} lash_dns_question;

/* Read a query: a header with exactly one question and QR clear. 0, or -1
** when it is not one (no answer can be built: drop it). A name with bytes
** no host name has comes out as is; the caller refuses it. */
int lash_dns_parse_query(const uint8_t *m, size_t n, lash_dns_question *q);

/* Write the answer to query q (whose bytes are query[0..q->end)): rcode,
** and for NOERROR the addresses of q->qtype among addrs, ttl seconds each.
** Returns its length, or 0 when cap is too small. */
size_t lash_dns_build_answer(uint8_t *out, size_t cap, const uint8_t *query,
                             const lash_dns_question *q, int rcode,
                             const lash_netaddr *addrs, size_t naddrs,
                             uint32_t ttl);

/* Write a recursive query for name (normalized) and qtype. Returns its
** length, or 0 when it does not fit. */
size_t lash_dns_build_query(uint8_t *out, size_t cap, uint16_t id,
                            const char *name, uint16_t qtype);

typedef struct lash_dns_result {
  int rcode;
  int truncated;                /* TC: ask again over TCP */
  uint32_t ttl;                 /* the smallest on the way to the records */
  size_t n;                     /* addresses found (at most the cap given) */
} lash_dns_result;

/* Read the answer to our query (id, name, qtype): the qtype addresses of
** name or of the name its CNAMEs lead to. 0, or -1 when the message is
** malformed or answers another question. */
int lash_dns_parse_answer(const uint8_t *m, size_t n, uint16_t id,
                          const char *name, uint16_t qtype,
                          lash_netaddr *addrs, size_t cap,
                          lash_dns_result *res);

#endif
