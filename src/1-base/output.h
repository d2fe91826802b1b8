/*
** output.h: output shaping, the exact text the model sees of command output,
** files and listings. Pure C, no Lua (the binding is loutput.c):
**   - a tail ring that keeps the last N bytes of a stream fed in chunks,
**   - line/byte truncation (head or tail) with the harness's markers,
**   - the size format used in those markers ("50.0KB"),
**   - UTF-8 validation and repair.
** The rules are those of shared/reference/harness-reference.md sections
** 4.1-4.2, with the ring cutting forward to a character boundary (its 13.3).
** Prefixes lash_ring_, lash_trunc_/lash_truncate, lash_utf8_,
** lash_format_size.
*/
#ifndef lash_output_h
#define lash_output_h

#include <stddef.h>
#include <stdint.h>

/* ---- tail ring ------------------------------------------------------ */

/* Keeps the last `max` bytes of a stream. Memory is at most `max` bytes,
** whatever the chunk sizes: the buffer grows (doubling) while the stream is
** shorter than `max` and is a fixed circular buffer after that, so a short
** stream under a large cap costs little. Treat the fields as private. */
typedef struct lash_ring {
  unsigned char *buf;
  size_t max;        /* the cap N */
  size_t cap;        /* allocated bytes, <= max */
  size_t head;       /* index of the oldest retained byte */
  size_t len;        /* retained bytes, <= max */
  uint64_t total;    /* bytes fed so far */
} lash_ring;

/* Start an empty ring keeping at most `max` bytes (0 keeps nothing).
** Allocates nothing. */
void lash_ring_init(lash_ring *r, size_t max);
/* Append n bytes. Returns 0, or -1 when growing the buffer failed (ENOMEM);
** the ring is then unchanged. Never fails once the ring has filled up. */
int lash_ring_feed(lash_ring *r, const void *p, size_t n);
/* 1 if bytes were dropped (more than `max` bytes were fed), else 0. A stream
** of exactly `max` bytes drops nothing. */
int lash_ring_dropped(const lash_ring *r);
/* Bytes fed so far. */
uint64_t lash_ring_total(const lash_ring *r);
/* The retained tail: the last `max` bytes, and when bytes were dropped, cut
** forward past at most 3 UTF-8 continuation bytes so that it does not start
** inside a character. Makes the buffer contiguous in place (O(max), no
** allocation); the pointer is valid until the next feed, reset or free.
** Returns NULL (and *len = 0) for an empty result. */
const char *lash_ring_view(lash_ring *r, size_t *len);
/* Length of what lash_ring_view would return, without rearranging. */
size_t lash_ring_size(const lash_ring *r);
/* Copy the same bytes into dst (room for lash_ring_size bytes); returns the
** length. Leaves the ring as it is. */
size_t lash_ring_copy(const lash_ring *r, void *dst);
/* Forget everything fed (keeps the buffer). */
void lash_ring_reset(lash_ring *r);
/* Free the buffer; the ring is then empty and may be fed again. Idempotent. */
void lash_ring_free(lash_ring *r);

/* ---- line/byte truncation ------------------------------------------- */

enum { LASH_TRUNC_TAIL = 0, LASH_TRUNC_HEAD = 1 };
enum { LASH_TRUNC_NONE = 0, LASH_TRUNC_LINES = 1, LASH_TRUNC_BYTES = 2 };

#define LASH_NOLIMIT ((size_t)-1)

typedef struct lash_trunc_opts {
  size_t max_lines;       /* LASH_NOLIMIT for none */
  size_t max_bytes;       /* LASH_NOLIMIT for none */
  int direction;          /* LASH_TRUNC_TAIL keeps the end, HEAD the start */
  int already_truncated;  /* the ring cut the stream: mark even if it fits */
} lash_trunc_opts;

/* The shaped result is one contiguous slice of the input plus a marker
** (before the body for tail, after it for head, joined by "\n"). The
** marker is empty when nothing was truncated; when the head direction finds
** the first line over max_bytes the result is the marker alone. */
typedef struct lash_trunc {
  size_t body_off, body_len;   /* the kept text: input[body_off, +body_len) */
  int direction;               /* as in the options */
  size_t lines;                /* lines kept (a tail cut of one line is 1) */
  int by;                      /* LASH_TRUNC_NONE, _LINES or _BYTES */
  int first_line_exceeded;     /* head only: nothing kept */
  int marked;                  /* the result carries the marker */
  size_t marker_len;
  char marker[96];             /* NUL-terminated */
} lash_trunc;

/* Shape text[0, len) per harness-reference 4.2: split on "\n" (one trailing
** newline is not a line), keep whole lines within max_lines and max_bytes
** (a joining newline costs one byte) from the end (tail) or the start
** (head). A first kept line alone over max_bytes: tail keeps its last
** max_bytes bytes, cut forward to a character boundary; head keeps nothing.
** Markers, exactly:
**   tail: "[... output truncated to the last 50.0KB ...]\n" + body
**   head: body + "\n[... output truncated to the first 2 lines ...]"
**         "[... first line exceeds the 10B limit, output omitted ...]"
** The limit reads "N lines" when the line cap fired (also for N = 1, as the
** reference does), else the formatted max_bytes. already_truncated with
** max_bytes == LASH_NOLIMIT and no cap firing has no size to name; the
** marker then reads "[... output truncated ...]".
** Input is treated as bytes; for valid UTF-8 input the result is valid. */
void lash_truncate(const char *text, size_t len, const lash_trunc_opts *o,
                   lash_trunc *t);
/* Length of the shaped result. */
size_t lash_trunc_size(const lash_trunc *t);
/* Write the shaped result into dst (room for lash_trunc_size bytes, no NUL
** added); returns its length. */
size_t lash_trunc_render(const char *text, const lash_trunc *t, char *dst);

/* ---- size format ---------------------------------------------------- */

/* Below 1024 "{n}B"; below 1 MiB n/1024 with one decimal and "KB"
** (51200 -> "50.0KB", 5000 -> "4.9KB", 1048575 -> "1024.0KB"); else n/1 MiB
** with one decimal and "MB". Rounding is exact, half to even (as Python's
** format of the same quotient), and independent of the C locale. Writes a
** NUL-terminated string into buf (32 bytes is always enough); returns its
** length. */
size_t lash_format_size(uint64_t n, char *buf, size_t bufsize);

/* ---- UTF-8 ---------------------------------------------------------- */

/* 1 if s[0, len) is well-formed UTF-8 (no overlongs, surrogates, or code
** points above U+10FFFF), else 0. */
int lash_utf8_valid(const char *s, size_t len);
/* Length in bytes of the valid prefix of s. */
size_t lash_utf8_valid_prefix(const char *s, size_t len);
/* Size of the repaired text (see lash_utf8_repair). */
size_t lash_utf8_repaired_size(const char *s, size_t len);
/* Replace ill-formed sequences by U+FFFD (EF BF BD) using the "maximal
** subpart" rule (Unicode 3.9 / WHATWG decode / Python's errors="replace"):
** a lead byte followed by continuation bytes that could still begin a
** valid sequence, cut short, is one U+FFFD; every other bad byte is one
** U+FFFD of its own. So "\xff\xfeok" -> FFFD FFFD "ok", "ok\xe2\x82" ->
** "ok" FFFD, "\xed\xa0\x80" (a surrogate) -> three FFFD. Valid text is
** copied unchanged. dst needs lash_utf8_repaired_size bytes; returns the
** bytes written. */
size_t lash_utf8_repair(const char *s, size_t len, char *dst);

/* ---- text for a terminal -------------------------------------------- */

/* Text from outside lash (a model, a tool, a server, a spec) made safe to
** show on a terminal, so that no escape sequence it carries can move the
** cursor, clear the screen, retitle the window or write the clipboard:
** C0 controls other than tab and newline, and DEL, become caret notation
** (ESC is "^["), C1 controls (U+0080..U+009F) and ill-formed UTF-8 (a lone
** 0x9B is 8-bit CSI) become U+FFFD. The one sanitizer: the CLI's printer
** (lash.cli.printer.visible) and the runtime's stderr log use it. dst
** needs lash_term_visible_size bytes; returns the bytes written. */
size_t lash_term_visible_size(const char *s, size_t len);
size_t lash_term_visible(const char *s, size_t len, char *dst);

#endif
