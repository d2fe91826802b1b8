/*
** sandbox_view.h: a local sandbox's filesystem view, no Lua: which host
** directory backs which path, path resolution as the jail would do it, and
** the file operations run in a helper child that holds the jail's
** credentials (sandbox_view.c).
*/
#ifndef lash_sandbox_view_h
#define lash_sandbox_view_h

#include <stdint.h>
#include <sys/types.h>

#include "sandbox_state.h"

/* ---- the view ------------------------------------------------------- */

enum { LSB_MNT_RW, LSB_MNT_RO, LSB_MNT_DENY };

/* How the jail materializes a mount (the view only cares about kind). */
enum {
  LSB_HOW_ROOTFS,    /* the rootfs: its top-level entries bound read-only */
  LSB_HOW_BIND,      /* a read-write bind of host */
  LSB_HOW_PROC,      /* a fresh /proc */
  LSB_HOW_DEV,       /* a private /dev */
  LSB_HOW_NONE,      /* part of the rootfs, only hidden from file ops */
  LSB_HOW_TMPFS,     /* a masked directory: an empty tmpfs */
  LSB_HOW_DEVNULL    /* a masked file: /dev/null bound over it */
};

#define LSB_MAX_MOUNTS 64

typedef struct lsb_mount {
  char view[LSB_PATH_MAX];   /* where it appears in the sandbox */
  char host[LSB_PATH_MAX];   /* what backs it ("" for DENY) */
  int kind;                  /* LSB_MNT_* */
  int how;                   /* LSB_HOW_* */
  int fd;                    /* O_PATH of host, -1 until lsb_view_open */
} lsb_mount;

typedef struct lsb_view {
  lsb_mount m[LSB_MAX_MOUNTS];
  int n;
} lsb_view;

typedef struct lsb_layout {
  const char *box;          /* <root>/<id> */
  const char *rootfs;       /* "/" for the host's root */
  const char *workdir;      /* normalized, absolute */
  const char *state_root;   /* masked when visible */
  int isolation_none;       /* view = the workspace only */
} lsb_layout;

/* Build the view of a sandbox: the workspace at workdir and the sandbox's
** /tmp (read-write), the rootfs (read-only), /proc, /dev and /sys (denied
** to file operations), and the masks over host secrets when rootfs is the
** host's root. The same list drives the bwrap command line. Returns 0 or
** -errno. */
int lsb_view_build(lsb_view *v, const lsb_layout *lay);
/* The mount a view path falls in (longest prefix), or NULL. */
lsb_mount *lsb_view_lookup(lsb_view *v, const char *path);
/* Open the O_PATH fds of every backed mount. Returns 0 or -errno. */
int  lsb_view_open(lsb_view *v);
void lsb_view_close(lsb_view *v);

/* Result codes of file operations (positive; 0 is success). */
enum {
  LSB_OK = 0,
  LSB_E_NOTFOUND = 1,
  LSB_E_DENIED,        /* masked, /proc, /dev, /sys, or permission */
  LSB_E_READONLY,      /* a write outside the writable mounts */
  LSB_E_NOTDIR,
  LSB_E_ISDIR,
  LSB_E_TOOLARGE,      /* a = size seen, b = the limit */
  LSB_E_NOTREG,        /* a FIFO, device or socket */
  LSB_E_LOOP,          /* too many symlinks, or a path that changed */
  LSB_E_IO,            /* err = errno */
  LSB_E_EXISTS,        /* a non-directory where a directory is needed */
  LSB_E_NAMETOOLONG
};

/* One resolved path. */
typedef struct lsb_res {
  lsb_mount *mount;
  char rel[LSB_PATH_MAX];    /* relative to mount->fd ("." for its root) */
  char view[LSB_PATH_MAX];   /* the resolved path as the sandbox sees it */
  int synthetic;             /* a directory the jail creates on the way to
                             ** a mount (e.g. /home/u for /home/u/proj);
                             ** mount may then be NULL or a mask */
  int missing;               /* components from `missing_at` on do not exist */
  size_t missing_at;         /* offset in view of the first missing one */
} lsb_res;

/* Resolve a normalized absolute view path the way the kernel would inside
** the jail: symlinks are followed through the view (an absolute target
** restarts at the sandbox's "/", never the host's), at most 40 of them.
** follow_last: follow a symlink in the final component. allow_missing:
** trailing components may be missing (res->missing is set). Returns
** LSB_OK or an LSB_E_* code (with *err set to an errno). Uses no heap:
** safe in a forked child. */
int lsb_resolve(lsb_view *v, const char *path, int follow_last,
                int allow_missing, lsb_res *res, int *err);

/* ---- file operations in a helper child ------------------------------ */

enum { LSB_OP_STAT = 1, LSB_OP_READ, LSB_OP_WRITE, LSB_OP_LIST };

/* The reply header the helper writes to its pipe, then op-specific bytes:
**   STAT: a = size, b = mtime seconds; kind and mode set; no payload.
**   READ: a = bytes that follow; payload: the bytes (at most max+1).
**   WRITE: a = bytes written.
**   LIST: payload: entries, each kind byte ('f','d','l','o') + name + NUL.
** On failure status is an LSB_E_* code, err an errno, a/b per code. */
typedef struct lsb_reply {
  int32_t status;
  int32_t err;
  int64_t a, b;
  int32_t kind;     /* 'f' file, 'd' dir, 'l' symlink, 'o' other */
  int32_t mode;     /* permission bits */
} lsb_reply;

typedef struct lsb_fileop {
  int op;
  const char *path;          /* normalized absolute view path */
  const void *data;          /* WRITE */
  size_t len;                /* WRITE */
  uint64_t max_bytes;        /* READ */
  uid_t uid; gid_t gid;      /* credentials to take (when root) */
  int drop;                  /* take them */
} lsb_fileop;

/* Run in the helper child after fork: perform op on the opened view and
** write the reply to fd. Returns an exit status. No heap use. */
int lsb_fileop_child(lsb_view *v, const lsb_fileop *op, int fd);

#endif
