/*
** sandbox_seccomp.c: the seccomp filter bubblewrap installs for the jail's
** supervisor and, through it, every command (`--seccomp FD`, read once
** when the jail is built). It refuses the system calls of
** sandbox_seccomp_list.h with ENOSYS and allows everything else: the
** jail's namespaces, dropped capabilities and rlimits are the confinement;
** this takes away kernel surfaces a command never needs and that namespaces
** do not cover (the keyring, io_uring, perf, bpf, userfaultfd, modules,
** kexec, the clock). Written as classic BPF here rather than with
** libseccomp: the program is a short list of comparisons, and a static
** library for embedding stays free of another shared dependency.
**
** The program checks the ABI first: the native one (on x86-64 the x32 bit
** is cleared, so x32's numbers of the same calls match), i386 on x86-64
** with its own numbers, and any other ABI is refused outright.
*/
#include "sandbox_seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#define NATIVE_ARCH AUDIT_ARCH_RISCV64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define NATIVE_ARCH AUDIT_ARCH_S390X
#else
#error "sandbox_seccomp.c: add this architecture's AUDIT_ARCH_*"
#endif

#define LSB_SC(name) __NR_##name,
static const int native[] = {
#include "sandbox_seccomp_list.h"
};
#undef LSB_SC

#define NATIVE_N ((int)(sizeof native / sizeof native[0]))
#define PROG_MAX (16 + 2 * (NATIVE_N + 64))
#define REFUSE (SECCOMP_RET_ERRNO | (LSB_SECCOMP_ERRNO & SECCOMP_RET_DATA))

typedef struct prog {
  struct sock_filter f[PROG_MAX];
  int n;
} prog;

static int emit(prog *p, unsigned short code, unsigned char jt, unsigned char jf,
                unsigned int k) {
  struct sock_filter s = BPF_JUMP(code, k, jt, jf);
  p->f[p->n] = s;
  return p->n++;
}

/* load the number, compare with each of nrs (a match jumps to the refusal,
** fixed up later in *at), allow the rest */
static void table(prog *p, const int *nrs, int count, int clear_x32, int *at, int *nat) {
  int i;
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
#ifdef X32_BIT
  if (clear_x32) emit(p, BPF_ALU | BPF_AND | BPF_K, 0, 0, ~X32_BIT);
#else
  (void)clear_x32;
#endif
  for (i = 0; i < count; i++) at[(*nat)++] = emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0,
                                                  (unsigned)nrs[i]);
  emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
}

static int build(prog *p) {
  int at[PROG_MAX], nat = 0, i, to_native, refuse;
#if defined(__x86_64__)
  int to_i386;
#endif
  p->n = 0;
  emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
  to_native = emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, NATIVE_ARCH);
#if defined(__x86_64__)
  to_i386 = emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, AUDIT_ARCH_I386);
#endif
  emit(p, BPF_RET | BPF_K, 0, 0, REFUSE);            /* any other ABI */
  p->f[to_native].jt = (unsigned char)(p->n - to_native - 1);
  table(p, native, NATIVE_N, 1, at, &nat);
#if defined(__x86_64__)
  p->f[to_i386].jt = (unsigned char)(p->n - to_i386 - 1);
  table(p, lsb_seccomp_i386, lsb_seccomp_i386_n, 0, at, &nat);
#endif
  refuse = emit(p, BPF_RET | BPF_K, 0, 0, REFUSE);
  for (i = 0; i < nat; i++) {
    if (refuse - at[i] - 1 > 255) return -E2BIG;
    p->f[at[i]].jt = (unsigned char)(refuse - at[i] - 1);
  }
  return 0;
}

int lsb_seccomp_memfd(void) {
  prog p;
  int fd, rc;
  size_t len, off = 0;
  if ((rc = build(&p)) != 0) return rc;
  fd = memfd_create("lash-seccomp", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  len = (size_t)p.n * sizeof p.f[0];
  while (off < len) {
    ssize_t w = write(fd, (const char *)p.f + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rc = w < 0 ? -errno : -EIO;
      close(fd);
      return rc;
    }
    off += (size_t)w;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    rc = -errno;
    close(fd);
    return rc;
  }
  return fd;
}
