/*
** grpc.h: a gRPC client over libcurl's HTTP/2, driven by lash's loop
** (internal API; prefix grpc_, constants GRPC_). Generic gRPC only: it
** knows no service, so a server's own error details (Modal's
** RPCRetryPolicy) are handed to the caller undecoded. Unary and server-streaming calls; every call of every
** channel goes through the loop's one multi handle, so calls to one host
** multiplex on one connection (CURLPIPE_MULTIPLEX + CURLOPT_PIPEWAIT).
** http:// targets use h2c with prior knowledge, https:// uses TLS (ALPN h2).
**
** A call is a callback state machine: response messages are handed to
** on_msg as they are reassembled from the 5-byte framing; on_done gets the
** final status (grpc-status / grpc-message from the trailers, or from a
** trailers-only response, or a status derived from the HTTP or transport
** failure) with the details of grpc-status-details-bin (google.rpc.Status:
** its google.rpc.RetryInfo read as a retry hint, every detail passed on as
** type URL and bytes). After on_done
** returns the call is freed. on_done runs outside libcurl callbacks, so it
** may start new calls; on_msg runs inside one, so it must only consume the
** message (it may ask to stop by returning non-zero).
*/
#ifndef lash_grpc_h
#define lash_grpc_h

#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "pb.h"

enum {
  GRPC_OK = 0, GRPC_CANCELLED = 1, GRPC_UNKNOWN = 2, GRPC_INVALID_ARGUMENT = 3,
  GRPC_DEADLINE_EXCEEDED = 4, GRPC_NOT_FOUND = 5, GRPC_ALREADY_EXISTS = 6,
  GRPC_PERMISSION_DENIED = 7, GRPC_RESOURCE_EXHAUSTED = 8,
  GRPC_FAILED_PRECONDITION = 9, GRPC_ABORTED = 10, GRPC_OUT_OF_RANGE = 11,
  GRPC_UNIMPLEMENTED = 12, GRPC_INTERNAL = 13, GRPC_UNAVAILABLE = 14,
  GRPC_DATA_LOSS = 15, GRPC_UNAUTHENTICATED = 16,
  /* not a gRPC status: the peer's TLS certificate could not be verified
  ** (or the CA file could not be used). A configuration problem, never
  ** retried. */
  GRPC_LOCAL_TLS = 100
};

/* "UNAVAILABLE" etc.; "CODE_<n>" style text for unknown codes is not
** returned: anything out of range is "UNKNOWN". */
const char *grpc_code_name(int code);

typedef struct grpc_channel grpc_channel;
typedef struct grpc_call grpc_call;

typedef struct grpc_channel_opts {
  int plaintext;          /* h2c even for an https:// URL (a loopback fake) */
  int insecure;           /* TLS without certificate verification */
  const char *ca_file;    /* extra CA bundle, or NULL */
  double connect_timeout; /* seconds; 0 means 10 */
  size_t max_recv;        /* largest accepted message; 0 means 100 MiB */
} grpc_channel_opts;

/* url: "http[s]://host[:port]" (no path). Returns NULL with err set. */
grpc_channel *grpc_channel_new(lash_loop *loop, const char *url,
                               const grpc_channel_opts *opts, char *err,
                               size_t errlen);
/* Cancels the calls still running (without calling them back) and frees. */
void grpc_channel_free(grpc_channel *ch);
/* New connections the calls of this channel had to open (libcurl's
** CURLINFO_NUM_CONNECTS summed over finished calls). */
long grpc_channel_connects(const grpc_channel *ch);
const char *grpc_channel_url(const grpc_channel *ch);

/* google.protobuf.Any: one detail of a rich error status. */
typedef struct grpc_any { pb_str type_url, value; } grpc_any;

/* google.rpc.Status, the message grpc-status-details-bin carries. */
typedef struct grpc_details {
  int32_t code;
  pb_str message;
  grpc_any *details; size_t details_n;
} grpc_details;

typedef struct grpc_status {
  int code;
  const char *message;    /* never NULL; valid during on_done only */
  double retry_after;     /* google.rpc.RetryInfo's delay in seconds, < 0 if none */
  int transport;          /* 1: no grpc-status, derived from HTTP/transport */
  long http_status;       /* 0 when no response arrived */
  unsigned nmsgs;         /* messages delivered */
  const grpc_any *details;  /* grpc-status-details-bin's details, in order; */
  size_t ndetails;          /* valid during on_done only */
} grpc_status;

/* Return non-zero to stop the call (it then ends with CANCELLED). */
typedef int (*grpc_msg_cb)(void *ud, const uint8_t *msg, size_t n);
typedef void (*grpc_done_cb)(void *ud, const grpc_status *st);

typedef struct grpc_call_opts {
  const char *const *headers; /* "name: value" strings, NULL-terminated */
  double timeout;             /* deadline in seconds from now; 0: none */
} grpc_call_opts;

/* Start a call of `path` ("/pkg.Service/Method") with one request message
** (already protobuf-encoded; the framing is added here). Returns NULL with
** err set when the call cannot start (nothing is called back then). */
grpc_call *grpc_call_start(grpc_channel *ch, const char *path,
                           const uint8_t *req, size_t n,
                           const grpc_call_opts *opts, grpc_msg_cb on_msg,
                           grpc_done_cb on_done, void *ud, char *err,
                           size_t errlen);
/* Stop a call without calling on_done. Safe from inside its own on_msg. */
void grpc_call_cancel(grpc_call *c);

/* ---- pure parts (exposed for tests and fuzzing) ------------------------ */

/* Reassembles length-prefixed messages from arbitrary chunks. */
typedef struct grpc_reader {
  pb_buf buf;
  size_t off;             /* consumed bytes at the front of buf */
  size_t max;             /* largest accepted message */
  unsigned nmsgs;
} grpc_reader;

void grpc_reader_init(grpc_reader *r, size_t max);
void grpc_reader_free(grpc_reader *r);
/* Feed bytes; calls cb per complete message. Returns 0, 1 when cb asked to
** stop, or -code (a grpc code) with err set for malformed framing. */
int grpc_reader_feed(grpc_reader *r, const uint8_t *p, size_t n,
                     grpc_msg_cb cb, void *ud, char *err, size_t errlen);
/* Bytes of an incomplete message still buffered. */
size_t grpc_reader_pending(const grpc_reader *r);

/* Parse grpc-status-details-bin (base64 of google.rpc.Status) into *out,
** allocating from a. Returns 0, or -1 on malformed or oversized input. */
int grpc_parse_details(const char *b64, size_t n, pb_arena *a,
                       grpc_details *out);
/* 1 if d's type URL names the message type `type` (the part after its
** last '/', e.g. "google.rpc.RetryInfo"). */
int grpc_any_is(const grpc_any *d, const char *type);
/* If d is a google.rpc.RetryInfo with a sane delay (0 to a year), set
** *secs and return 0; else -1. */
int grpc_retry_info(const grpc_any *d, double *secs);

/* Decode a percent-encoded grpc-message into out (NUL-terminated). */
void grpc_percent_decode(const char *in, size_t n, char *out, size_t outlen);

#endif
