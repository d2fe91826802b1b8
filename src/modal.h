/*
** modal.h: internal API shared by lash's Modal files.
**   modal_auth.c   configuration (environment, ~/.modal.toml profiles) and
**                  the auth-token JWT (AuthTokenGet), cached and refreshed
**   modal_rpc.c    the client: channels, Modal's call metadata, unary calls
**                  with retries/backoff/idempotency keys and server-directed
**                  delays, router calls with access refresh, streams
**   sandbox_modal.c the sandbox backend (sandbox.h) on top of them
** Everything is asynchronous on lash's loop: a call is a struct its owner
** embeds; completion is a callback from the loop, never from inside the
** start function. Secrets (token secret, JWTs) never enter messages.
*/
#ifndef lash_modal_h
#define lash_modal_h

#include <stddef.h>
#include <stdint.h>

#include "grpc.h"
#include "loop.h"
#include "modal_msgs.h"
#include "pb.h"

#define MODAL_DEFAULT_SERVER "https://api.modal.com"
#define MODAL_AUTH_MESSAGE \
  "Modal rejected the credentials. Set MODAL_TOKEN_ID / MODAL_TOKEN_SECRET or run `modal token new`."

/* ---- configuration (modal_auth.c) ---------------------------------------- */

typedef struct modal_config {
  char *token_id, *token_secret;   /* secrets: never printed */
  char *server_url;                /* no trailing slash */
  char *environment;               /* "" = the default environment */
  char *image_builder_version;     /* NULL: ask EnvironmentGetOrCreate */
  char *ca_file;                   /* extra CA bundle (lash option) */
  int sandbox_v2;                  /* create V2 sandboxes (default 1) */
  double max_throttle_wait;        /* total server-directed delay; <0 unlimited */
  char source[1280];               /* where the settings came from */
} modal_config;

/* Explicit settings (lash config options); NULL / -1 = not given. They win
** over the environment, which wins over the config file. */
typedef struct modal_config_in {
  const char *server_url, *environment, *profile, *config_path, *ca_file;
  int sandbox_v2;
} modal_config_in;

enum { MODAL_CONFIG_OK = 0, MODAL_CONFIG_BAD = -1, MODAL_CONFIG_NO_CREDENTIALS = -2 };

/* Load settings. Returns MODAL_CONFIG_OK, or an error with err set (a
** malformed file, or no credentials anywhere). */
int  modal_config_load(modal_config *c, const modal_config_in *in, char *err,
                       size_t errlen);
void modal_config_free(modal_config *c);
/* Parse the TOML subset Modal's config uses, for one profile (NULL: the
** `active` one, else none). Exposed for tests. Fills only the keys found. */
int  modal_config_parse_toml(modal_config *c, const char *text, size_t n,
                             const char *profile, char *chosen, size_t chosen_len,
                             char *err, size_t errlen);
/* Seconds until the JWT's `exp` claim from now (wall clock); < 0 when it has
** no readable exp. */
double modal_jwt_ttl(const char *jwt);
/* A random UUIDv4 string (37 bytes with NUL). */
void modal_uuid4(char out[37]);
int  modal_is_localhost(const char *url);

/* ---- the client and its calls (modal_rpc.c) ----------------------------- */

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
  modal_rpc *next_waiter;       /* waiting for the auth token / router access */
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
int  modal_code_transient(int code);

/* Server-streaming call (no retries; the caller resumes by cursor). The
** same metadata as a unary call of the same flags. For router streams the
** caller must have router access (modal_rpc_start of a router unary call
** refreshes it; a stream failing UNAUTHENTICATED should be retried after
** one). Returns the call or NULL with err. */
grpc_call *modal_stream_start(modal_client *cl, const char *method,
                              unsigned flags, modal_sbx *sbx,
                              const pb_msgdesc *req_desc, const void *req,
                              double timeout, grpc_msg_cb on_msg,
                              grpc_done_cb on_done, void *ud, char *err,
                              size_t errlen);

/* ---- the auth token (modal_auth.c), used by modal_rpc.c ------------------- */

typedef struct modal_token {
  char *jwt;                    /* secret */
  double expires;               /* lash_now seconds */
  double refresh_at;
  modal_rpc fetch;              /* the in-flight AuthTokenGet */
  int fetching;
  modal_rpc *waiters;
  double backoff_until, backoff;
} modal_token;

void modal_token_init(modal_token *t);
void modal_token_free(modal_token *t);
/* The current token if usable now (and kick a background refresh when due),
** else NULL: then r is queued and resumed by modal_rpc_resume when a token
** arrives or fails. */
const char *modal_token_get(modal_client *cl, modal_token *t, modal_rpc *r);
/* Forget the token if it is still `jwt` (the server refused it). */
void modal_token_invalidate(modal_token *t, const char *jwt);
/* Called by the token code when r may proceed (token ready or failed:
** code/message set on failure). */
void modal_rpc_resume(modal_rpc *r, int code, const char *message);
/* For modal_auth.c: the client's token and its AuthTokenGet plumbing. */
modal_token *modal_client_token(modal_client *cl);

double modal_now(void);         /* lash_now_ns in seconds */

#endif
