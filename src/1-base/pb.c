/*
** pb.c: lash's protobuf wire codec: arena, varints, the table-driven
** encoder and decoder, and the canonical dump (see pb.h for the storage
** model). The decoder treats its input as hostile: every length is checked
** against what is left, nesting is bounded, allocations are capped by the
** arena's limit, and a field whose wire type does not match its table entry
** is skipped as unknown (what protobuf's own parsers do). Prefix pb_; no
** Lua, no service: Modal's messages are modal_msgs.c's tables.
*/
#include "pb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ----------------------------------------------------------- */

typedef struct pb_chunk {
  struct pb_chunk *next;
  size_t cap, used;
  _Alignas(16) unsigned char data[];
} pb_chunk;

struct pb_arena {
  pb_chunk *head;
  size_t used;           /* bytes handed out */
  size_t limit;          /* refuse to hand out more than this */
  size_t next_chunk;     /* size of the next regular chunk */
};

#define PB_ARENA_DEFAULT_LIMIT ((size_t)1 << 30)

pb_arena *pb_arena_new(void) {
  pb_arena *a = calloc(1, sizeof *a);
  if (a) {
    a->limit = PB_ARENA_DEFAULT_LIMIT;
    a->next_chunk = 1024;
  }
  return a;
}

void pb_arena_free(pb_arena *a) {
  if (!a) return;
  pb_chunk *c = a->head;
  while (c) {
    pb_chunk *n = c->next;
    free(c);
    c = n;
  }
  free(a);
}

size_t pb_arena_used(const pb_arena *a) { return a ? a->used : 0; }

static pb_chunk *chunk_new(size_t cap) {
  pb_chunk *c = malloc(sizeof *c + cap);
  if (c) { c->next = NULL; c->cap = cap; c->used = 0; }
  return c;
}

void *pb_arena_alloc(pb_arena *a, size_t n) {
  if (n == 0) n = 1;
  if (n > a->limit - a->used || n > SIZE_MAX - 16) return NULL;
  n = (n + 15) & ~(size_t)15;
  pb_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    if (n > a->next_chunk / 4) {
      /* big: its own chunk, kept behind the head so the head's free space
      ** stays usable */
      pb_chunk *b = chunk_new(n);
      if (!b) return NULL;
      if (c) { b->next = c->next; c->next = b; }
      else a->head = b;
      b->used = n;
      a->used += n;
      memset(b->data, 0, n);
      return b->data;
    }
    c = chunk_new(a->next_chunk);
    if (!c) return NULL;
    if (a->next_chunk < 64 * 1024) a->next_chunk *= 2;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  a->used += n;
  memset(p, 0, n);
  return p;
}

char *pb_arena_strdup(pb_arena *a, const char *p, size_t n) {
  if (n == SIZE_MAX) return NULL;
  char *s = pb_arena_alloc(a, n + 1);
  if (s) {
    if (n) memcpy(s, p, n);
    s[n] = 0;
  }
  return s;
}

/* ---- buffer ---------------------------------------------------------- */

void pb_buf_init(pb_buf *b) { memset(b, 0, sizeof *b); }

void pb_buf_free(pb_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

int pb_buf_reserve(pb_buf *b, size_t extra) {
  if (b->oom) return -1;
  if (extra <= b->cap - b->n) return 0;
  if (extra > SIZE_MAX / 2 - b->n) { b->oom = 1; return -1; }
  size_t cap = b->cap ? b->cap : 64;
  while (cap - b->n < extra) cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) { b->oom = 1; return -1; }
  b->p = p;
  b->cap = cap;
  return 0;
}

void pb_buf_append(pb_buf *b, const void *p, size_t n) {
  if (n == 0 || pb_buf_reserve(b, n) < 0) return;
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static void buf_printf(pb_buf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) pb_buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- wire primitives -------------------------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4,
       WT_I32 = 5 };

size_t pb_varint_put(uint8_t *out, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  out[n++] = (uint8_t)v;
  return n;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; n++; }
  return n;
}

int pb_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
  const uint8_t *p = *pp;
  uint64_t r = 0;
  for (int i = 0; i < 10; i++) {
    if (p >= end) return -1;
    uint8_t b = *p++;
    if (i == 9 && b > 1) return -1;   /* more than 64 bits */
    r |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *pp = p;
      *v = r;
      return 0;
    }
  }
  return -1;
}

static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p) {
  return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int pb_utf8_valid(const char *s, size_t n) {
  if (n == 0) return 1;
  const unsigned char *p = (const unsigned char *)s, *e = p + n;
  while (p < e) {
    unsigned c = *p;
    if (c < 0x80) { p++; continue; }
    size_t len;
    unsigned min;
    if ((c & 0xe0) == 0xc0) { len = 2; min = 0x80; c &= 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; min = 0x800; c &= 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    if ((size_t)(e - p) < len) return 0;
    for (size_t i = 1; i < len; i++) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    p += len;
  }
  return 1;
}

static int wire_type_of(pb_type t) {
  switch (t) {
    case PB_FIXED32: case PB_SFIXED32: case PB_FLOAT: return WT_I32;
    case PB_FIXED64: case PB_SFIXED64: case PB_DOUBLE: return WT_I64;
    case PB_STRING: case PB_BYTES: case PB_MSG: return WT_LEN;
    default: return WT_VARINT;
  }
}

/* Size in bytes of one stored scalar of type t (in its struct/array). */
static size_t slot_size(pb_type t) {
  switch (t) {
    case PB_BOOL: return sizeof(bool);
    case PB_INT32: case PB_SINT32: case PB_ENUM: case PB_SFIXED32:
      return sizeof(int32_t);
    case PB_UINT32: case PB_FIXED32: return sizeof(uint32_t);
    case PB_INT64: case PB_SINT64: case PB_SFIXED64: return sizeof(int64_t);
    case PB_UINT64: case PB_FIXED64: return sizeof(uint64_t);
    case PB_FLOAT: return sizeof(float);
    case PB_DOUBLE: return sizeof(double);
    case PB_STRING: case PB_BYTES: return sizeof(pb_str);
    case PB_MSG: return sizeof(void *);
  }
  return 0;
}

static size_t elem_size(const pb_field *f) {
  return f->type == PB_MSG ? f->sub->size : slot_size((pb_type)f->type);
}

const pb_field *pb_field_find(const pb_msgdesc *d, uint32_t num) {
  size_t lo = 0, hi = d->nfields;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    uint32_t m = d->fields[mid].num;
    if (m == num) return &d->fields[mid];
    if (m < num) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* Scalar value <-> raw 64-bit wire value. */
static uint64_t scalar_load(pb_type t, const void *slot) {
  switch (t) {
    case PB_BOOL: return *(const bool *)slot ? 1 : 0;
    case PB_INT32: case PB_ENUM: case PB_SFIXED32:
      return (uint64_t)(int64_t)*(const int32_t *)slot;
    case PB_SINT32: {
      int32_t v = *(const int32_t *)slot;
      return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
    }
    case PB_UINT32: case PB_FIXED32: return *(const uint32_t *)slot;
    case PB_INT64: case PB_SFIXED64: return (uint64_t)*(const int64_t *)slot;
    case PB_SINT64: {
      int64_t v = *(const int64_t *)slot;
      return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    }
    case PB_UINT64: case PB_FIXED64: return *(const uint64_t *)slot;
    case PB_FLOAT: { uint32_t u; memcpy(&u, slot, 4); return u; }
    case PB_DOUBLE: { uint64_t u; memcpy(&u, slot, 8); return u; }
    default: return 0;
  }
}

static void scalar_store(pb_type t, void *slot, uint64_t v) {
  switch (t) {
    case PB_BOOL: *(bool *)slot = v != 0; break;
    case PB_INT32: case PB_ENUM: case PB_SFIXED32:
      *(int32_t *)slot = (int32_t)(uint32_t)v; break;
    case PB_SINT32: {
      uint32_t u = (uint32_t)v;
      *(int32_t *)slot = (int32_t)((u >> 1) ^ (0u - (u & 1)));
      break;
    }
    case PB_UINT32: case PB_FIXED32: *(uint32_t *)slot = (uint32_t)v; break;
    case PB_INT64: case PB_SFIXED64: *(int64_t *)slot = (int64_t)v; break;
    case PB_SINT64:
      *(int64_t *)slot = (int64_t)((v >> 1) ^ (0 - (v & 1)));
      break;
    case PB_UINT64: case PB_FIXED64: *(uint64_t *)slot = v; break;
    case PB_FLOAT: { uint32_t u = (uint32_t)v; memcpy(slot, &u, 4); break; }
    case PB_DOUBLE: memcpy(slot, &v, 8); break;
    default: break;
  }
}

static int slot_is_zero(const void *slot, size_t n) {
  const unsigned char *p = slot;
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* ---- decoder ---------------------------------------------------------- */

typedef struct dctx {
  pb_arena *a;
  pb_err *err;
} dctx;

static int derr(dctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
  va_end(ap);
  return -1;
}

#define P(msg, off) ((unsigned char *)(msg) + (off))

/* Implied capacity of an array holding n elements (all arrays are grown to
** powers of two, at least 4), so no capacity needs to be stored. */
static size_t implied_cap(size_t n) {
  if (n == 0) return 0;
  size_t c = 4;
  while (c < n) c *= 2;
  return c;
}

/* Make room for `more` elements in the repeated field f of msg; returns the
** address of element n (the first new slot). */
static void *array_grow(dctx *c, const pb_field *f, void *msg, size_t more) {
  void **arr = (void **)P(msg, f->off);
  size_t *np = (size_t *)P(msg, f->aux);
  size_t n = *np, es = elem_size(f);
  if (more > SIZE_MAX / es - n) return NULL;
  if (n + more > implied_cap(n)) {
    size_t cap = implied_cap(n + more);
    if (cap > SIZE_MAX / es) return NULL;
    unsigned char *na = pb_arena_alloc(c->a, cap * es);
    if (!na) return NULL;
    if (n) memcpy(na, *arr, n * es);
    *arr = na;
  }
  return (unsigned char *)*arr + n * es;
}

static int skip_field(dctx *c, const uint8_t **pp, const uint8_t *end,
                      uint32_t num, int wt, int depth);

static int skip_group(dctx *c, const uint8_t **pp, const uint8_t *end,
                      uint32_t num, int depth) {
  if (depth >= PB_MAX_DEPTH) return derr(c, "groups nested too deeply");
  for (;;) {
    uint64_t tag;
    if (pb_varint_get(pp, end, &tag) < 0)
      return derr(c, "truncated group (field %u)", num);
    if (tag >> 32) return derr(c, "field number out of range");
    int wt = (int)(tag & 7);
    uint32_t fn = (uint32_t)(tag >> 3);
    if (wt == WT_EGROUP) {
      if (fn != num) return derr(c, "mismatched end of group %u", num);
      return 0;
    }
    if (skip_field(c, pp, end, fn, wt, depth + 1) < 0) return -1;
  }
}

static int skip_field(dctx *c, const uint8_t **pp, const uint8_t *end,
                      uint32_t num, int wt, int depth) {
  uint64_t v;
  if (num == 0) return derr(c, "field number 0 is invalid");
  switch (wt) {
    case WT_VARINT:
      if (pb_varint_get(pp, end, &v) < 0) return derr(c, "truncated varint");
      return 0;
    case WT_I64:
      if (end - *pp < 8) return derr(c, "truncated fixed64");
      *pp += 8;
      return 0;
    case WT_I32:
      if (end - *pp < 4) return derr(c, "truncated fixed32");
      *pp += 4;
      return 0;
    case WT_LEN:
      if (pb_varint_get(pp, end, &v) < 0) return derr(c, "truncated length");
      if (v > (uint64_t)(end - *pp))
        return derr(c, "length %llu of field %u exceeds the %zu bytes left",
                    (unsigned long long)v, num, (size_t)(end - *pp));
      *pp += v;
      return 0;
    case WT_SGROUP:
      return skip_group(c, pp, end, num, depth);
    case WT_EGROUP:
      return derr(c, "unexpected end of group %u", num);
    default:
      return derr(c, "invalid wire type %d (field %u)", wt, num);
  }
}

static int decode_msg(dctx *c, const pb_msgdesc *d, void *msg,
                      const uint8_t *p, const uint8_t *end, int depth);

static void clear_oneof(const pb_msgdesc *d, void *msg, const pb_field *keep) {
  for (size_t i = 0; i < d->nfields; i++) {
    const pb_field *f = &d->fields[i];
    if (f == keep || f->oneof != keep->oneof) continue;
    if (f->type == PB_MSG) *(void **)P(msg, f->off) = NULL;
    else {
      *(bool *)P(msg, f->aux) = false;
      memset(P(msg, f->off), 0, slot_size((pb_type)f->type));
    }
  }
}

/* Read one scalar value of f's type from the wire. */
static int read_scalar(dctx *c, const pb_field *f, const uint8_t **pp,
                       const uint8_t *end, uint64_t *v) {
  switch (wire_type_of((pb_type)f->type)) {
    case WT_VARINT:
      if (pb_varint_get(pp, end, v) < 0)
        return derr(c, "truncated varint in field %s", f->name);
      return 0;
    case WT_I32:
      if (end - *pp < 4) return derr(c, "truncated field %s", f->name);
      *v = get_le32(*pp);
      *pp += 4;
      return 0;
    default:
      if (end - *pp < 8) return derr(c, "truncated field %s", f->name);
      *v = get_le64(*pp);
      *pp += 8;
      return 0;
  }
}

static int decode_packed(dctx *c, const pb_field *f, void *msg,
                         const uint8_t *p, const uint8_t *end) {
  size_t count = 0;
  int wt = wire_type_of((pb_type)f->type);
  if (wt == WT_VARINT) {
    if (p < end && (end[-1] & 0x80))
      return derr(c, "truncated varint in packed field %s", f->name);
    for (const uint8_t *q = p; q < end; q++)
      if (!(*q & 0x80)) count++;
  } else {
    size_t w = wt == WT_I32 ? 4 : 8;
    if ((size_t)(end - p) % w)
      return derr(c, "packed field %s has a partial element", f->name);
    count = (size_t)(end - p) / w;
  }
  if (count == 0) return 0;
  unsigned char *slot = array_grow(c, f, msg, count);
  if (!slot) return derr(c, "out of memory decoding %s", f->name);
  size_t es = slot_size((pb_type)f->type), *np = (size_t *)P(msg, f->aux);
  while (p < end) {
    uint64_t v;
    if (read_scalar(c, f, &p, end, &v) < 0) return -1;
    scalar_store((pb_type)f->type, slot, v);
    slot += es;
    (*np)++;
  }
  return 0;
}

static int decode_len(dctx *c, const pb_msgdesc *d, const pb_field *f,
                      void *msg, const uint8_t *p, const uint8_t *end,
                      int depth) {
  size_t n = (size_t)(end - p);
  if (f->type == PB_STRING || f->type == PB_BYTES) {
    if (f->type == PB_STRING && !pb_utf8_valid((const char *)p, n))
      return derr(c, "field %s.%s is not valid UTF-8", d->name, f->name);
    char *s = pb_arena_strdup(c->a, (const char *)p, n);
    if (!s) return derr(c, "out of memory decoding %s", f->name);
    pb_str v = { s, n };
    if (f->label == PB_REPEATED) {
      pb_str *slot = array_grow(c, f, msg, 1);
      if (!slot) return derr(c, "out of memory decoding %s", f->name);
      *slot = v;
      (*(size_t *)P(msg, f->aux))++;
    } else {
      *(pb_str *)P(msg, f->off) = v;
      if (f->label == PB_OPTIONAL) {
        *(bool *)P(msg, f->aux) = true;
        if (f->oneof) clear_oneof(d, msg, f);
      }
    }
    return 0;
  }
  /* a message */
  if (depth >= PB_MAX_DEPTH)
    return derr(c, "messages nested deeper than %d", PB_MAX_DEPTH);
  void *sub;
  if (f->label == PB_REPEATED) {
    sub = array_grow(c, f, msg, 1);
    if (!sub) return derr(c, "out of memory decoding %s", f->name);
    memset(sub, 0, f->sub->size);
    (*(size_t *)P(msg, f->aux))++;
  } else {
    void **pp = (void **)P(msg, f->off);
    if (!*pp) {   /* a repeated occurrence merges into the first one */
      *pp = pb_arena_alloc(c->a, f->sub->size);
      if (!*pp) return derr(c, "out of memory decoding %s", f->name);
    }
    sub = *pp;
    if (f->oneof) clear_oneof(d, msg, f);
  }
  return decode_msg(c, f->sub, sub, p, end, depth + 1);
}

static int decode_msg(dctx *c, const pb_msgdesc *d, void *msg,
                      const uint8_t *p, const uint8_t *end, int depth) {
  while (p < end) {
    uint64_t tag;
    if (pb_varint_get(&p, end, &tag) < 0)
      return derr(c, "truncated tag in %s", d->name);
    if (tag >> 32 || (tag >> 3) > 0x1fffffff)
      return derr(c, "field number out of range in %s", d->name);
    uint32_t num = (uint32_t)(tag >> 3);
    int wt = (int)(tag & 7);
    if (num == 0) return derr(c, "field number 0 in %s", d->name);
    const pb_field *f = pb_field_find(d, num);
    int want = f ? wire_type_of((pb_type)f->type) : -1;
    int packed = f && f->label == PB_REPEATED && want != WT_LEN && wt == WT_LEN;
    if (!f || (wt != want && !packed)) {
      c->err->unknown++;
      if (skip_field(c, &p, end, num, wt, depth) < 0) return -1;
      continue;
    }
    if (wt == WT_LEN) {
      uint64_t len;
      if (pb_varint_get(&p, end, &len) < 0)
        return derr(c, "truncated length of %s.%s", d->name, f->name);
      if (len > (uint64_t)(end - p))
        return derr(c, "length %llu of %s.%s exceeds the %zu bytes left",
                    (unsigned long long)len, d->name, f->name,
                    (size_t)(end - p));
      const uint8_t *fe = p + len;
      int rc = packed ? decode_packed(c, f, msg, p, fe)
                      : decode_len(c, d, f, msg, p, fe, depth);
      if (rc < 0) return -1;
      p = fe;
      continue;
    }
    uint64_t v;
    if (read_scalar(c, f, &p, end, &v) < 0) return -1;
    if (f->label == PB_REPEATED) {
      void *slot = array_grow(c, f, msg, 1);
      if (!slot) return derr(c, "out of memory decoding %s", f->name);
      scalar_store((pb_type)f->type, slot, v);
      (*(size_t *)P(msg, f->aux))++;
    } else {
      scalar_store((pb_type)f->type, P(msg, f->off), v);
      if (f->label == PB_OPTIONAL) {
        *(bool *)P(msg, f->aux) = true;
        if (f->oneof) clear_oneof(d, msg, f);
      }
    }
  }
  return 0;
}

int pb_decode(const pb_msgdesc *d, void *msg, const uint8_t *buf, size_t len,
              pb_arena *a, pb_err *err) {
  pb_err dummy;
  if (!err) err = &dummy;
  err->msg[0] = 0;
  err->unknown = 0;
  memset(msg, 0, d->size);
  dctx c = { a, err };
  if (!buf) {
    if (len) return derr(&c, "no input");
    buf = (const uint8_t *)"";
  }
  return decode_msg(&c, d, msg, buf, buf + len, 0);
}

/* ---- encoder ---------------------------------------------------------- */

static size_t msg_size(const pb_msgdesc *d, const void *msg);

static int field_present(const pb_msgdesc *d, const pb_field *f,
                         const void *msg) {
  const unsigned char *m = msg;
  if (f->type == PB_MSG) return *(void *const *)(m + f->off) != NULL;
  if (f->label == PB_OPTIONAL) return *(const bool *)(m + f->aux);
  if (d->flags & PB_MAPENTRY) return 1;
  if (f->type == PB_STRING || f->type == PB_BYTES)
    return ((const pb_str *)(m + f->off))->n != 0;
  return !slot_is_zero(m + f->off, slot_size((pb_type)f->type));
}

static size_t scalar_wire_size(pb_type t, uint64_t v) {
  switch (wire_type_of(t)) {
    case WT_I32: return 4;
    case WT_I64: return 8;
    default: return varint_size(v);
  }
}

static size_t tag_size(uint32_t num) { return varint_size((uint64_t)num << 3); }

static size_t field_size(const pb_msgdesc *d, const pb_field *f,
                         const void *msg) {
  const unsigned char *m = msg;
  pb_type t = (pb_type)f->type;
  if (f->label == PB_REPEATED) {
    size_t n = *(const size_t *)(m + f->aux), total = 0;
    const unsigned char *arr = *(void *const *)(m + f->off);
    if (n == 0) return 0;
    size_t es = elem_size(f);
    if (t == PB_STRING || t == PB_BYTES) {
      for (size_t i = 0; i < n; i++) {
        size_t l = ((const pb_str *)(arr + i * es))->n;
        total += tag_size(f->num) + varint_size(l) + l;
      }
    } else if (t == PB_MSG) {
      for (size_t i = 0; i < n; i++) {
        size_t l = msg_size(f->sub, arr + i * es);
        total += tag_size(f->num) + varint_size(l) + l;
      }
    } else {   /* packed */
      size_t body = 0;
      for (size_t i = 0; i < n; i++)
        body += scalar_wire_size(t, scalar_load(t, arr + i * es));
      total = tag_size(f->num) + varint_size(body) + body;
    }
    return total;
  }
  if (!field_present(d, f, msg)) return 0;
  if (t == PB_STRING || t == PB_BYTES) {
    size_t l = ((const pb_str *)(m + f->off))->n;
    return tag_size(f->num) + varint_size(l) + l;
  }
  if (t == PB_MSG) {
    size_t l = msg_size(f->sub, *(void *const *)(m + f->off));
    return tag_size(f->num) + varint_size(l) + l;
  }
  return tag_size(f->num) + scalar_wire_size(t, scalar_load(t, m + f->off));
}

static size_t msg_size(const pb_msgdesc *d, const void *msg) {
  size_t total = 0;
  for (size_t i = 0; i < d->nfields; i++)
    total += field_size(d, &d->fields[i], msg);
  return total;
}

size_t pb_encoded_size(const pb_msgdesc *d, const void *msg) {
  return msg_size(d, msg);
}

typedef struct ectx {
  uint8_t *p;            /* write cursor (space already reserved) */
  pb_err *err;
  int failed;
} ectx;

static void put_varint(ectx *e, uint64_t v) { e->p += pb_varint_put(e->p, v); }
static void put_tag(ectx *e, uint32_t num, int wt) {
  put_varint(e, (uint64_t)num << 3 | (uint64_t)wt);
}

static void put_scalar(ectx *e, pb_type t, uint64_t v) {
  switch (wire_type_of(t)) {
    case WT_I32: put_le32(e->p, (uint32_t)v); e->p += 4; break;
    case WT_I64: put_le64(e->p, v); e->p += 8; break;
    default: put_varint(e, v); break;
  }
}

static void put_bytes(ectx *e, const pb_msgdesc *d, const pb_field *f,
                      const pb_str *s) {
  if (f->type == PB_STRING && !pb_utf8_valid(s->p, s->n) && !e->failed) {
    e->failed = 1;
    snprintf(e->err->msg, sizeof e->err->msg,
             "field %s.%s is not valid UTF-8 (protobuf strings must be; "
             "send binary data as bytes)", d->name, f->name);
  }
  put_tag(e, f->num, WT_LEN);
  put_varint(e, s->n);
  if (s->n) memcpy(e->p, s->p, s->n);
  e->p += s->n;
}

static void encode_msg(ectx *e, const pb_msgdesc *d, const void *msg);

static void put_submsg(ectx *e, const pb_field *f, const void *sub) {
  put_tag(e, f->num, WT_LEN);
  put_varint(e, msg_size(f->sub, sub));
  encode_msg(e, f->sub, sub);
}

static void encode_msg(ectx *e, const pb_msgdesc *d, const void *msg) {
  const unsigned char *m = msg;
  for (size_t i = 0; i < d->nfields; i++) {
    const pb_field *f = &d->fields[i];
    pb_type t = (pb_type)f->type;
    if (f->label == PB_REPEATED) {
      size_t n = *(const size_t *)(m + f->aux), es = elem_size(f);
      const unsigned char *arr = *(void *const *)(m + f->off);
      if (n == 0) continue;
      if (t == PB_STRING || t == PB_BYTES) {
        for (size_t j = 0; j < n; j++)
          put_bytes(e, d, f, (const pb_str *)(arr + j * es));
      } else if (t == PB_MSG) {
        for (size_t j = 0; j < n; j++) put_submsg(e, f, arr + j * es);
      } else {
        size_t body = 0;
        for (size_t j = 0; j < n; j++)
          body += scalar_wire_size(t, scalar_load(t, arr + j * es));
        put_tag(e, f->num, WT_LEN);
        put_varint(e, body);
        for (size_t j = 0; j < n; j++)
          put_scalar(e, t, scalar_load(t, arr + j * es));
      }
      continue;
    }
    if (!field_present(d, f, msg)) continue;
    if (t == PB_STRING || t == PB_BYTES)
      put_bytes(e, d, f, (const pb_str *)(m + f->off));
    else if (t == PB_MSG)
      put_submsg(e, f, *(void *const *)(m + f->off));
    else {
      put_tag(e, f->num, wire_type_of(t));
      put_scalar(e, t, scalar_load(t, m + f->off));
    }
  }
}

int pb_encode(const pb_msgdesc *d, const void *msg, pb_buf *out, pb_err *err) {
  pb_err dummy;
  if (!err) err = &dummy;
  err->msg[0] = 0;
  err->unknown = 0;
  size_t n = msg_size(d, msg);
  if (n > 0x7fffffff) {
    snprintf(err->msg, sizeof err->msg, "%s is too large to encode (%zu bytes)",
             d->name, n);
    return -1;
  }
  if (n == 0) return 0;
  if (pb_buf_reserve(out, n) < 0) {
    snprintf(err->msg, sizeof err->msg, "out of memory encoding %s", d->name);
    return -1;
  }
  ectx e = { out->p + out->n, err, 0 };
  encode_msg(&e, d, msg);
  if (e.failed) return -1;
  out->n += n;
  return 0;
}

/* ---- canonical dump --------------------------------------------------- */

static void dump_indent(pb_buf *b, int depth) {
  for (int i = 0; i < depth; i++) pb_buf_append(b, "  ", 2);
}

static void dump_hex(pb_buf *b, const pb_str *s) {
  static const char hx[] = "0123456789abcdef";
  pb_buf_append(b, "x'", 2);
  for (size_t i = 0; i < s->n; i++) {
    unsigned char ch = (unsigned char)s->p[i];
    char two[2] = { hx[ch >> 4], hx[ch & 15] };
    pb_buf_append(b, two, 2);
  }
  pb_buf_append(b, "'", 1);
}

static void dump_scalar(pb_buf *b, pb_type t, const void *slot) {
  switch (t) {
    case PB_BOOL: buf_printf(b, "%s", *(const bool *)slot ? "true" : "false"); break;
    case PB_INT32: case PB_SINT32: case PB_ENUM: case PB_SFIXED32:
      buf_printf(b, "%ld", (long)*(const int32_t *)slot); break;
    case PB_UINT32: case PB_FIXED32:
      buf_printf(b, "%lu", (unsigned long)*(const uint32_t *)slot); break;
    case PB_INT64: case PB_SINT64: case PB_SFIXED64:
      buf_printf(b, "%lld", (long long)*(const int64_t *)slot); break;
    case PB_UINT64: case PB_FIXED64:
      buf_printf(b, "%llu", (unsigned long long)*(const uint64_t *)slot); break;
    case PB_FLOAT:
      buf_printf(b, "f:%08lx", (unsigned long)scalar_load(t, slot)); break;
    case PB_DOUBLE:
      buf_printf(b, "d:%016llx", (unsigned long long)scalar_load(t, slot)); break;
    case PB_STRING: case PB_BYTES: dump_hex(b, slot); break;
    default: break;
  }
}

static void dump_msg(pb_buf *b, const pb_msgdesc *d, const void *msg, int depth);

static void dump_one(pb_buf *b, const pb_field *f, const void *slot, int depth) {
  dump_indent(b, depth);
  pb_buf_append(b, f->name, strlen(f->name));
  if (f->type == PB_MSG) {
    pb_buf_append(b, " {\n", 3);
    dump_msg(b, f->sub, slot, depth + 1);
    dump_indent(b, depth);
    pb_buf_append(b, "}\n", 2);
    return;
  }
  pb_buf_append(b, ": ", 2);
  dump_scalar(b, (pb_type)f->type, slot);
  pb_buf_append(b, "\n", 1);
}

/* Order map entries by key, then by position, so the last duplicate of a
** key ends each run. */
static int kv_cmp(const void *x, const void *y) {
  const pb_kv *a = *(const pb_kv *const *)x, *b = *(const pb_kv *const *)y;
  size_t n = a->key.n < b->key.n ? a->key.n : b->key.n;
  int r = n ? memcmp(a->key.p, b->key.p, n) : 0;
  if (r) return r;
  if (a->key.n != b->key.n) return a->key.n < b->key.n ? -1 : 1;
  return a < b ? -1 : a > b;
}

static int kv_same_key(const pb_kv *a, const pb_kv *b) {
  return a->key.n == b->key.n && (a->key.n == 0 || !memcmp(a->key.p, b->key.p, a->key.n));
}

static void dump_msg(pb_buf *b, const pb_msgdesc *d, const void *msg, int depth) {
  const unsigned char *m = msg;
  for (size_t i = 0; i < d->nfields; i++) {
    const pb_field *f = &d->fields[i];
    if (f->label == PB_REPEATED) {
      size_t n = *(const size_t *)(m + f->aux), es = elem_size(f);
      const unsigned char *arr = *(void *const *)(m + f->off);
      if (n == 0) continue;
      if (f->sub == &pb_kv_desc) {
        /* maps render sorted by key (the last duplicate wins) */
        const pb_kv **v = malloc(n * sizeof *v);
        if (!v) { b->oom = 1; return; }
        for (size_t j = 0; j < n; j++) v[j] = (const pb_kv *)(arr + j * es);
        qsort(v, n, sizeof *v, kv_cmp);
        for (size_t j = 0; j < n; j++)
          if (j + 1 == n || !kv_same_key(v[j], v[j + 1]))
            dump_one(b, f, v[j], depth);
        free(v);
        continue;
      }
      for (size_t j = 0; j < n; j++) dump_one(b, f, arr + j * es, depth);
      continue;
    }
    if (!field_present(d, f, msg)) continue;
    if (f->type == PB_MSG) dump_one(b, f, *(void *const *)(m + f->off), depth);
    else dump_one(b, f, m + f->off, depth);
  }
}

void pb_dump(const pb_msgdesc *d, const void *msg, pb_buf *out) {
  dump_msg(out, d, msg, 0);
}

/* ---- descriptor checks and small helpers ------------------------------ */

static int check_rec(const pb_msgdesc *d, int depth, char *why, size_t wn) {
  if (depth > PB_MAX_DEPTH) {
    snprintf(why, wn, "%s: descriptor nesting too deep (a cycle?)", d->name);
    return -1;
  }
  for (size_t i = 0; i < d->nfields; i++) {
    const pb_field *f = &d->fields[i];
    const char *bad = NULL;
    if (f->num == 0 || f->num > 0x1fffffff) bad = "field number out of range";
    else if (i && d->fields[i - 1].num >= f->num) bad = "fields not sorted by number";
    else if (f->type < PB_BOOL || f->type > PB_MSG) bad = "bad type";
    else if ((f->type == PB_MSG) != (f->sub != NULL)) bad = "sub-descriptor mismatch";
    else if (f->off >= d->size || (f->label != PB_SINGULAR && f->aux >= d->size))
      bad = "offset outside the struct";
    else if (f->oneof && f->label == PB_REPEATED) bad = "repeated field in a oneof";
    else if (f->oneof && f->type != PB_MSG && f->label != PB_OPTIONAL)
      bad = "oneof scalar without presence";
    if (bad) {
      snprintf(why, wn, "%s.%s (%u): %s", d->name, f->name, f->num, bad);
      return -1;
    }
    if (f->type == PB_MSG && f->sub != d &&
        check_rec(f->sub, depth + 1, why, wn) < 0)
      return -1;
  }
  return 0;
}

int pb_desc_check(const pb_msgdesc *d, char *why, size_t wn) {
  return check_rec(d, 0, why, wn);
}

const pb_kv *pb_kv_get(const pb_kv *kv, size_t n, const char *key) {
  size_t kl = strlen(key);
  for (size_t i = n; i-- > 0;)
    if (kv[i].key.n == kl && (kl == 0 || !memcmp(kv[i].key.p, key, kl)))
      return &kv[i];
  return NULL;
}

static const pb_field kv_fields[] = {
  PB_F(pb_kv, 1, key, PB_STRING),
  PB_F(pb_kv, 2, value, PB_STRING),
};
const pb_msgdesc pb_kv_desc = { "map<string,string> entry", sizeof(pb_kv), 2,
                                PB_MAPENTRY, kv_fields };
