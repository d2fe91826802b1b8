/*
** test_grpc.c: the gRPC client (src/3-transport/grpc.c) on a bare lash loop against the
** fake Modal server (tests/modal_fake/server.py, grpcio): unary and
** server-streaming calls, statuses from trailers and trailers-only
** responses, retry hints in grpc-status-details-bin, deadlines, transport
** failures, cancellation, and many concurrent calls on one connection.
** Plus the pure parts: framing reassembly and details parsing. The
** transport only reads google.rpc.RetryInfo; Modal's RPCRetryPolicy is
** read by modal_rpc_retry_after (src/5-backend/modal/modal_rpc.c) from the details the
** transport hands over.
*/
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"
#include "loop.h"
#include "modal_rpc.h"
#include "modal_msgs.h"
#include "modal_fake.h"
#include "t.h"

#define MC "/modal.client.ModalClient/"

static const char *creds[] = { "x-modal-token-id: ak-fake-id",
                               "x-modal-token-secret: as-fake-secret", NULL };

typedef struct result {
  int done;
  grpc_status st;
  double modal_retry_after;  /* modal_rpc_retry_after in on_done */
  char message[512];
  pb_buf msgs[16];
  int nmsgs;
  int stop_after;            /* on_msg asks to stop after this many (0: never) */
  int cancel_after;          /* on_msg cancels the call after this many */
  grpc_call *call;
} result;

static int on_msg(void *ud, const uint8_t *m, size_t n) {
  result *r = ud;
  if (r->nmsgs < 16) {
    pb_buf_init(&r->msgs[r->nmsgs]);
    pb_buf_append(&r->msgs[r->nmsgs], m, n);
  }
  r->nmsgs++;
  if (r->cancel_after && r->nmsgs >= r->cancel_after) {
    grpc_call_cancel(r->call);
    r->done = 2;               /* cancelled: no on_done expected */
    return 0;
  }
  return r->stop_after && r->nmsgs >= r->stop_after;
}

static void on_done(void *ud, const grpc_status *st) {
  result *r = ud;
  r->st = *st;
  r->st.details = NULL;      /* valid during on_done only */
  r->st.ndetails = 0;
  r->modal_retry_after = modal_rpc_retry_after(st);
  snprintf(r->message, sizeof r->message, "%s", st->message);
  r->st.message = r->message;
  r->done = 1;
}

static void result_free(result *r) {
  for (int i = 0; i < r->nmsgs && i < 16; i++) pb_buf_free(&r->msgs[i]);
  memset(r, 0, sizeof *r);
}

static void run_until(lash_loop *loop, int *flag, double secs) {
  double end = lash_now_ns() / 1e9 + secs;
  while (!*flag && lash_now_ns() / 1e9 < end) lash_loop_run_once(loop, 50);
}

static int call(lash_loop *loop, grpc_channel *ch, const char *method,
                const pb_msgdesc *d, const void *req, const char *const *hdrs,
                double timeout, result *r) {
  pb_buf b;
  pb_err e;
  char err[256];
  pb_buf_init(&b);
  if (pb_encode(d, req, &b, &e) < 0) return -1;
  grpc_call_opts o = { hdrs, timeout };
  r->call = grpc_call_start(ch, method, b.p, b.n, &o, on_msg, on_done, r, err, sizeof err);
  pb_buf_free(&b);
  if (!r->call) { printf("# start failed: %s\n", err); return -1; }
  run_until(loop, &r->done, 30);
  return 0;
}

static void test_pure(void) {
  grpc_reader rd;
  char err[200];
  result r = { 0 };
  grpc_reader_init(&rd, 16);
  /* two messages, fed one byte at a time */
  const uint8_t two[] = { 0, 0, 0, 0, 2, 'h', 'i', 0, 0, 0, 0, 0 };
  int rc = 0;
  for (size_t i = 0; i < sizeof two && rc == 0; i++)
    rc = grpc_reader_feed(&rd, two + i, 1, on_msg, &r, err, sizeof err);
  T_OK(rc == 0 && r.nmsgs == 2 && r.msgs[0].n == 2 && r.msgs[1].n == 0 &&
       grpc_reader_pending(&rd) == 0, "framing reassembles messages split byte by byte");
  /* merged in one chunk, with a partial third */
  const uint8_t three[] = { 0, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 1, 'b', 0, 0 };
  rc = grpc_reader_feed(&rd, three, sizeof three, on_msg, &r, err, sizeof err);
  T_OK(rc == 0 && r.nmsgs == 4 && grpc_reader_pending(&rd) == 2,
       "merged messages split, a partial one stays pending");
  grpc_reader_free(&rd);
  grpc_reader_init(&rd, 16);
  const uint8_t big[] = { 0, 0, 0, 0, 17 };
  T_OK(grpc_reader_feed(&rd, big, 5, on_msg, &r, err, sizeof err) == -GRPC_RESOURCE_EXHAUSTED,
       "a message over the limit is refused before buffering (%s)", err);
  grpc_reader_free(&rd);
  grpc_reader_init(&rd, 16);
  const uint8_t comp[] = { 1, 0, 0, 0, 1, 'x' };
  T_OK(grpc_reader_feed(&rd, comp, 6, on_msg, &r, err, sizeof err) == -GRPC_INTERNAL,
       "a compressed message without negotiation is refused");
  grpc_reader_free(&rd);
  result_free(&r);

  double ra = -1;
  grpc_details det;
  pb_arena *da = pb_arena_new();
  /* RPCStatus{code=8, message="slow down", details=[Any{type.modal.com/modal.client.RPCRetryPolicy, {0.25}}]} */
  const char *b64 = "CAgSCXNsb3cgZG93bhozCip0eXBlLm1vZGFsLmNvbS9tb2RhbC5jbGllbnQuUlBDUmV0cnlQb2xpY3kSBQ0AAIA+";
  T_OK(grpc_parse_details(b64, strlen(b64), da, &det) == 0 && det.code == 8 &&
       det.message.n == 9 && !memcmp(det.message.p, "slow down", 9) && det.details_n == 1 &&
       grpc_any_is(&det.details[0], "modal.client.RPCRetryPolicy") &&
       !grpc_any_is(&det.details[0], "client.RPCRetryPolicy"),
       "status details: google.rpc.Status with its Any details decoded");
  T_OK(det.details_n == 1 && grpc_retry_info(&det.details[0], &ra) < 0 && ra < 0,
       "the transport reads no Modal detail as a retry hint");
  grpc_status st = { .details = det.details, .ndetails = det.details_n };
  ra = modal_rpc_retry_after(&st);
  T_OK(fabs(ra - 0.25) < 1e-6, "modal_rpc_retry_after reads RPCRetryPolicy's retry_after_secs (%g)", ra);
  T_OK(grpc_parse_details("!!!", 3, da, &det) < 0 && det.details_n == 0,
       "malformed status details are refused");
  pb_arena_free(da);
  char out[64];
  grpc_percent_decode("a%20b%zz%4", 10, out, sizeof out);
  T_OK(!strcmp(out, "a b%zz%4"), "grpc-message percent-decoding leaves bad escapes (%s)", out);
}

static void suite(int tls) {
  fake_server f;
  const char *tls_args[] = { "--tls", NULL };
  int rc = fake_start(&f, tls ? tls_args : NULL);
  if (rc != 0) {
    T_OK(1, "gRPC against the fake # SKIP %s", rc == 77 ? "python3-grpcio/protobuf or protoc missing"
                                                        : "fake server did not start");
    return;
  }
  printf("# fake server over %s\n", tls ? "TLS" : "h2c (prior knowledge)");
  lash_loop *loop = lash_loop_new();
  char url[64], err[256];
  snprintf(url, sizeof url, "%s://127.0.0.1:%d", tls ? "https" : "http", f.control);
  grpc_channel_opts copts = { .ca_file = tls ? f.ca : NULL };
  grpc_channel *ch = grpc_channel_new(loop, url, &copts, err, sizeof err);
  T_OK(ch != NULL, "channel to %s", url);

  /* unary, status from the trailers */
  result r = { 0 };
  modal_AuthTokenGetRequest atr = { 0 };
  call(loop, ch, MC "AuthTokenGet", &modal_AuthTokenGetRequest_desc, &atr, creds, 10, &r);
  modal_AuthTokenGetResponse tok = { 0 };
  pb_arena *a = pb_arena_new();
  pb_err pe;
  T_OK(r.done == 1 && r.st.code == GRPC_OK && r.nmsgs == 1 && !r.st.transport,
       "unary call: OK status read from the trailers (%s %s)", grpc_code_name(r.st.code), r.message);
  T_OK(r.nmsgs == 1 && pb_decode(&modal_AuthTokenGetResponse_desc, &tok, r.msgs[0].p,
                                 r.msgs[0].n, a, &pe) == 0 && tok.token.n > 20,
       "the response message decodes (a JWT of %zu bytes)", tok.token.n);
  result_free(&r);

  /* trailers-only error */
  const char *bad[] = { "x-modal-token-id: ak-fake-id", "x-modal-token-secret: wrong", NULL };
  call(loop, ch, MC "AuthTokenGet", &modal_AuthTokenGetRequest_desc, &atr, bad, 10, &r);
  T_OK(r.done == 1 && r.st.code == GRPC_UNAUTHENTICATED && r.nmsgs == 0 &&
       strstr(r.message, "Invalid token"), "trailers-only error: %s: %s",
       grpc_code_name(r.st.code), r.message);
  T_OK(!strstr(r.message, "wrong"), "the secret does not appear in the error");
  result_free(&r);

  /* unknown method */
  call(loop, ch, MC "NoSuchMethod", &modal_AuthTokenGetRequest_desc, &atr, creds, 10, &r);
  /* grpc-core answers an unknown method before reading the request and
  ** resets the stream; libcurl 7.88 then sometimes reports the reset
  ** instead of the trailers-only response it got first. */
  T_OK(r.st.code == GRPC_UNIMPLEMENTED ||
       (r.st.code == GRPC_UNAVAILABLE && r.st.transport),
       "unknown method is UNIMPLEMENTED, or the stream reset that follows it (%s: %s)",
       grpc_code_name(r.st.code), r.message);
  result_free(&r);

  /* set up an app and an image for the streaming call */
  modal_AppGetOrCreateRequest app = { .app_name = pb_cstr("grpc-test"), .object_creation_type = 1 };
  call(loop, ch, MC "AppGetOrCreate", &modal_AppGetOrCreateRequest_desc, &app, creds, 10, &r);
  modal_AppGetOrCreateResponse appr = { 0 };
  T_OK(r.st.code == GRPC_OK && pb_decode(&modal_AppGetOrCreateResponse_desc, &appr,
       r.msgs[0].p, r.msgs[0].n, a, &pe) == 0 && appr.app_id.n > 3, "AppGetOrCreate");
  result_free(&r);
  pb_str cmd = pb_cstr("FROM alpine:3.21");
  modal_Image img = { .dockerfile_commands = &cmd, .dockerfile_commands_n = 1 };
  modal_ImageGetOrCreateRequest ir = { .image = &img, .app_id = appr.app_id };
  call(loop, ch, MC "ImageGetOrCreate", &modal_ImageGetOrCreateRequest_desc, &ir, creds, 10, &r);
  modal_ImageGetOrCreateResponse imr = { 0 };
  T_OK(r.st.code == GRPC_OK && pb_decode(&modal_ImageGetOrCreateResponse_desc, &imr,
       r.msgs[0].p, r.msgs[0].n, a, &pe) == 0 && imr.image_id.n > 3, "ImageGetOrCreate");
  result_free(&r);

  /* server streaming */
  modal_ImageJoinStreamingRequest js = { .image_id = imr.image_id, .timeout = 55 };
  call(loop, ch, MC "ImageJoinStreaming", &modal_ImageJoinStreamingRequest_desc, &js, creds, 30, &r);
  T_OK(r.st.code == GRPC_OK && r.nmsgs >= 3, "server streaming: %d messages then OK", r.nmsgs);
  modal_ImageJoinStreamingResponse last = { 0 };
  int n = r.nmsgs < 16 ? r.nmsgs : 16;
  T_OK(n > 0 && pb_decode(&modal_ImageJoinStreamingResponse_desc, &last, r.msgs[n - 1].p,
       r.msgs[n - 1].n, a, &pe) == 0 && last.result && last.result->status == MODAL_STATUS_SUCCESS,
       "the last streamed message carries the build result");
  result_free(&r);

  /* stop a stream from on_msg: ends CANCELLED */
  r.stop_after = 1;
  call(loop, ch, MC "ImageJoinStreaming", &modal_ImageJoinStreamingRequest_desc, &js, creds, 30, &r);
  T_OK(r.done == 1 && r.st.code == GRPC_CANCELLED && r.nmsgs == 1,
       "on_msg returning non-zero stops the stream (CANCELLED)");
  result_free(&r);

  /* cancel from inside on_msg: no on_done, nothing leaks */
  r.cancel_after = 1;
  call(loop, ch, MC "ImageJoinStreaming", &modal_ImageJoinStreamingRequest_desc, &js, creds, 30, &r);
  for (int i = 0; i < 20; i++) lash_loop_run_once(loop, 20);
  T_OK(r.done == 2, "grpc_call_cancel inside on_msg ends the call without on_done");
  result_free(&r);

  /* retry hints: RPCRetryPolicy and google.rpc.RetryInfo */
  fake_faults(&f, "[{\"id\":\"r1\",\"method\":\"AppGetOrCreate\",\"kind\":\"retry_after\","
                  "\"code\":\"RESOURCE_EXHAUSTED\",\"secs\":0.25},"
                  "{\"id\":\"r2\",\"method\":\"ClientHello\",\"kind\":\"retry_after\","
                  "\"code\":\"UNAVAILABLE\",\"secs\":1.5,\"style\":\"google\"}]");
  call(loop, ch, MC "AppGetOrCreate", &modal_AppGetOrCreateRequest_desc, &app, creds, 10, &r);
  T_OK(r.st.code == GRPC_RESOURCE_EXHAUSTED && r.st.retry_after < 0 &&
       fabs(r.modal_retry_after - 0.25) < 1e-6,
       "grpc-status-details-bin RPCRetryPolicy: passed on for Modal's client, "
       "which retries after %gs", r.modal_retry_after);
  result_free(&r);
  modal_Empty empty = { 0 };
  call(loop, ch, MC "ClientHello", &modal_Empty_desc, &empty, creds, 10, &r);
  T_OK(r.st.code == GRPC_UNAVAILABLE && fabs(r.st.retry_after - 1.5) < 1e-6 &&
       fabs(r.modal_retry_after - 1.5) < 1e-6,
       "grpc-status-details-bin google.rpc.RetryInfo: retry after %gs", r.st.retry_after);
  result_free(&r);
  call(loop, ch, MC "ClientHello", &modal_Empty_desc, &empty, creds, 10, &r);
  T_OK(r.st.code == GRPC_OK && r.st.retry_after < 0 && r.modal_retry_after < 0,
       "without details there is no retry hint");
  result_free(&r);
  fake_faults(&f, "[]");

  /* a V1 sandbox to long-poll on: deadline exceeded */
  modal_Sandbox def = { .image_id = imr.image_id, .timeout_secs = 60 };
  modal_SandboxCreateRequest cr = { .app_id = appr.app_id, .definition = &def };
  call(loop, ch, MC "SandboxCreate", &modal_SandboxCreateRequest_desc, &cr, creds, 10, &r);
  modal_SandboxCreateResponse crr = { 0 };
  T_OK(r.st.code == GRPC_OK && pb_decode(&modal_SandboxCreateResponse_desc, &crr,
       r.msgs[0].p, r.msgs[0].n, a, &pe) == 0, "SandboxCreate (V1)");
  result_free(&r);
  modal_SandboxWaitRequest wr = { .sandbox_id = crr.sandbox_id, .timeout = 10 };
  /* the code is the proof: a long-poll that ran its 10 s would end OK */
  call(loop, ch, MC "SandboxWait", &modal_SandboxWaitRequest_desc, &wr, creds, 0.3, &r);
  T_OK(r.st.code == GRPC_DEADLINE_EXCEEDED,
       "a 0.3 s deadline ends a 10 s long-poll: %s (%s)",
       grpc_code_name(r.st.code), r.message);
  result_free(&r);
  modal_SandboxTerminateRequest tr = { .sandbox_id = crr.sandbox_id };
  call(loop, ch, MC "SandboxTerminate", &modal_SandboxTerminateRequest_desc, &tr, creds, 10, &r);
  T_EQ_INT(r.st.code, GRPC_OK, "SandboxTerminate");
  result_free(&r);

  /* many concurrent calls multiplex on one connection */
  long before = grpc_channel_connects(ch);
  grpc_channel *ch2 = grpc_channel_new(loop, url, &copts, err, sizeof err);
  enum { NC = 64 };
  static result many[NC];
  pb_buf b;
  pb_buf_init(&b);
  (void)pb_encode(&modal_Empty_desc, &empty, &b, &pe);
  int started = 0;
  grpc_call_opts o = { creds, 20 };
  for (int i = 0; i < NC; i++)
    if (grpc_call_start(ch2, MC "ClientHello", b.p, b.n, &o, on_msg, on_done, &many[i], err, sizeof err))
      started++;
  int alldone = 0;
  double end = lash_now_ns() / 1e9 + 30;
  while (!alldone && lash_now_ns() / 1e9 < end) {
    lash_loop_run_once(loop, 50);
    alldone = 1;
    for (int i = 0; i < NC; i++) if (!many[i].done) alldone = 0;
  }
  int ok = 0;
  for (int i = 0; i < NC; i++) { if (many[i].done && many[i].st.code == GRPC_OK) ok++; result_free(&many[i]); }
  T_OK(started == NC && ok == NC, "%d concurrent unary calls all succeed", ok);
  long opened = grpc_channel_connects(ch2) + (grpc_channel_connects(ch) - before);
  if (tls || curl_version_info(CURLVERSION_NOW)->version_num >= 0x080000)
    T_OK(opened <= 1, "they share one HTTP/2 connection (%ld new)", opened);
  else
    T_OK(opened == NC, "h2c on libcurl < 8.0: one fresh connection per call (%ld; curl #10634)", opened);
  pb_buf_free(&b);

  /* a live call when the channel is freed is cancelled without a callback */
  call(loop, ch, MC "SandboxCreate", &modal_SandboxCreateRequest_desc, &cr, creds, 10, &r);
  modal_SandboxCreateResponse cr2 = { 0 };
  T_OK(r.st.code == GRPC_OK && pb_decode(&modal_SandboxCreateResponse_desc, &cr2,
       r.msgs[0].p, r.msgs[0].n, a, &pe) == 0, "a second sandbox to long-poll on");
  result_free(&r);
  modal_SandboxWaitRequest wr2 = { .sandbox_id = cr2.sandbox_id, .timeout = 5 };
  pb_buf_init(&b);
  (void)pb_encode(&modal_SandboxWaitRequest_desc, &wr2, &b, &pe);
  grpc_call_opts o2 = { creds, 0 };
  T_OK(grpc_call_start(ch2, MC "SandboxWait", b.p, b.n, &o2, on_msg, on_done, &r, err, sizeof err) != NULL,
       "a long call starts");
  for (int i = 0; i < 5; i++) lash_loop_run_once(loop, 20);
  grpc_channel_free(ch2);
  for (int i = 0; i < 5; i++) lash_loop_run_once(loop, 20);
  T_OK(r.done == 0, "freeing the channel cancels it silently");
  result_free(&r);
  pb_buf_free(&b);
  modal_SandboxTerminateRequest tr2 = { .sandbox_id = cr2.sandbox_id };
  call(loop, ch, MC "SandboxTerminate", &modal_SandboxTerminateRequest_desc, &tr2, creds, 10, &r);
  result_free(&r);

  /* connection refused: UNAVAILABLE, transport */
  grpc_channel *dead = grpc_channel_new(loop, "http://127.0.0.1:1", NULL, err, sizeof err);
  call(loop, dead, MC "ClientHello", &modal_Empty_desc, &empty, creds, 5, &r);
  T_OK(r.st.code == GRPC_UNAVAILABLE && r.st.transport, "connection refused is UNAVAILABLE (%s)",
       r.message);
  result_free(&r);
  grpc_channel_free(dead);

  T_OK(grpc_channel_new(loop, "ftp://x", NULL, err, sizeof err) == NULL, "non-http target refused: %s", err);
  T_OK(grpc_channel_new(loop, "http://x/path", NULL, err, sizeof err) == NULL, "target with a path refused");

  if (tls) {
    /* TLS without our CA: verification fails, a configuration problem
    ** (GRPC_LOCAL_TLS, never retried), not an outage */
    grpc_channel *nov = grpc_channel_new(loop, url, NULL, err, sizeof err);
    call(loop, nov, MC "ClientHello", &modal_Empty_desc, &empty, creds, 5, &r);
    T_OK(r.st.code == GRPC_LOCAL_TLS && r.st.transport,
         "an unverifiable certificate is refused as TLS_VERIFY (%s)", r.message);
    T_OK(!strcmp(grpc_code_name(GRPC_LOCAL_TLS), "TLS_VERIFY"), "its name is TLS_VERIFY");
    result_free(&r);
    grpc_channel_free(nov);
  }

  grpc_channel_free(ch);
  pb_arena_free(a);
  while (lash_loop_alive(loop) && lash_loop_run_once(loop, 10) > 0) {}
  lash_loop_free(loop);
  fake_stop(&f);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  test_pure();
  suite(1);
  suite(0);
  curl_global_cleanup();
  return T_DONE();
}
