/*
** pb.h: lash's protobuf wire codec (internal API; prefix pb_, constants
** PB_).
**
** Table-driven: every message is a plain C struct plus one descriptor
** table (pb_msgdesc) listing its fields by number. The same table drives
** the encoder, the decoder, the canonical dump used by the golden tests and
** the fuzzers, so a field number is written exactly once.
**
** Storage of a field in its struct, by type and label:
**   bool                          bool
**   int32 sint32 sfixed32 enum    int32_t
**   uint32 fixed32                uint32_t
**   int64 sint64 sfixed64         int64_t
**   uint64 fixed64                uint64_t
**   float / double                float / double
**   string / bytes                pb_str
**   message                       const T * (NULL = absent)
**   repeated X                    X *name; size_t name_n;   (messages: T *)
**   map<string,string>            pb_kv *name; size_t name_n;
** Scalars with explicit presence (proto3 `optional`, oneof members) also
** have a `bool has_name`. Other proto3 scalars are present when non-zero,
** as the wire format says.
**
** Decoding allocates from a pb_arena (strings are copied and NUL-terminated,
** so decoded pb_str.p can be used as a C string when the field is text);
** freeing the arena frees the whole decoded message. Decoding never reads
** outside the input, bounds nesting, validates UTF-8 in `string` fields and
** skips unknown fields (counting them). Encoding appends to a pb_buf.
*/
#ifndef lash_pb_h
#define lash_pb_h

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pb_type {
  PB_BOOL = 1, PB_INT32, PB_UINT32, PB_SINT32, PB_INT64, PB_UINT64, PB_SINT64,
  PB_ENUM, PB_FIXED32, PB_SFIXED32, PB_FIXED64, PB_SFIXED64, PB_FLOAT,
  PB_DOUBLE, PB_STRING, PB_BYTES, PB_MSG
} pb_type;

/* labels */
#define PB_SINGULAR 0   /* proto3 implicit presence (or message pointer) */
#define PB_OPTIONAL 1   /* explicit presence: has_ flag at aux */
#define PB_REPEATED 2   /* array at off, size_t count at aux */

/* msgdesc flags */
#define PB_MAPENTRY 1u  /* map entry: key and value always encoded */

/* Nesting bound for decoding (messages and skipped groups). */
#define PB_MAX_DEPTH 32

typedef struct pb_str { const char *p; size_t n; } pb_str;
typedef struct pb_kv { pb_str key, value; } pb_kv;

typedef struct pb_msgdesc pb_msgdesc;

typedef struct pb_field {
  uint32_t num;
  uint8_t type;          /* pb_type */
  uint8_t label;         /* PB_SINGULAR / PB_OPTIONAL / PB_REPEATED */
  uint8_t oneof;         /* 0, or the oneof group (1..) it belongs to */
  uint32_t off;          /* value, pointer or array offset */
  uint32_t aux;          /* has_ flag or count offset */
  const pb_msgdesc *sub; /* PB_MSG only */
  const char *name;
} pb_field;

struct pb_msgdesc {
  const char *name;      /* full proto name, e.g. "modal.client.Sandbox" */
  uint32_t size;         /* sizeof the C struct */
  uint16_t nfields;
  uint16_t flags;
  const pb_field *fields;  /* sorted by num */
};

/* The map<string,string> entry every map field of lash uses. */
extern const pb_msgdesc pb_kv_desc;

/* Building field tables: ST is the struct type. */
#define PB_F(ST, num, name, type) \
  { num, type, PB_SINGULAR, 0, offsetof(ST, name), 0, NULL, #name }
#define PB_OPT(ST, num, name, type) \
  { num, type, PB_OPTIONAL, 0, offsetof(ST, name), offsetof(ST, has_##name), NULL, #name }
#define PB_ONEOF(ST, num, name, type, group) \
  { num, type, PB_OPTIONAL, group, offsetof(ST, name), offsetof(ST, has_##name), NULL, #name }
#define PB_REP(ST, num, name, type) \
  { num, type, PB_REPEATED, 0, offsetof(ST, name), offsetof(ST, name##_n), NULL, #name }
#define PB_MSGF(ST, num, name, sub) \
  { num, PB_MSG, PB_SINGULAR, 0, offsetof(ST, name), 0, sub, #name }
#define PB_MSG_ONEOF(ST, num, name, sub, group) \
  { num, PB_MSG, PB_SINGULAR, group, offsetof(ST, name), 0, sub, #name }
#define PB_REPMSG(ST, num, name, sub) \
  { num, PB_MSG, PB_REPEATED, 0, offsetof(ST, name), offsetof(ST, name##_n), sub, #name }
#define PB_MAP(ST, num, name) PB_REPMSG(ST, num, name, &pb_kv_desc)
#define PB_DESC(ST, fullname, table, flags) \
  { fullname, sizeof(ST), sizeof(table) / sizeof((table)[0]), flags, table }

/* ---- memory ---------------------------------------------------------- */

typedef struct pb_arena pb_arena;
pb_arena *pb_arena_new(void);
void  pb_arena_free(pb_arena *a);               /* NULL is fine */
void *pb_arena_alloc(pb_arena *a, size_t n);    /* zeroed; NULL on OOM */
char *pb_arena_strdup(pb_arena *a, const char *p, size_t n);
/* Total bytes handed out (for tests and limits). */
size_t pb_arena_used(const pb_arena *a);

/* A growable output buffer. After a failed append, oom is set and every
** later append is a no-op, so callers check once at the end. */
typedef struct pb_buf {
  uint8_t *p;
  size_t n, cap;
  int oom;
} pb_buf;
void pb_buf_init(pb_buf *b);
void pb_buf_free(pb_buf *b);
int  pb_buf_reserve(pb_buf *b, size_t extra);   /* 0 or -1 */
void pb_buf_append(pb_buf *b, const void *p, size_t n);

/* ---- codec ----------------------------------------------------------- */

typedef struct pb_err {
  char msg[200];         /* why decoding/encoding failed */
  unsigned unknown;      /* unknown fields skipped (all levels) */
} pb_err;

/* Decode buf[0..len) into *msg (a struct of d->size bytes, zeroed first).
** Returns 0, or -1 with err->msg set. */
int pb_decode(const pb_msgdesc *d, void *msg, const uint8_t *buf, size_t len,
              pb_arena *a, pb_err *err);
/* Encode msg, appending to out. Returns 0, or -1 with err->msg set
** (invalid UTF-8 in a string field, out of memory, message too big). */
int pb_encode(const pb_msgdesc *d, const void *msg, pb_buf *out, pb_err *err);
/* The encoded size of msg (what pb_encode appends on success). */
size_t pb_encoded_size(const pb_msgdesc *d, const void *msg);

/* A canonical text rendering of msg: present fields in number order,
** `name: value` per line, nested messages indented, strings and bytes in
** hex, floats as their IEEE bits, map entries sorted by key. The golden
** tests compare it with the same rendering from Python's protobuf. */
void pb_dump(const pb_msgdesc *d, const void *msg, pb_buf *out);

/* Check a descriptor table (sorted unique numbers, sub-descriptors set,
** sane offsets), recursively. Returns 0, or -1 with the fault in why. */
int pb_desc_check(const pb_msgdesc *d, char *why, size_t wn);

/* Field lookup by number (binary search), NULL if unknown. */
const pb_field *pb_field_find(const pb_msgdesc *d, uint32_t num);

/* ---- small helpers ---------------------------------------------------- */

static inline pb_str pb_cstr(const char *s) {
  pb_str r = { s ? s : "", 0 };
  if (s) { const char *e = s; while (*e) e++; r.n = (size_t)(e - s); }
  return r;
}
/* Value of the last entry with this key (proto3 map semantics), or NULL. */
const pb_kv *pb_kv_get(const pb_kv *kv, size_t n, const char *key);

/* Low-level wire helpers (shared with grpc.c's status-details parsing). */
size_t pb_varint_put(uint8_t *out, uint64_t v);          /* out >= 10 bytes */
/* Read a varint from *p (< end); advances *p. Returns 0 or -1 if truncated
** or longer than 10 bytes. */
int pb_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v);
int pb_utf8_valid(const char *s, size_t n);

#endif
