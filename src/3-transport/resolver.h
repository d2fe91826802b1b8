/*
** resolver.h: a stub DNS resolver on lash's loop (prefix lash_resolver_,
** lash_resolve): the hosts file first, then the name servers of a
** resolv.conf over UDP (A and AAAA at once, TCP when an answer is
** truncated), with a small cache that keeps answers for their TTL and
** one lookup in flight per name however many ask. No threads, no
** blocking call: the egress proxy resolves the names the jail asks for
** here, so its decisions see the addresses it is about to connect to.
*/
#ifndef lash_resolver_h
#define lash_resolver_h

#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "netpolicy.h"

#define LASH_RESOLVE_MAX_ADDRS 16

typedef struct lash_resolver lash_resolver;
typedef struct lash_resolve_req lash_resolve_req;

enum {
  LASH_RESOLVE_OK = 0,          /* n may be 0: the name has no address */
  LASH_RESOLVE_NXDOMAIN,        /* the name does not exist */
  LASH_RESOLVE_FAILED           /* no server answered, or SERVFAIL */
};

/* Called once, from the loop, never from lash_resolve itself. */
typedef void (*lash_resolve_cb)(void *data, int status,
                                const lash_netaddr *addrs, size_t n,
                                uint32_t ttl);

/* A resolver reading resolv_conf and hosts (NULL: /etc/resolv.conf,
** /etc/hosts) now. A nameserver line may carry a port ("127.0.0.1:5353",
** "[::1]:5353"), which glibc's reader does not take. NULL when out of
** memory. */
lash_resolver *lash_resolver_new(lash_loop *loop, const char *resolv_conf,
                                 const char *hosts);
/* Free it; requests still pending are dropped without their callback. */
void lash_resolver_free(lash_resolver *r);
/* Resolve name (normalized, see lash_netname_norm). NULL when out of
** memory; the request belongs to the resolver until its callback ran or
** it is cancelled. */
lash_resolve_req *lash_resolve(lash_resolver *r, const char *name,
                               lash_resolve_cb cb, void *data);
/* Its callback will not run. Only before it has. */
void lash_resolve_cancel(lash_resolve_req *q);
/* How many name servers were read (0: only the hosts file answers). */
size_t lash_resolver_servers(const lash_resolver *r);

#endif
