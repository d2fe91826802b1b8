/*
** sandbox_seccomp_list.h: the system calls the jail's seccomp filter
** refuses, one line each (sandbox_seccomp.c builds the filter from it; a
** call the build's headers do not know is left out). Included once per
** ABI with that ABI's <asm/unistd*.h>, so the numbers are the ABI's own.
** LSB_SC(name) must be defined by the includer; the reasons are in
** sandbox_seccomp.c's table and docs/security.md.
*/
/* the kernel keyring: the host's session keys, and keys a command adds */
#ifdef __NR_keyctl
LSB_SC(keyctl)
#endif
#ifdef __NR_add_key
LSB_SC(add_key)
#endif
#ifdef __NR_request_key
LSB_SC(request_key)
#endif
/* io_uring: its operations are not system calls, so no filter sees them */
#ifdef __NR_io_uring_setup
LSB_SC(io_uring_setup)
#endif
#ifdef __NR_io_uring_enter
LSB_SC(io_uring_enter)
#endif
#ifdef __NR_io_uring_register
LSB_SC(io_uring_register)
#endif
/* kernel attack surface a command never needs */
#ifdef __NR_perf_event_open
LSB_SC(perf_event_open)
#endif
#ifdef __NR_bpf
LSB_SC(bpf)
#endif
#ifdef __NR_userfaultfd
LSB_SC(userfaultfd)
#endif
/* kernel modules, kexec */
#ifdef __NR_init_module
LSB_SC(init_module)
#endif
#ifdef __NR_finit_module
LSB_SC(finit_module)
#endif
#ifdef __NR_delete_module
LSB_SC(delete_module)
#endif
#ifdef __NR_kexec_load
LSB_SC(kexec_load)
#endif
#ifdef __NR_kexec_file_load
LSB_SC(kexec_file_load)
#endif
/* the host's clock */
#ifdef __NR_clock_settime
LSB_SC(clock_settime)
#endif
#ifdef __NR_clock_settime64
LSB_SC(clock_settime64)
#endif
#ifdef __NR_clock_adjtime
LSB_SC(clock_adjtime)
#endif
#ifdef __NR_clock_adjtime64
LSB_SC(clock_adjtime64)
#endif
#ifdef __NR_settimeofday
LSB_SC(settimeofday)
#endif
#ifdef __NR_adjtimex
LSB_SC(adjtimex)
#endif
#ifdef __NR_stime
LSB_SC(stime)
#endif
/* host files by handle, the kernel log, accounting, swap, I/O ports */
#ifdef __NR_open_by_handle_at
LSB_SC(open_by_handle_at)
#endif
#ifdef __NR_syslog
LSB_SC(syslog)
#endif
#ifdef __NR_acct
LSB_SC(acct)
#endif
#ifdef __NR_swapon
LSB_SC(swapon)
#endif
#ifdef __NR_swapoff
LSB_SC(swapoff)
#endif
#ifdef __NR_iopl
LSB_SC(iopl)
#endif
#ifdef __NR_ioperm
LSB_SC(ioperm)
#endif
