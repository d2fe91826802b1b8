/*
** sandbox_port.h: a TCP connection to a port inside a local sandbox, in
** whichever of its running jails' network namespaces listens on it
** (sandbox_port.c, prefix lsb_port_). No Lua. Internal to the local backend.
*/
#ifndef lash_sandbox_port_h
#define lash_sandbox_port_h

#include <stddef.h>

/* Connect to 127.0.0.1:port (or [::1]:port) inside the sandbox whose
** directory is box_dirfd. Blocking, bounded: a fork per namespace tried,
** a loopback connect each. Returns a connected, non-blocking,
** close-on-exec socket, or -errno with the reason in msg: -ESRCH nothing
** runs in the sandbox, -ECONNREFUSED nothing listens there. */
int lsb_port_connect(int box_dirfd, int port, char *msg, size_t msgsz);

#endif
