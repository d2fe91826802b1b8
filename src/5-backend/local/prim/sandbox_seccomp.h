/*
** sandbox_seccomp.h: the seccomp filter every jailed command runs under
** (internal; see sandbox_seccomp.c).
*/
#ifndef lash_sandbox_seccomp_h
#define lash_sandbox_seccomp_h

#include <errno.h>
#include <stddef.h>

/* The refusal's errno: ENOSYS, as for a call this kernel lacks, so that a
** program takes its fallback (io_uring -> epoll, keyutils -> files). */
#define LSB_SECCOMP_ERRNO ENOSYS

/* The filter as a classic BPF program for `bwrap --seccomp FD`: a memfd
** holding it, positioned at its start. Returns the fd or -errno. */
int lsb_seccomp_memfd(void);

#if defined(__x86_64__)
extern const int lsb_seccomp_i386[];
extern const int lsb_seccomp_i386_n;
#endif

#endif
