/*
** modal_rpc.h: lash's Modal client (modal_rpc.c; prefixes modal_client_
** for the client object, modal_rpc_ for its calls): one gRPC channel to the
** control plane and one per task-command-router URL, Modal's call metadata,
** unary calls with Modal's retry policy (backoff, idempotency keys,
** server-directed delays, a refused auth token or router JWT refreshed
** once), the auth-token fetch every V2 call queues on, and streams.
** Below it: modal_config.h (settings), modal_token.h (the token cache),
** modal_msgs.h (the messages), grpc.h (the transport); above it: the
** sandbox backend (sandbox_modal.c).
** Everything is asynchronous on lash's loop: a call is a struct its owner
** embeds; completion is a callback from the loop, never from inside the
** start function. Secrets (token secret, JWTs) never enter messages.
*/
#ifndef lash_modal_rpc_h
#define lash_modal_rpc_h

#include <stddef.h>
#include <stdint.h>

#include "grpc.h"
#include "loop.h"
#include "modal_config.h"
#include "modal_msgs.h"
#include "pb.h"

/* lash_now_ns in seconds: the clock of every deadline and backoff here. */
static inline double modal_now(void) { return (double)lash_now_ns() / 1e9; }

/* ---- the client and its calls -------------------------------------------- */

typedef struct modal_client modal_client;
typedef struct modal_rpc modal_rpc;
typedef struct modal_sbx modal_sbx;

/* What lash knows about one sandbox (cached per client, by id). */
struct modal_sbx {
  modal_sbx *next;
  char *id;
  int v2;
  char *task_id;          /* NULL until known */
  char *router_url;       /* NULL until known */
  char *router_jwt;       /* secret */
  char *workdir;          /* NULL: unknown */
  int64_t expires_at;     /* 0: unknown */
};

#define MODAL_RPC_V2       1u   /* needs x-modal-auth-token */
#define MODAL_RPC_ROUTER   2u   /* task command router of rpc->sbx */
#define MODAL_RPC_NORETRY  4u   /* one attempt */
#define MODAL_RPC_LONGPOLL 8u   /* a long-poll: retry forever until the deadline */

typedef void (*modal_rpc_cb)(modal_rpc *r);

struct modal_rpc {
  /* set by the owner before modal_rpc_start */
  modal_client *cl;
  const char *method;           /* RPC name, e.g. "SandboxCreateV2" */
  unsigned flags;
  const pb_msgdesc *resp_desc;
  modal_sbx *sbx;               /* router calls: the target sandbox */
  double timeout;               /* per attempt, seconds (0: 60) */
  double deadline;              /* absolute lash_now seconds for all
                                   attempts (0: none) */
  modal_rpc_cb done;
  void *ud;
  /* results, valid in done */
  int code;                     /* grpc code, or -1 local failure */
  int transport;                /* the failure never reached a server */
  char message[512];
  void *resp;                   /* decoded response (in arena), code == OK */
  pb_arena *arena;
  /* private */
  int state;
  pb_buf req;
  grpc_call *call;
  lash_timer timer;
  int attempt, throttles, auth_retried;
  double t0, throttle_waited;
  char idem[37];
  modal_rpc *next_waiter;       /* waiting for the auth token */
  modal_rpc *sub;               /* an access-refresh call this one waits on */
};

/* The client for a configuration (owns the config). */
modal_client *modal_client_new(lash_loop *loop, modal_config *cfg_moved);
void modal_client_free(modal_client *cl);
const modal_config *modal_client_config(const modal_client *cl);
lash_loop *modal_client_loop(modal_client *cl);
/* The cached record of a sandbox, created on first use. */
modal_sbx *modal_client_sbx(modal_client *cl, const char *id);
void modal_client_forget(modal_client *cl, const char *id);
/* Cached lookups (owned by the client, NULL if absent). */
const char *modal_client_cache_get(modal_client *cl, const char *key);
void modal_client_cache_put(modal_client *cl, const char *key, const char *val);
/* Counters for benchmarks: RPC attempts started, and connections opened by
** the control and router channels. */
unsigned long modal_client_rpcs(const modal_client *cl);
long modal_client_connects(const modal_client *cl, int router);

/* Zero r and bind it to cl (call once before the first start). */
void modal_rpc_init(modal_rpc *r, modal_client *cl);
/* Start a unary call with request msg of req_desc. Returns 0 (done will be
** called later from the loop), or -1 with r->code/message set (done is not
** called). r must stay alive until done or modal_rpc_cancel. */
int  modal_rpc_start(modal_rpc *r, const pb_msgdesc *req_desc, const void *req);
/* Stop without calling done. Idempotent. Frees the response arena. */
void modal_rpc_cancel(modal_rpc *r);
/* Free results of a finished call (the arena); r may be started again. */
void modal_rpc_clear(modal_rpc *r);
/* The server-directed delay of a failed call (seconds; < 0: none): Modal's
** RPCRetryPolicy or google.rpc.RetryInfo from the status details. */
double modal_rpc_retry_after(const grpc_status *st);
/* 1 if code is one of Modal's transient codes. */
int  modal_rpc_transient(int code);
/* A random UUIDv4 string (37 bytes with NUL): idempotency keys. */
void modal_rpc_uuid4(char out[37]);

/* Server-streaming call (no retries; the caller resumes by cursor). The
** same metadata as a unary call of the same flags. For router streams the
** caller must have router access (modal_rpc_start of a router unary call
** refreshes it; a stream failing UNAUTHENTICATED should be retried after
** one). Returns the call or NULL with err. */
grpc_call *modal_rpc_stream_start(modal_client *cl, const char *method,
                                  unsigned flags, modal_sbx *sbx,
                                  const pb_msgdesc *req_desc, const void *req,
                                  double timeout, grpc_msg_cb on_msg,
                                  grpc_done_cb on_done, void *ud, char *err,
                                  size_t errlen);

#endif
