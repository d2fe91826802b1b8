/*
** try_syscalls.c: a helper of test_seccomp.sh, run inside a jail. For each
** name given it makes that system call (the native ABI; "i386:keyctl" is
** keyctl through int 0x80 on x86-64) with harmless arguments and prints
** "name errno" (0 when the call succeeded), or "name unknown" when this
** build's headers do not have it.
*/
#include <errno.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROW(n) {#n, __NR_##n}
struct row { const char *name; long nr; };
static const struct row rows[] = {
#ifdef __NR_keyctl
  ROW(keyctl),
#endif
#ifdef __NR_add_key
  ROW(add_key),
#endif
#ifdef __NR_request_key
  ROW(request_key),
#endif
#ifdef __NR_io_uring_setup
  ROW(io_uring_setup), ROW(io_uring_enter), ROW(io_uring_register),
#endif
  ROW(perf_event_open), ROW(bpf), ROW(userfaultfd),
  ROW(init_module), ROW(finit_module), ROW(delete_module),
  ROW(kexec_load),
#ifdef __NR_kexec_file_load
  ROW(kexec_file_load),
#endif
  ROW(clock_settime), ROW(clock_adjtime), ROW(settimeofday), ROW(adjtimex),
  ROW(open_by_handle_at), ROW(syslog), ROW(acct), ROW(swapon), ROW(swapoff),
#ifdef __NR_iopl
  ROW(iopl), ROW(ioperm),
#endif
  /* allowed: the control (getpid must work under the filter) */
  ROW(getpid),
  {NULL, 0}
};

static long call(const char *name, long nr) {
  /* the keyring calls with the arguments an attack would use: read the
  ** session keyring's id, add a key to it */
  if (strcmp(name, "keyctl") == 0)
    return syscall(nr, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
  if (strcmp(name, "add_key") == 0)
    return syscall(nr, "user", "lash-probe", "x", 1, KEY_SPEC_SESSION_KEYRING);
  if (strcmp(name, "request_key") == 0)
    return syscall(nr, "user", "lash-probe", NULL, KEY_SPEC_SESSION_KEYRING);
  if (strcmp(name, "syslog") == 0) return syscall(nr, 10, NULL, 0);  /* buffer size */
  if (strcmp(name, "iopl") == 0) return syscall(nr, 0);
  return syscall(nr, 0, 0, 0, 0, 0, 0);
}

#if defined(__x86_64__)
/* keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING) in the i386 ABI
** (its number there is 288): -errno or the id */
static long keyctl_i386(void) {
  long ret;
  __asm__ volatile("int $0x80" : "=a"(ret) : "a"(288L), "b"(0L), "c"(-3L) : "memory");
  return ret;
}
#endif

int main(int argc, char **argv) {
  int i;
  for (i = 1; i < argc; i++) {
#if defined(__x86_64__)
    if (strcmp(argv[i], "i386:keyctl") == 0) {
      long rc = keyctl_i386();
      printf("%s %ld\n", argv[i], rc < 0 && rc > -4096 ? -rc : 0);
      continue;
    }
#endif
    const struct row *r;
    long rc;
    for (r = rows; r->name && strcmp(r->name, argv[i]) != 0; r++) {}
    if (!r->name) {
      printf("%s unknown\n", argv[i]);
      continue;
    }
    errno = 0;
    rc = call(r->name, r->nr);
    printf("%s %d\n", r->name, rc < 0 ? errno : 0);
  }
  return 0;
}
