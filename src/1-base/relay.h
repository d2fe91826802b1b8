/*
** relay.h: two connected stream sockets joined on the loop, bytes copied
** both ways until each side has finished (relay.c, prefix lash_relay_).
** A published port is made of these: the host's connection on one side,
** the sandbox's on the other. An end of file on one side is passed on as
** a half close (shutdown SHUT_WR) so request-then-close clients still get
** their answer; an error on either side ends both. Memory per relay is
** fixed (a buffer each way). No Lua.
*/
#ifndef lash_relay_h
#define lash_relay_h

#include <stddef.h>
#include <stdint.h>

#include "loop.h"

typedef struct lash_relay lash_relay;

/* The relays of one owner (a published port): closed together. */
typedef struct lash_relay_set {
  lash_relay *head;
  size_t n;                  /* running */
  uint64_t started, bytes;   /* relays started, bytes copied (both ways) */
} lash_relay_set;

void lash_relay_set_init(lash_relay_set *set);
/* Join a and b (connected, any blocking mode: made non-blocking). Takes
** both fds, also on failure (closed then). Returns 0 or -errno. */
int  lash_relay_add(lash_relay_set *set, lash_loop *loop, int a, int b);
/* End every relay of the set now (fds closed). Idempotent. */
void lash_relay_close_all(lash_relay_set *set, lash_loop *loop);

#endif
