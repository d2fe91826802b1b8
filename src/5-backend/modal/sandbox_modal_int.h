/*
** sandbox_modal_int.h: the Modal backend's insides, shared by its slots
** (sandbox_modal.c) and its command engine (sandbox_modal_cmd.c), prefix
** msb_; not a public API. An operation (mop) is userdata on the calling
** thread's stack that runs a sequence of steps, each one wait: a unary
** RPC, a sleep, or a whole command (mexec).
*/
#ifndef lash_sandbox_modal_int_h
#define lash_sandbox_modal_int_h

#include "modal_rpc.h"
#include "output.h"
#include "runtime.h"
#include "sandbox.h"

#define CLIENTS_KEY "lash.modal.clients"
#define CLIENT_MT "lash.modal.client"
#define OP_MT "lash.modal.op"

#define FS_TOOLS "/__modal/.bin/modal-sandbox-fs-tools"
#define DEFAULT_IMAGE "python:3.12-slim"
#define DEFAULT_APP "lash"
#define MAX_LIFETIME 86400
#define EXEC_GRACE 30.0            /* past the command's own timeout */
#define STDIN_CHUNK (1u << 20)
#define STDIN_EOF_GRACE 2.0        /* seconds before a stdin-less command gets EOF */
#define STREAM_RETRIES 10
#define FS_TIMEOUT 120
#define TASK_ID_POLL 0.5
#define TASK_ID_WAIT 300.0         /* scheduling wait for a V1 sandbox */
#define IMAGE_BUILD_WAIT 3600.0

/* Stamped on every sandbox lash creates, so list and gc find only lash's
** (SandboxList filters on it). */
#define MADE_BY_TAG "lash_made_by"
#define MADE_BY_VALUE "lash"

typedef struct mop mop;

typedef struct mstream {
  mop *op;
  int fd;                      /* 0 stdout, 1 stderr */
  grpc_call *call;
  uint64_t offset;             /* bytes received (the resume cursor) */
  lash_ring ring;
  int done, retries, opened;
  int malformed;               /* a message that is not TaskExecStdioReadResponse */
  uint64_t cap;                /* stop reading past this many bytes (0: never) */
  int capped;
  lash_timer timer;
  modal_rpc refresh;           /* a poll that refreshes router access */
} mstream;

typedef struct mexec {
  int active;
  char exec_id[37];
  mstream out, err;
  modal_rpc start, wait, in;
  const char *stdin_data;
  size_t stdin_len, stdin_off;
  int started, stdin_done, wait_done, finished;
  int has_code, code, has_signal, sig;
  double t0;
  uint32_t timeout;
  int timed_out_local;
  lash_timer deadline;
  /* Modal's SDKs read stdout while the command runs, stderr too for a
  ** command (but only after a failed exit for a file tool, as they do),
  ** and write stdin only when there is some. A command given no stdin gets
  ** end-of-file only if it is still running after STDIN_EOF_GRACE, so a
  ** command that reads stdin cannot hang while quick ones cost no write. */
  int fs;                      /* a fs-tools command: stderr after a failure */
  int no_stdout;               /* nothing to read on stdout (WriteFile) */
  lash_timer eof_timer;
  int fatal_code;              /* grpc code of the first fatal failure */
  char fatal_where[32];
  char fatal_msg[512];
} mexec;

struct mop {
  lash_wait w;                 /* first: the cancel callback casts back */
  struct lash_outq *outq;      /* an exec's on_output (anchored in its opts), or NULL */
  modal_client *cl;
  modal_sbx *sbx;
  int step, after_prep;
  modal_rpc rpc;
  lash_timer timer;
  mexec x;
  pb_arena *arena;             /* request pieces built across steps */
  double t_start, deadline;
  int count;
  /* saved for classification */
  int saved_code;
  char saved[600];
  char what[64];
  /* create */
  const char *app_name, *image_tag, *app_id, *image_id, *ibv, *secret_id;
  int create_app;
  char last_entry[64];
  int image_done, image_status;
  char image_exc[256];
  grpc_call *stream;
  int stream_retries;
  /* list and gc */
  double before;               /* SandboxList page cursor */
  int pages, gc, idx;
  /* file operations */
  const char *path;            /* absolute (arena) */
  int64_t max_bytes;
  void *args;                  /* create: its request pieces (arena) */
};

#define SBX_METHOD(s, name) ((s)->v2 ? name "V2" : name)
#define SBX_FLAGS(s) ((s)->v2 ? MODAL_RPC_V2 : 0u)
#define SBX_CALL(L, op, s, name, ...) \
  msb_op_call(L, op, SBX_METHOD(s, name), SBX_FLAGS(s), __VA_ARGS__)

/* Steps of the router preparation (task id, access, tags) any slot may run
** first; msb_prep_step returns PREP_CONTINUE when the slot's own step is next. */
enum { PREP_TASK = 100, PREP_TASK_CHECK, PREP_ACCESS, PREP_ACCESS_CHECK,
       PREP_TAGS, PREP_TAGS_CHECK, PREP_CONTINUE = -1 };

/* lash_sandbox_raise with printf formatting. */
int msb_sb_raise(lua_State *L, const char *kind, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The client of the configuration in cfg, made once per state. */
modal_client *msb_get_client(lua_State *L, int cfg);

/* Operations: a new one on the stack (what names it in messages); memory
** that lives as long as it; wait for its RPC or timer; a sleep; one unary
** RPC (modal_rpc.c retries it) whose reply k reads. */
mop *msb_op_new(lua_State *L, int cfg, const char *what);
char *msb_op_strdup(lua_State *L, mop *op, const char *s, size_t n);
int msb_op_wait(lua_State *L, mop *op, lua_KFunction k);
int msb_op_sleep(lua_State *L, mop *op, double secs, lua_KFunction k);
int msb_op_call(lua_State *L, mop *op, const char *method, unsigned flags,
                const pb_msgdesc *reqd, const void *req,
                const pb_msgdesc *respd, double timeout, lua_KFunction k);

/* Failures: a gRPC code's lowercase name; raise the op's failure as
** sandbox.h's kind (targeted: poll the sandbox once to tell a gone one);
** the name of a Modal result status. */
void msb_lower_code(int code, char *out, size_t n);
int msb_op_fail(lua_State *L, mop *op, int targeted);
const char *msb_result_status(int status);

void msb_set_str_field(char **dst, pb_str v);
/* One step of the router preparation (PREP_*). */
int msb_prep_step(lua_State *L, mop *op, lua_KFunction k, int need_workdir);

/* Commands: start one (output into tail rings of max_out / max_err bytes;
** fs: an fs-tools command), then, when it ended, raise what failed. */
int msb_exec_begin(lua_State *L, mop *op, pb_str *argv, size_t argc,
                   pb_kv *env, size_t envn, const char *cwd,
                   const char *stdin_data, size_t stdin_len, size_t max_out,
                   size_t max_err, uint32_t timeout, int fs, int no_stdout,
                   uint64_t out_cap, lua_KFunction k);
int msb_exec_check(lua_State *L, mop *op, lua_KFunction k);
void msb_push_ring(lua_State *L, lash_ring *r);

/* Files through modal-sandbox-fs-tools: path made absolute against the
** workdir; the JSON request of cmd; run it; decode the JSON string on top
** (0 when it is not JSON); raise its failure report; a kind as stat's. */
const char *msb_abs_path(lua_State *L, mop *op, const char *path);
const char *msb_fs_command(lua_State *L, mop *op, const char *cmd,
                           const char *path);
int msb_fs_begin(lua_State *L, mop *op, const char *json,
                 const char *stdin_data, size_t stdin_len, size_t max_out,
                 lua_KFunction k);
int msb_json_decode(lua_State *L);
int msb_fs_raise(lua_State *L, mop *op, const char *action);
const char *msb_kind_of(const char *t);

/* Ports (sandbox_modal_ports.c): create's spec.publish as encrypted
** PortSpecs; the tunnels slot. */
void msb_publish_parse(lua_State *L, mop *op, int spec, modal_PortSpecs *out);
int msb_tunnels(lua_State *L);

#endif
