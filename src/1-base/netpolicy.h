/*
** netpolicy.h: an egress policy over host names and addresses (prefix
** lash_netpol_ for the policy, lash_netaddr_ for addresses): the rules of
** `network = { allow = {...}, deny = {...}, hosts = {...} }` parsed once
** ("pypi.example:443", "*.example.org", "10.0.0.5:5432", "10.0.0.0/8",
** "[2001:db8::1]:443"), and the decisions every filter asks: may this name
** on this port be reached, may this address. Deny wins over allow; an
** address of a special range (loopback, link-local and the metadata
** address, private, shared, reserved) is reached only when a rule allows
** it by address, so an allowed name cannot be pointed at the host's own
** services. A policy may be narrowed by another (an attach): then both
** have to allow. Pure: no I/O, no Lua, no allocation after building.
*/
#ifndef lash_netpolicy_h
#define lash_netpolicy_h

#include <stddef.h>
#include <stdint.h>

#define LASH_NETNAME_MAX 253    /* a DNS name, without the final dot */

typedef struct lash_netaddr {
  uint8_t family;               /* 4 or 6 */
  uint8_t b[16];                /* network order; IPv4 in b[0..3] */
} lash_netaddr;

enum { LASH_NETRULE_NAME, LASH_NETRULE_SUFFIX, LASH_NETRULE_ADDR };

typedef struct lash_netrule {
  int kind;
  uint16_t port;                /* 0: every port */
  uint8_t bits;                 /* ADDR: the prefix length */
  lash_netaddr addr;            /* ADDR */
  char name[LASH_NETNAME_MAX + 1]; /* NAME; SUFFIX without its "*." */
} lash_netrule;

typedef struct lash_nethost {   /* a name pinned to an address */
  char name[LASH_NETNAME_MAX + 1];
  lash_netaddr addr;
} lash_nethost;

typedef struct lash_netpolicy lash_netpolicy;
struct lash_netpolicy {
  lash_netrule *allow, *deny;
  size_t nallow, ndeny;
  lash_nethost *hosts;
  size_t nhosts;
  const lash_netpolicy *outer;  /* a policy this one narrows, or NULL */
};

/* What a check decided. */
enum {
  LASH_NETPOL_ALLOW = 0,
  LASH_NETPOL_UNLISTED,         /* no allow rule covers it */
  LASH_NETPOL_DENIED,           /* a deny rule covers it */
  LASH_NETPOL_SPECIAL,          /* a special-range address no rule allows */
  LASH_NETPOL_OUTER             /* the policy it narrows refuses it */
};

/* ---- addresses ------------------------------------------------------ */

/* Parse an IPv4 or IPv6 literal (no brackets, no port). 0 or -1. */
int  lash_netaddr_parse(const char *s, size_t len, lash_netaddr *a);
/* Text form into out (at least 46 bytes); returns out. */
char *lash_netaddr_format(const lash_netaddr *a, char *out);
/* NULL for an ordinary public address, else what is special about it:
** "loopback", "the cloud metadata address", "link-local", "private",
** "shared (carrier-grade NAT)", "unspecified", "multicast", "reserved",
** "documentation", "benchmarking". IPv4 inside IPv6 (mapped, NAT64,
** 6to4) is judged by its IPv4 address. */
const char *lash_netaddr_special(const lash_netaddr *a);
/* 1 when a is inside net/bits of the same family. */
int  lash_netaddr_in(const lash_netaddr *a, const lash_netaddr *net, int bits);

/* ---- names ---------------------------------------------------------- */

/* Normalize a host name into out (lower case, no final dot) and check
** that it is one (letters, digits, '-', '_', labels of 1..63, at most
** 253). Returns 0, or -1 with a reason in err. */
int  lash_netname_norm(const char *s, size_t len, char *out, char *err,
                       size_t errcap);

/* ---- rules and policies --------------------------------------------- */

/* Parse one rule. Returns 0, or -1 with a message naming the cause and
** the accepted forms in err. */
int  lash_netrule_parse(const char *s, size_t len, lash_netrule *r,
                        char *err, size_t errcap);
/* The rule's text, canonical ("*.example.org:443", "10.0.0.0/8"), into
** out; returns its length (truncated to cap - 1). */
size_t lash_netrule_format(const lash_netrule *r, char *out, size_t cap);

/* An empty policy (allows nothing). Free what the adds allocated with
** lash_netpol_free; the outer policy is not owned. */
void lash_netpol_init(lash_netpolicy *p);
void lash_netpol_free(lash_netpolicy *p);
/* Add a rule (deny != 0: to the deny list) or a pinned host. 0, -1 with
** err (a bad rule), or -2 (out of memory). */
int  lash_netpol_add(lash_netpolicy *p, int deny, const char *s, size_t len,
                     char *err, size_t errcap);
int  lash_netpol_add_host(lash_netpolicy *p, const char *name, size_t nlen,
                          const char *addr, size_t alen, char *err,
                          size_t errcap);

/* May `name` (normalized) be reached on port by name? Port 0 asks
** whether it may be reached on some port (a DNS answer for it). */
int  lash_netpol_check_name(const lash_netpolicy *p, const char *name,
                            uint16_t port);
/* May address a be connected to on port? by_name: the address is one an
** allowed name resolved to (then only deny rules and special ranges
** refuse it); otherwise it was asked for as a literal, and an allow rule
** has to cover it by address. pinned: it is the name's pinned address
** (the policy's author wrote it, so its range does not refuse it). */
int  lash_netpol_check_addr(const lash_netpolicy *p, const lash_netaddr *a,
                            uint16_t port, int by_name, int pinned);
/* The address pinned for name, or NULL. */
const lash_netaddr *lash_netpol_pinned(const lash_netpolicy *p,
                                       const char *name);
/* 1 when every host and port r allows is allowed by p's allow rules (an
** attach may only narrow). */
int  lash_netpol_covers(const lash_netpolicy *p, const lash_netrule *r);
/* The allow list as text ("a.test:8080, *.example.org"), "nothing" when
** empty; returns the length (truncated to cap - 1). */
size_t lash_netpol_describe(const lash_netpolicy *p, char *out, size_t cap);

#endif
