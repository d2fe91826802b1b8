/*
** pb_alltypes.h: C tables for tests/modal_fake/lash_pbtest.proto, the
** codec's test messages (every scalar type, packed repeats, a map, explicit
** presence, a oneof, recursion, the largest field number). Shared by
** test_pb.c and fuzz/fuzz_pb.c; header-only and test-only.
*/
#ifndef lash_pb_alltypes_h
#define lash_pb_alltypes_h

#include <stddef.h>
#include "pb.h"

typedef struct pbt_Inner {
  int32_t a;
  pb_str s;
  struct pbt_Inner *kids; size_t kids_n;
} pbt_Inner;

typedef struct pbt_AllTypes {
  bool b;
  int32_t i32; uint32_t u32; int32_t s32;
  int64_t i64; uint64_t u64; int64_t s64;
  int32_t color;
  uint32_t f32; int32_t sf32; uint64_t f64; int64_t sf64;
  float fl; double db;
  pb_str str, by;
  const pbt_Inner *inner;
  int32_t *r_i32; size_t r_i32_n;
  int64_t *r_s64; size_t r_s64_n;
  uint32_t *r_f32; size_t r_f32_n;
  double *r_db; size_t r_db_n;
  pb_str *r_str; size_t r_str_n;
  pb_str *r_by; size_t r_by_n;
  pbt_Inner *r_inner; size_t r_inner_n;
  pb_kv *m; size_t m_n;
  bool has_o_i32; int32_t o_i32;
  bool has_o_str; pb_str o_str;
  bool has_o_b; bool o_b;
  bool has_c_int; int32_t c_int;
  bool has_c_str; pb_str c_str;
  const pbt_Inner *c_msg;
  bool *r_b; size_t r_b_n;
  int32_t *r_color; size_t r_color_n;
  uint32_t last;
} pbt_AllTypes;

static const pb_msgdesc pbt_Inner_desc;
static const pb_field pbt_Inner_f[] = {
  PB_F(pbt_Inner, 1, a, PB_INT32),
  PB_F(pbt_Inner, 2, s, PB_STRING),
  PB_REPMSG(pbt_Inner, 3, kids, &pbt_Inner_desc),
};
static const pb_msgdesc pbt_Inner_desc =
  PB_DESC(pbt_Inner, "lash.pbtest.Inner", pbt_Inner_f, 0);

static const pb_field pbt_AllTypes_f[] = {
  PB_F(pbt_AllTypes, 1, b, PB_BOOL),
  PB_F(pbt_AllTypes, 2, i32, PB_INT32),
  PB_F(pbt_AllTypes, 3, u32, PB_UINT32),
  PB_F(pbt_AllTypes, 4, s32, PB_SINT32),
  PB_F(pbt_AllTypes, 5, i64, PB_INT64),
  PB_F(pbt_AllTypes, 6, u64, PB_UINT64),
  PB_F(pbt_AllTypes, 7, s64, PB_SINT64),
  PB_F(pbt_AllTypes, 8, color, PB_ENUM),
  PB_F(pbt_AllTypes, 9, f32, PB_FIXED32),
  PB_F(pbt_AllTypes, 10, sf32, PB_SFIXED32),
  PB_F(pbt_AllTypes, 11, f64, PB_FIXED64),
  PB_F(pbt_AllTypes, 12, sf64, PB_SFIXED64),
  PB_F(pbt_AllTypes, 13, fl, PB_FLOAT),
  PB_F(pbt_AllTypes, 14, db, PB_DOUBLE),
  PB_F(pbt_AllTypes, 15, str, PB_STRING),
  PB_F(pbt_AllTypes, 16, by, PB_BYTES),
  PB_MSGF(pbt_AllTypes, 17, inner, &pbt_Inner_desc),
  PB_REP(pbt_AllTypes, 18, r_i32, PB_INT32),
  PB_REP(pbt_AllTypes, 19, r_s64, PB_SINT64),
  PB_REP(pbt_AllTypes, 20, r_f32, PB_FIXED32),
  PB_REP(pbt_AllTypes, 21, r_db, PB_DOUBLE),
  PB_REP(pbt_AllTypes, 22, r_str, PB_STRING),
  PB_REP(pbt_AllTypes, 23, r_by, PB_BYTES),
  PB_REPMSG(pbt_AllTypes, 24, r_inner, &pbt_Inner_desc),
  PB_MAP(pbt_AllTypes, 25, m),
  PB_OPT(pbt_AllTypes, 26, o_i32, PB_INT32),
  PB_OPT(pbt_AllTypes, 27, o_str, PB_STRING),
  PB_OPT(pbt_AllTypes, 28, o_b, PB_BOOL),
  PB_ONEOF(pbt_AllTypes, 29, c_int, PB_INT32, 1),
  PB_ONEOF(pbt_AllTypes, 30, c_str, PB_STRING, 1),
  PB_MSG_ONEOF(pbt_AllTypes, 31, c_msg, &pbt_Inner_desc, 1),
  PB_REP(pbt_AllTypes, 32, r_b, PB_BOOL),
  PB_REP(pbt_AllTypes, 33, r_color, PB_ENUM),
  PB_F(pbt_AllTypes, 536870911, last, PB_UINT32),
};
static const pb_msgdesc pbt_AllTypes_desc =
  PB_DESC(pbt_AllTypes, "lash.pbtest.AllTypes", pbt_AllTypes_f, 0);

#endif
