/*
** modal_token.h: the cache of Modal's auth token (modal_token.c; prefix
** modal_token_): AuthTokenGet's JWT, when it expires, when to refresh it
** and how long to back off after a failed fetch. Pure storage: the time is
** passed in and the fetch itself is modal_rpc.c's, which sits above.
*/
#ifndef lash_modal_token_h
#define lash_modal_token_h

#include <stddef.h>

typedef struct modal_token {
  char *jwt;                    /* secret; NULL: none */
  double expires;               /* lash_now seconds */
  double refresh_at;            /* a background refresh is due from here */
  double backoff_until, backoff;  /* after a failed fetch */
} modal_token;

void modal_token_init(modal_token *t);
/* Forget the token (scrubbed). The struct may be used again. */
void modal_token_free(modal_token *t);
/* The JWT if it is usable at now (until 5 s before it expires), else NULL. */
const char *modal_token_valid(const modal_token *t, double now);
/* Whether a background refresh of a usable token is due at now. */
int  modal_token_refresh_due(const modal_token *t, double now);
/* Keep a fresh JWT (n bytes) fetched at now: it expires at its `exp`
** claim (20 minutes when unreadable) and is refreshed at half its life,
** with up to 10% jitter. Returns 0, or -1 out of memory. */
int  modal_token_store(modal_token *t, const char *jwt, size_t n, double now);
/* A fetch failed at now: back off background refreshes (0.5 s doubling to
** 60 s). */
void modal_token_failed(modal_token *t, double now);
/* Forget the token if it is still `jwt` (the server refused it). */
void modal_token_invalidate(modal_token *t, const char *jwt);
/* Seconds until the JWT's `exp` claim from now (wall clock); < 0 when it has
** no readable exp. */
double modal_token_ttl(const char *jwt);

#endif
