/*
** modal_token.c: the cache of Modal's auth token (see modal_token.h;
** prefix modal_token_): AuthTokenGet's JWT kept until its `exp`, refreshed
** from half its life, with a backoff after failed fetches. The fetch and
** the callers queued on it are modal_rpc.c's.
*/
#include "modal_token.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base64.h"
#include "grpc.h"
#include "loop.h"

#define TOKEN_DEFAULT_TTL (20 * 60.0)
#define TOKEN_MARGIN 5.0             /* seconds before expiry it is no longer sent */
#define BACKOFF_FIRST 0.5
#define BACKOFF_MAX 60.0

void modal_token_init(modal_token *t) {
  memset(t, 0, sizeof *t);
  t->backoff = BACKOFF_FIRST;
}

void modal_token_free(modal_token *t) {
  if (t->jwt) {
    memset(t->jwt, 0, strlen(t->jwt));
    free(t->jwt);
    t->jwt = NULL;
  }
}

const char *modal_token_valid(const modal_token *t, double now) {
  return t->jwt && now < t->expires - TOKEN_MARGIN ? t->jwt : NULL;
}

int modal_token_refresh_due(const modal_token *t, double now) {
  return modal_token_valid(t, now) && now >= t->refresh_at &&
         now >= t->backoff_until;
}

int modal_token_store(modal_token *t, const char *jwt, size_t n, double now) {
  char *j = malloc(n + 1);
  double ttl;
  unsigned char r = 0;
  if (!j) return -1;
  memcpy(j, jwt, n);
  j[n] = 0;
  modal_token_free(t);
  t->jwt = j;
  ttl = modal_token_ttl(j);
  if (!(ttl > 0)) ttl = TOKEN_DEFAULT_TTL;
  t->expires = now + ttl;
  /* refresh at half the life, with up to 10% jitter, so the clients of
  ** one account do not all refresh at once */
  (void)getrandom(&r, 1, GRND_NONBLOCK);
  t->refresh_at = now + ttl * (0.5 - 0.1 * (r / 255.0));
  t->backoff = BACKOFF_FIRST;
  t->backoff_until = 0;
  return 0;
}

void modal_token_failed(modal_token *t, double now) {
  t->backoff_until = now + t->backoff;
  t->backoff = t->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : t->backoff * 2;
}

void modal_token_invalidate(modal_token *t, const char *jwt) {
  if (t->jwt && jwt && !strcmp(t->jwt, jwt)) modal_token_free(t);
}

double modal_token_ttl(const char *jwt) {
  const char *a = strchr(jwt, '.');
  if (!a) return -1;
  const char *b = strchr(a + 1, '.');
  if (!b || b - a - 1 > 8192) return -1;
  uint8_t payload[8192 * 3 / 4 + 4];  /* the decoded bound, and a NUL */
  long n = lash_base64_decode(a + 1, (size_t)(b - a - 1), payload, sizeof payload - 1, 0);
  if (n < 0) return -1;
  payload[n] = 0;
  const char *k = strstr((const char *)payload, "\"exp\"");
  if (!k) return -1;
  k += 5;
  while (*k == ' ' || *k == '\t') k++;
  if (*k != ':') return -1;
  char *end;
  double exp = strtod(k + 1, &end);
  if (end == k + 1 || !isfinite(exp)) return -1;
  return exp - lash_wall_now();
}
