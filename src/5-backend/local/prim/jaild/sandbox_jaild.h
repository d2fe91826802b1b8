/*
** sandbox_jaild.h: the wire protocol between lash (sandbox_super.c) and the
** supervisor that runs inside a local sandbox's jail (src/5-backend/local/prim/jaild/jaild.c).
**
** One SOCK_SEQPACKET socketpair per jail; every message is one lsb_jd_msg.
** lash -> supervisor:
**   EXEC   id, argc, envc, len; SCM_RIGHTS: a memfd holding len bytes
**          (cwd, argv[0..argc), env[0..envc), each NUL-terminated), the
**          write ends of the stdout and stderr pipes and, when has_stdin,
**          the read end of the stdin pipe.
**   EXEC_INLINE  the same with the len bytes (at most LSB_JD_INLINE_MAX)
**          in the message right after the header instead of a memfd:
**          SCM_RIGHTS are the stdout and stderr write ends and, when
**          has_stdin, the stdin read end (what most commands are: no
**          memfd to make, fill and read per command).
**   KILL   id: SIGKILL the command's session and what it left behind.
** supervisor -> lash:
**   HELLO  once, when the jail is set up and the supervisor listens.
**   STARTED id, status 0 (running) or an errno with stage LSB_JD_STAGE_*.
**   EXITED id, status: the raw wait status of the command.
** lash treats every message from the jail as hostile: unknown ids and
** malformed messages are ignored, never trusted for memory or fds.
*/
#ifndef lash_sandbox_jaild_h
#define lash_sandbox_jaild_h

#include <stdint.h>

#define LSB_JD_MAGIC 0x6c6a6431u          /* "ljd1" */
#define LSB_JD_CTL_FD 6                   /* where the jail finds the socket */
#define LSB_JD_EXE_FD 7                   /* the supervisor's own executable */
#define LSB_JD_PAYLOAD_MAX (64u << 20)    /* argv + env + cwd, bytes */
#define LSB_JD_INLINE_MAX (32u << 10)     /* ... in an EXEC_INLINE */

enum {
  LSB_JD_HELLO = 1,
  LSB_JD_EXEC,
  LSB_JD_KILL,
  LSB_JD_STARTED,
  LSB_JD_EXITED,
  LSB_JD_EXEC_INLINE
};

/* Where a command failed to start (STARTED with a non-zero status). */
enum {
  LSB_JD_STAGE_EXEC = 0,    /* execvpe: not found, not executable */
  LSB_JD_STAGE_CHDIR,       /* the cwd does not exist in the jail */
  LSB_JD_STAGE_FORK,        /* the process limit, most likely */
  LSB_JD_STAGE_REQUEST      /* a malformed request (a bug in lash) */
};

typedef struct lsb_jd_msg {
  uint32_t magic;
  uint32_t type;
  uint32_t id;
  int32_t status;
  uint32_t stage;
  uint32_t argc, envc;
  uint32_t has_stdin;
  uint64_t len;
} lsb_jd_msg;

#endif
