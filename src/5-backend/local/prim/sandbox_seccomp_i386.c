/*
** sandbox_seccomp_i386.c: the numbers of the refused calls in the i386
** ABI, which an x86-64 process can still enter (int 0x80, or a 32-bit
** program run in the jail). A file of its own: the i386 numbers come from
** <asm/unistd_32.h>, whose names clash with the native ones.
*/
#include "sandbox_seccomp.h"

#if defined(__x86_64__)
#include <asm/unistd_32.h>

#define LSB_SC(name) __NR_##name,
const int lsb_seccomp_i386[] = {
#include "sandbox_seccomp_list.h"
};
#undef LSB_SC
const int lsb_seccomp_i386_n = (int)(sizeof lsb_seccomp_i386 / sizeof lsb_seccomp_i386[0]);
#endif
