/*
** fuzz_pb.c: libFuzzer target for the protobuf decoder and encoder
** (src/1-base/pb.c) over every Modal message table and the all-types test table.
** The first input byte picks the message. Checks, beyond no crash:
**   - whatever decodes re-encodes, to exactly pb_encoded_size bytes;
**   - the re-encoding decodes again to the same canonical dump (so decode
**     and encode agree on every field the table names);
**   - encoding is deterministic (twice gives the same bytes).
*/
// fuzz-sources: src/1-base/pb.c src/5-backend/modal/modal_msgs.c
// fuzz-flags: -Itests/unit
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modal_msgs.h"
#include "pb.h"
#include "pb_alltypes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const pb_msgdesc *pick(uint8_t b) {
  size_t n = 0;
  while (modal_all_descs[n]) n++;
  size_t i = b % (n + 2);
  if (i == n) return &pbt_AllTypes_desc;
  if (i == n + 1) return &pbt_Inner_desc;
  return modal_all_descs[i];
}

#define CHECK(c, what) do { if (!(c)) { \
    fprintf(stderr, "invariant failed: %s (%s)\n", what, d->name); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const pb_msgdesc *d = pick(data[0]);
  pb_arena *a = pb_arena_new();
  void *m1 = malloc(d->size), *m2 = malloc(d->size);
  pb_err err;
  if (!a || !m1 || !m2) abort();
  if (pb_decode(d, m1, data + 1, size - 1, a, &err) == 0) {
    pb_buf e1, e2, d1, d2;
    pb_buf_init(&e1); pb_buf_init(&e2); pb_buf_init(&d1); pb_buf_init(&d2);
    CHECK(pb_encode(d, m1, &e1, &err) == 0, "a decoded message encodes");
    CHECK(e1.n == pb_encoded_size(d, m1), "encoded size matches pb_encoded_size");
    CHECK(pb_encode(d, m1, &e2, &err) == 0 && e2.n == e1.n &&
          (e1.n == 0 || memcmp(e1.p, e2.p, e1.n) == 0), "encoding is deterministic");
    CHECK(pb_decode(d, m2, e1.p, e1.n, a, &err) == 0, "the re-encoding decodes");
    CHECK(err.unknown == 0, "the re-encoding has no unknown fields");
    pb_dump(d, m1, &d1);
    pb_dump(d, m2, &d2);
    CHECK(!d1.oom && !d2.oom && d1.n == d2.n && (d1.n == 0 || memcmp(d1.p, d2.p, d1.n) == 0),
          "decode(encode(m)) dumps like m");
    pb_buf_free(&e1); pb_buf_free(&e2); pb_buf_free(&d1); pb_buf_free(&d2);
  } else {
    CHECK(err.msg[0] != 0, "a failed decode says why");
  }
  free(m1);
  free(m2);
  pb_arena_free(a);
  return 0;
}
