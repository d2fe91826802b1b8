/*
** sse.h: a Server-Sent Events parser (WHATWG HTML, "Parsing an event
** stream"), fed chunks of any size; complete events go to a callback. Pure
** C, no Lua (prefix lash_sse_); lsse.c is the Lua binding
** (lash.http.sse_parser, declared in lsse.h).
**
** What it implements: one leading UTF-8 BOM is skipped (also when split
** across chunks); lines end with CRLF, LF or CR (a CR ending one chunk and
** an LF starting the next are one line end); a line starting with ":" is a
** comment; "field: value" drops one space after the colon, a line without a
** colon is a field with an empty value; fields event, data (lines joined
** with "\n"), id (ignored if it contains NUL; it persists across events),
** retry (ASCII digits only, else ignored); a blank line dispatches the event
** unless its data is empty; an unfinished event at the end of the stream is
** never dispatched. Field values are passed as bytes (lsse.c repairs them
** to valid UTF-8, as the spec's decoding would).
**
** Bounded: a line longer than max_line bytes, or an event whose data grows
** over max_event bytes, fails the parser (LASH_SSE_ELINE / _EEVENT) rather
** than buffering without end.
*/
#ifndef lash_sse_h
#define lash_sse_h

#include <stddef.h>
#include <stdint.h>

#define LASH_SSE_DEFAULT_MAX_LINE  ((size_t)8 << 20)
#define LASH_SSE_DEFAULT_MAX_EVENT ((size_t)8 << 20)

enum {
  LASH_SSE_OK = 0,
  LASH_SSE_ELINE = -1,    /* a line over max_line */
  LASH_SSE_EEVENT = -2,   /* event data over max_event */
  LASH_SSE_ENOMEM = -3,   /* out of memory */
  LASH_SSE_ECLOSED = -4   /* fed after lash_sse_free */
};

typedef struct lash_sse_event {
  const char *type;  size_t type_len;  /* "message" unless an event field set it */
  const char *data;  size_t data_len;  /* data lines joined by "\n" */
  const char *id;    size_t id_len;    /* the last event ID ("" when none) */
  int64_t retry;     /* a valid retry field seen in this event, else -1 */
} lash_sse_event;

/* Called for each dispatched event; the pointers are valid during the call
** only. Return 0 to go on; any other value stops the feed, which returns it,
** and fails the parser (the rest of that chunk is not parsed). */
typedef int (*lash_sse_callback)(void *ud, const lash_sse_event *ev);

typedef struct lash_sse_buf { char *p; size_t len, cap; } lash_sse_buf;

/* Treat the fields as private. */
typedef struct lash_sse {
  lash_sse_buf line;     /* an unfinished line carried over from a chunk */
  lash_sse_buf data;     /* the data buffer of the event being built */
  lash_sse_buf type;     /* its event type buffer */
  lash_sse_buf id;       /* the last event ID buffer */
  int64_t retry;         /* the stream's reconnection time (ms), -1 unset */
  int64_t event_retry;   /* a retry field within the current event, -1 */
  size_t max_line, max_event;
  int bom;               /* BOM bytes matched so far; 3 once past the start */
  int after_cr;          /* the last chunk ended with CR: skip one LF */
  int error;             /* non-zero once failed: every feed returns it */
  lash_sse_callback cb;
  void *ud;
} lash_sse;

/* Start a parser with the default limits (8 MiB each). Allocates nothing. */
void lash_sse_init(lash_sse *p, lash_sse_callback cb, void *ud);
/* Change the limits (bytes; 0 keeps the current one). */
void lash_sse_set_limits(lash_sse *p, size_t max_line, size_t max_event);
/* Parse n bytes. Returns LASH_SSE_OK, a LASH_SSE_E* code, or the callback's
** non-zero value. After a failure the parser stays failed. */
int lash_sse_feed(lash_sse *p, const void *chunk, size_t n);
/* The reconnection time the stream asked for (ms), or -1. */
int64_t lash_sse_retry(const lash_sse *p);
/* The last event ID ("" until an id field sets one). */
const char *lash_sse_last_id(const lash_sse *p, size_t *len);
/* A message for a LASH_SSE_E* code. */
const char *lash_sse_strerror(int code);
/* Free the buffers. Idempotent; a freed parser fails every feed with
** LASH_SSE_ECLOSED. */
void lash_sse_free(lash_sse *p);

#endif
