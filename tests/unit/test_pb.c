/*
** test_pb.c: the protobuf codec (src/1-base/pb.c) and lash's Modal message tables
** (src/5-backend/modal/modal_msgs.c) against golden bytes made by Python's protobuf
** (tests/fixtures/modal_golden, written by tests/modal_fake/golden.py), the
** reference vectors of modal-wire.md, and hostile input.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "modal_msgs.h"
#include "pb.h"
#include "pb_alltypes.h"
#include "t.h"

#define GOLDEN "tests/fixtures/modal_golden/"

static const pb_msgdesc *find_desc(const char *name) {
  const pb_msgdesc *d = modal_desc_find(name);
  if (d) return d;
  if (!strcmp(name, pbt_AllTypes_desc.name)) return &pbt_AllTypes_desc;
  if (!strcmp(name, pbt_Inner_desc.name)) return &pbt_Inner_desc;
  return NULL;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *p = malloc(cap + 1);
  size_t r;
  while (p && (r = fread(p + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) {
      char *q = realloc(p, cap * 2 + 1);
      if (!q) { free(p); p = NULL; break; }
      p = q;
      cap *= 2;
    }
  }
  fclose(f);
  if (p) p[len] = 0;
  *n = len;
  return p;
}

static char *golden_file(const char *sample, const char *ext, size_t *n) {
  char path[512];
  snprintf(path, sizeof path, GOLDEN "%s%s", sample, ext);
  return slurp(path, n);
}

static const char *type_name(const pb_field *f) {
  static const char *names[] = { "?", "bool", "int32", "uint32", "sint32",
    "int64", "uint64", "sint64", "enum", "fixed32", "sfixed32", "fixed64",
    "sfixed64", "float", "double", "string", "bytes", "message" };
  return names[f->type];
}

static void describe(const pb_msgdesc *d, pb_buf *out) {
  char line[512];
  if (d->nfields == 0) {
    int n = snprintf(line, sizeof line, "%s (no fields)\n", d->name);
    pb_buf_append(out, line, (size_t)n);
  }
  for (size_t i = 0; i < d->nfields; i++) {
    const pb_field *f = &d->fields[i];
    char typ[256];
    if (f->sub == &pb_kv_desc) snprintf(typ, sizeof typ, "map");
    else if (f->type == PB_MSG) snprintf(typ, sizeof typ, "msg:%s", f->sub->name);
    else snprintf(typ, sizeof typ, "%s", type_name(f));
    const char *label = f->label == PB_REPEATED ? "repeated"
                      : f->label == PB_OPTIONAL ? "optional" : "singular";
    int n = snprintf(line, sizeof line, "%s %u %s %s %s %u\n", d->name, f->num,
                     f->name, typ, label, f->oneof);
    pb_buf_append(out, line, (size_t)n);
  }
}

static int cmp_lines(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort the lines of buf in place (as python's sorted() does for ASCII). */
static char *sorted_lines(pb_buf *b) {
  size_t nl = 0;
  for (size_t i = 0; i < b->n; i++) nl += b->p[i] == '\n';
  char **v = calloc(nl + 1, sizeof *v);
  char *copy = malloc(b->n + 1);
  memcpy(copy, b->p, b->n);
  copy[b->n] = 0;
  size_t k = 0;
  for (char *s = copy, *e; (e = strchr(s, '\n')); s = e + 1) { *e = 0; v[k++] = s; }
  qsort(v, k, sizeof *v, cmp_lines);
  pb_buf out;
  pb_buf_init(&out);
  for (size_t i = 0; i < k; i++) {
    pb_buf_append(&out, v[i], strlen(v[i]));
    pb_buf_append(&out, "\n", 1);
  }
  pb_buf_append(&out, "", 1);
  free(v);
  free(copy);
  return (char *)out.p;
}

static void test_tables(void) {
  char why[256];
  int bad = 0;
  for (size_t i = 0; modal_all_descs[i]; i++)
    if (pb_desc_check(modal_all_descs[i], why, sizeof why) < 0) {
      printf("# %s\n", why);
      bad++;
    }
  T_OK(bad == 0, "every Modal descriptor table is well-formed");
  T_OK(pb_desc_check(&pbt_AllTypes_desc, why, sizeof why) == 0,
       "the all-types test table is well-formed");

  pb_buf all;
  pb_buf_init(&all);
  for (size_t i = 0; modal_all_descs[i]; i++) describe(modal_all_descs[i], &all);
  describe(&pbt_Inner_desc, &all);
  describe(&pbt_AllTypes_desc, &all);
  char *mine = sorted_lines(&all);
  size_t n;
  char *theirs = golden_file("descriptors", ".txt", &n);
  T_OK(theirs != NULL, "descriptors.txt is present");
  if (theirs) {
    T_OK(!strcmp(mine, theirs),
         "C tables match the .proto subset field by field (number, type, label, oneof)");
    if (strcmp(mine, theirs)) {
      /* name the first differing line */
      const char *a = mine, *b = theirs;
      while (*a && *a == *b) { a++; b++; }
      while (a > mine && a[-1] != '\n') { a--; b--; }
      printf("#   C:     %.*s\n#   proto: %.*s\n", (int)strcspn(a, "\n"), a,
             (int)strcspn(b, "\n"), b);
    }
  }
  free(theirs);
  free(mine);
  pb_buf_free(&all);
}

static void test_golden(void) {
  size_t n;
  char *index = golden_file("index", ".txt", &n);
  T_OK(index != NULL, "golden index.txt is present (run tests/modal_fake/golden.py)");
  if (!index) return;
  int samples = 0, dump_ok = 0, reenc_ok = 0;
  for (char *line = index, *e; (e = strchr(line, '\n')); line = e + 1) {
    *e = 0;
    char sample[200], msgname[200], base[200];
    if (sscanf(line, "%199s %199s %199s", sample, msgname, base) != 3) continue;
    samples++;
    const pb_msgdesc *d = find_desc(msgname);
    if (!d) { printf("# no C table for %s\n", msgname); continue; }
    size_t bn, tn, rn;
    char *bin = golden_file(sample, ".bin", &bn);
    char *txt = golden_file(sample, ".txt", &tn);
    char *want = golden_file(base, ".bin", &rn);
    pb_arena *a = pb_arena_new();
    void *msg = malloc(d->size);
    pb_err err;
    if (bin && txt && want && pb_decode(d, msg, (uint8_t *)bin, bn, a, &err) == 0) {
      pb_buf dump, enc;
      pb_buf_init(&dump);
      pb_buf_init(&enc);
      pb_dump(d, msg, &dump);
      if (dump.n == tn && (tn == 0 || !memcmp(dump.p, txt, tn))) dump_ok++;
      else printf("# %s: dump differs\n# C:\n%.*s# python:\n%s", sample,
                  (int)dump.n, (char *)dump.p, txt);
      if (pb_encode(d, msg, &enc, &err) == 0 && enc.n == rn &&
          (rn == 0 || !memcmp(enc.p, want, rn)))
        reenc_ok++;
      else printf("# %s: re-encoding differs (%zu vs %zu bytes)\n", sample, enc.n, rn);
      if (pb_encoded_size(d, msg) != enc.n) printf("# %s: size mismatch\n", sample);
      pb_buf_free(&dump);
      pb_buf_free(&enc);
    } else {
      printf("# %s: %s\n", sample, bin && txt && want ? err.msg : "missing file");
    }
    free(msg);
    pb_arena_free(a);
    free(bin);
    free(txt);
    free(want);
  }
  free(index);
  T_OK(samples > 150, "golden index lists every sample (%d)", samples);
  T_EQ_INT(dump_ok, samples, "every golden sample decodes to python's field values");
  T_EQ_INT(reenc_ok, samples, "every golden sample re-encodes to python's exact bytes");
}

static int hexeq(const pb_buf *b, const char *hex) {
  size_t n = strlen(hex) / 2;
  if (b->n != n) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1 || b->p[i] != v) return 0;
  }
  return 1;
}

#define ENCODE_EQ(desc, msgp, hex, what) do {                          \
    pb_buf b_; pb_err e_; pb_buf_init(&b_);                           \
    int rc_ = pb_encode(&(desc), (msgp), &b_, &e_);                   \
    T_OK(rc_ == 0 && hexeq(&b_, hex), "%s", what);                    \
    pb_buf_free(&b_);                                                 \
  } while (0)

/* The reference vectors of modal-wire.md 2.1, built from C structs. */
static void test_doc_vectors(void) {
  modal_AppGetOrCreateRequest app = { .app_name = pb_cstr("my-app"),
                                      .object_creation_type = 1 };
  ENCODE_EQ(modal_AppGetOrCreateRequest_desc, &app, "0a066d792d6170701801",
            "AppGetOrCreateRequest reference vector");

  modal_SandboxWaitRequest w = { .sandbox_id = pb_cstr("sb-x"), .timeout = 10 };
  ENCODE_EQ(modal_SandboxWaitRequest_desc, &w, "0a0473622d781500002041",
            "SandboxWaitRequest reference vector");

  pb_str cmd = pb_cstr("FROM alpine:3.21");
  modal_Image img = { .dockerfile_commands = &cmd, .dockerfile_commands_n = 1 };
  modal_ImageGetOrCreateRequest ir = { .image = &img, .app_id = pb_cstr("ap-1"),
                                       .builder_version = pb_cstr("2025.06") };
  ENCODE_EQ(modal_ImageGetOrCreateRequest_desc, &ir,
            "1212321046524f4d20616c70696e653a332e3231220461702d314a07323032352e3036",
            "ImageGetOrCreateRequest reference vector");

  pb_str args[] = { pb_cstr("sleep"), pb_cstr("10") };
  modal_Sandbox def = { .entrypoint_args = args, .entrypoint_args_n = 2,
                        .image_id = pb_cstr("im-1"), .timeout_secs = 300,
                        .has_workdir = true, .workdir = pb_cstr("/srv") };
  modal_SandboxTag tag = { pb_cstr("a"), pb_cstr("b") };
  modal_SandboxCreateRequest cr = { .app_id = pb_cstr("ap-1"), .definition = &def,
                                    .tags = &tag, .tags_n = 1 };
  ENCODE_EQ(modal_SandboxCreateRequest_desc, &cr,
            "0a0461702d31121a0a05736c6565700a0231301a04696d2d3138ac0242042f73727622060a0161120162",
            "SandboxCreateRequest reference vector");

  pb_str eargs[] = { pb_cstr("echo"), pb_cstr("hi") };
  pb_kv env = { pb_cstr("A"), pb_cstr("B") };
  modal_TaskExecStartRequest ex = {
    .task_id = pb_cstr("ta-1"), .exec_id = pb_cstr("e1"), .command_args = eargs,
    .command_args_n = 2, .stdout_config = 1, .stderr_config = 1,
    .has_timeout_secs = true, .timeout_secs = 30, .has_workdir = true,
    .workdir = pb_cstr("/"), .env = &env, .env_n = 1 };
  ENCODE_EQ(modal_TaskExecStartRequest_desc, &ex,
            "0a0474612d31120265311a046563686f1a02686920012801301e3a012f62060a0141120142",
            "TaskExecStartRequest reference vector");

  modal_TaskExecStdioReadRequest rd = { pb_cstr("ta-1"), pb_cstr("e1"), 5, 1 };
  ENCODE_EQ(modal_TaskExecStdioReadRequest_desc, &rd, "0a0474612d311202653118052001",
            "TaskExecStdioReadRequest reference vector");

  modal_SandboxTag kv = { pb_cstr("k"), pb_cstr("v") };
  modal_SandboxTagsSetRequest ts = { .sandbox_id = pb_cstr("sb-x"), .tags = &kv, .tags_n = 1 };
  ENCODE_EQ(modal_SandboxTagsSetRequest_desc, &ts, "120473622d781a060a016b120176",
            "SandboxTagsSetRequest reference vector");

  modal_GenericResult gr = { .status = 3, .exitcode = -1 };
  ENCODE_EQ(modal_GenericResult_desc, &gr, "0803" "18ffffffffffffffffff01",
            "negative int32 is a sign-extended 10-byte varint");

  modal_TaskExecWaitResponse code0 = { .has_code = true, .code = 0 };
  ENCODE_EQ(modal_TaskExecWaitResponse_desc, &code0, "0800",
            "a oneof member set to zero is still sent (exit 0 is not 'no status')");
  modal_Empty empty = { 0 };
  ENCODE_EQ(modal_Empty_desc, &empty, "", "google.protobuf.Empty encodes to nothing");
}

/* Decode `hex`; returns the pb_decode result, with err filled. */
static int decode_hex(const pb_msgdesc *d, void *msg, pb_arena *a, const char *hex,
                      pb_err *err) {
  size_t n = strlen(hex) / 2;
  uint8_t *buf = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    buf[i] = (uint8_t)v;
  }
  int rc = pb_decode(d, msg, buf, n, a, err);
  free(buf);
  return rc;
}

static void test_semantics(void) {
  pb_arena *a = pb_arena_new();
  pb_err err;
  pbt_AllTypes m;

  /* unpacked encoding of a packed-by-default field is accepted too */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "9001019001029001ff01", &err) == 0 &&
       m.r_i32_n == 3 && m.r_i32[0] == 1 && m.r_i32[1] == 2 && m.r_i32[2] == 255,
       "unpacked repeated scalars decode");
  /* packed and unpacked runs of one field concatenate */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "92010201029001039201020405", &err) == 0 &&
       m.r_i32_n == 5 && m.r_i32[4] == 5, "packed and unpacked runs concatenate");
  /* oneof: the last member on the wire wins */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "e80107f201017a", &err) == 0 &&
       !m.has_c_int && m.has_c_str && m.c_str.n == 1 && m.c_str.p[0] == 'z',
       "oneof: a later member clears an earlier one");
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "fa0100e80105", &err) == 0 &&
       m.c_msg == NULL && m.has_c_int && m.c_int == 5,
       "oneof: a scalar member clears a message member");
  /* a singular message seen twice merges */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "8a01020807" "8a01031201" "78", &err) == 0 &&
       m.inner && m.inner->a == 7 && m.inner->s.n == 1, "repeated singular message merges");
  /* last scalar wins */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "1001" "1002", &err) == 0 && m.i32 == 2,
       "a repeated singular scalar: last one wins");
  /* wire-type mismatch is skipped as unknown */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "15" "01020304" "1003", &err) == 0 &&
       m.i32 == 3 && err.unknown == 1, "a field with the wrong wire type is skipped");
  /* explicit presence of zero values */
  pbt_AllTypes z = { .has_o_i32 = true, .has_o_str = true, .has_o_b = true };
  ENCODE_EQ(pbt_AllTypes_desc, &z, "d00100da0100e00100", "optional zeros are sent");
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "d00100da0100e00100", &err) == 0 &&
       m.has_o_i32 && m.has_o_str && m.has_o_b && m.o_str.p && m.o_str.p[0] == 0,
       "optional zeros decode as present");
  /* decoded strings are NUL-terminated copies */
  modal_AuthTokenGetResponse tok;
  T_OK(decode_hex(&modal_AuthTokenGetResponse_desc, &tok, a, "0a03616263", &err) == 0 &&
       !strcmp(tok.token.p, "abc"),
       "decoded strings are NUL-terminated");
  /* map lookup: last duplicate wins */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "ca01060a016b120131" "ca01060a016b120132", &err) == 0 &&
       m.m_n == 2 && pb_kv_get(m.m, m.m_n, "k")->value.p[0] == '2' &&
       pb_kv_get(m.m, m.m_n, "x") == NULL, "map lookup returns the last duplicate");
  /* map entries with a missing key or value decode as empty strings */
  T_OK(decode_hex(&pbt_AllTypes_desc, &m, a, "ca0103120178", &err) == 0 && m.m_n == 1 &&
       m.m[0].key.n == 0 && m.m[0].value.n == 1, "a map entry without a key has key \"\"");

  /* invalid UTF-8 is refused when encoding a string, allowed in bytes */
  pbt_AllTypes bad = { .str = { "\xff\xfe", 2 } };
  pb_buf b;
  pb_buf_init(&b);
  T_OK(pb_encode(&pbt_AllTypes_desc, &bad, &b, &err) < 0 && strstr(err.msg, "UTF-8") &&
       b.n == 0, "encoding invalid UTF-8 in a string field fails and appends nothing");
  pbt_AllTypes okb = { .by = { "\xff\xfe", 2 } };
  T_OK(pb_encode(&pbt_AllTypes_desc, &okb, &b, &err) == 0 && b.n == 5,
       "binary bytes fields encode");
  pb_buf_free(&b);
  pb_arena_free(a);
}

static void test_hostile(void) {
  static const struct { const char *hex, *why, *expect; } cases[] = {
    { "08", "truncated varint value", "truncated" },
    { "08ffffffffffffffffffff01", "varint longer than 10 bytes", "truncated" },
    { "08ffffffffffffffffff7f", "10th varint byte above 1", "truncated" },
    { "7a05616263", "length past the end", "exceeds" },
    { "7affffffffffffffffff01", "huge length", "exceeds" },
    { "0001", "field number 0", "field number 0" },
    { "0f", "wire type 7", "wire type" },
    { "fe01", "wire type 6", "wire type" },
    { "7c", "end group without start", "end of group" },
    { "7b", "unterminated group", "truncated group" },
    { "7b0c", "group ended with another number", "mismatched" },
    { "7a02ff00", "invalid UTF-8 in a string", "UTF-8" },
    { "7a03eda080", "a UTF-16 surrogate in a string", "UTF-8" },
    { "7a02c0af", "overlong UTF-8", "UTF-8" },
    { "a20103010203", "packed fixed32 with a partial element", "partial" },
    { "92010180", "packed varint truncated", "truncated" },
    { "8a0105", "submessage length past the end", "exceeds" },
    { "8a01011a", "truncated field inside a submessage", "truncated" },
    { "f8ffffff7f01", "field number beyond 2^29-1", "out of range" },
    { "8a01021a05", "a nested message longer than its parent", "exceeds" },
  };
  pb_arena *a = pb_arena_new();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pbt_AllTypes m;
    pb_err err;
    int rc = decode_hex(&pbt_AllTypes_desc, &m, a, cases[i].hex, &err);
    T_OK(rc < 0 && strstr(err.msg, cases[i].expect), "refused: %s (%s)", cases[i].why, err.msg);
  }

  /* deep nesting: Inner.kids 100 levels deep must be refused, not recurse */
  pb_buf deep;
  pb_buf_init(&deep);
  size_t levels = 100;
  uint8_t *buf = calloc(levels * 3, 1);
  /* build from the inside out: each level wraps the previous in field 3 */
  size_t len = 0;
  for (size_t i = 0; i < levels; i++) {
    uint8_t hdr[12];
    size_t h = 0;
    hdr[h++] = 0x1a;
    h += pb_varint_put(hdr + h, len);
    memmove(buf + h, buf, len);
    memcpy(buf, hdr, h);
    len += h;
    if (len + 12 > levels * 3) { uint8_t *nb = realloc(buf, (len + 12) * 2); buf = nb; }
  }
  pbt_Inner inner;
  pb_err err;
  T_OK(pb_decode(&pbt_Inner_desc, &inner, buf, len, a, &err) < 0 &&
       strstr(err.msg, "nested"), "nesting beyond PB_MAX_DEPTH is refused (%s)", err.msg);
  free(buf);
  pb_buf_free(&deep);

  /* every prefix of every golden sample either decodes or fails cleanly;
  ** a fixed-seed mutation pass does the same for flipped bytes */
  size_t n;
  char *index = golden_file("index", ".txt", &n);
  unsigned long tried = 0;
  uint32_t seed = 12345;
  if (index) {
    for (char *line = index, *e; (e = strchr(line, '\n')); line = e + 1) {
      *e = 0;
      char sample[200], msgname[200];
      if (sscanf(line, "%199s %199s", sample, msgname) != 2) continue;
      const pb_msgdesc *d = find_desc(msgname);
      size_t bn;
      char *bin = golden_file(sample, ".bin", &bn);
      if (!d || !bin) { free(bin); continue; }
      void *msg = malloc(d->size);
      for (size_t cut = 0; cut < bn; cut++) {
        pb_arena *pa = pb_arena_new();
        (void)pb_decode(d, msg, (uint8_t *)bin, cut, pa, &err);
        pb_arena_free(pa);
        tried++;
      }
      for (int k = 0; k < 50 && bn; k++) {
        uint8_t *mut = malloc(bn);
        memcpy(mut, bin, bn);
        for (int f = 0; f < 3; f++) {
          seed = seed * 1103515245u + 12345u;
          mut[(seed >> 8) % bn] ^= (uint8_t)(seed >> 20);
        }
        pb_arena *pa = pb_arena_new();
        if (pb_decode(d, msg, mut, bn, pa, &err) == 0) {
          pb_buf dump, enc;
          pb_buf_init(&dump);
          pb_buf_init(&enc);
          pb_dump(d, msg, &dump);
          (void)pb_encode(d, msg, &enc, &err);
          pb_buf_free(&dump);
          pb_buf_free(&enc);
        }
        pb_arena_free(pa);
        free(mut);
        tried++;
      }
      free(msg);
      free(bin);
    }
  }
  free(index);
  T_OK(tried > 1000, "%lu truncated and mutated inputs decoded or failed cleanly", tried);

  /* the arena limit bounds memory amplification (many empty submessages) */
  pb_arena *small = pb_arena_new();
  size_t reps = 100000;
  uint8_t *many = malloc(reps * 3);
  for (size_t i = 0; i < reps; i++) { many[3 * i] = 0xc2; many[3 * i + 1] = 0x01; many[3 * i + 2] = 0; }
  pbt_AllTypes m;
  T_OK(pb_decode(&pbt_AllTypes_desc, &m, many, reps * 3, small, &err) == 0 &&
       m.r_inner_n == reps, "100000 empty repeated submessages decode");
  pb_arena_free(small);
  free(many);
  pb_arena_free(a);
}

/* Regenerate the golden files with python protobuf and compare. */
static void test_regenerate(void) {
  if (access("/usr/bin/python3", X_OK) != 0) {
    T_OK(1, "golden files regenerate identically # SKIP /usr/bin/python3 missing");
    return;
  }
  int rc = system("/usr/bin/python3 tests/modal_fake/golden.py --check >/tmp/lash-golden-check.$$ 2>&1; "
                  "r=$?; sed 's/^/# /' /tmp/lash-golden-check.$$; rm -f /tmp/lash-golden-check.$$; exit $r");
  int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (code == 77)
    T_OK(1, "golden files regenerate identically # SKIP protoc or python3-protobuf missing");
  else
    T_EQ_INT(code, 0, "golden files regenerate identically from the .proto subset");
}

/* lash's tables against Modal's real protos (tests/modal_fake/upstream,
** pinned commit in its PINNED file): every field lash declares must exist
** there with the same number, name, type, label and oneof. */
static void test_upstream(void) {
  if (access("/usr/bin/python3", X_OK) != 0) {
    T_OK(1, "C tables match Modal's real protos # SKIP /usr/bin/python3 missing");
    return;
  }
  pb_buf all;
  pb_buf_init(&all);
  for (size_t i = 0; modal_all_descs[i]; i++) describe(modal_all_descs[i], &all);
  char path[] = "/tmp/lash-upstream-XXXXXX";
  int fd = mkstemp(path);
  T_OK(fd >= 0, "temp file for the table dump");
  if (fd < 0) { pb_buf_free(&all); return; }
  T_OK(write(fd, all.p, all.n) == (ssize_t)all.n, "table dump written");
  close(fd);
  pb_buf_free(&all);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/modal_fake/upstream_check.py %s 2>&1", path);
  int rc = system(cmd);
  unlink(path);
  int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (code == 77)
    T_OK(1, "C tables match Modal's real protos # SKIP protoc or python3-protobuf missing");
  else
    T_EQ_INT(code, 0, "C tables match Modal's real protos field by field (modal-client, pinned)");
}

int main(void) {
  test_tables();
  test_upstream();
  test_golden();
  test_doc_vectors();
  test_semantics();
  test_hostile();
  test_regenerate();
  return T_DONE();
}
