/*
** lsecret.c: lash.secret, what handling credentials needs and the
** standard library lacks (used by the MCP client's OAuth):
**
**   lash.secret.random(n)          n bytes from the kernel (getrandom)
**   lash.secret.sha256(s)          the 32-byte SHA-256 digest of s
**   lash.secret.write_file(path, data)
**                                  atomically replace path with data,
**                                  readable and writable by the owner only
**                                  (0600; a temporary file in the same
**                                  directory, fsync, rename); parents
**                                  are created 0700
**   lash.secret.es256_sign(key, message)
**                                  an ES256 signature (ECDSA over P-256 with
**                                  SHA-256, 64 bytes r || s) under a PEM or
**                                  DER EC private key, for private_key_jwt
**   lash.secret.read_file(path)    its contents, or nil, message when it
**                                  is missing; raises when others may read
**                                  or write it (a token left 0644 is
**                                  refused, not used)
**
** SHA-256 follows FIPS 180-4, P-256 and ECDSA FIPS 186-4.
** Prefix: lash_open_secret, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "modules.h"
#include "base64.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- SHA-256 ---------------------------------------------------------- */

typedef struct sha256 {
  uint32_t h[8];
  uint64_t len;        /* bytes */
  unsigned char buf[64];
  size_t n;
} sha256;

static const uint32_t K[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
  0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
  0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256 *s, const unsigned char *p) {
  uint32_t w[64], a, b, c, d, e, f, g, h;
  int i;
  for (i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
  e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
  for (i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
                  K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1;
    d = c; c = b; b = a; a = t1 + t2;
  }
  s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
  s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static void sha256_init(sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, iv, sizeof iv);
  s->len = 0;
  s->n = 0;
}

static void sha256_feed(sha256 *s, const unsigned char *p, size_t len) {
  s->len += len;
  while (len > 0) {
    size_t take = 64 - s->n < len ? 64 - s->n : len;
    memcpy(s->buf + s->n, p, take);
    s->n += take;
    p += take;
    len -= take;
    if (s->n == 64) {
      sha256_block(s, s->buf);
      s->n = 0;
    }
  }
}

static void sha256_done(sha256 *s, unsigned char out[32]) {
  uint64_t bits = s->len * 8;
  unsigned char pad = 0x80, zero = 0, lenb[8];
  int i;
  sha256_feed(s, &pad, 1);
  while (s->n != 56) sha256_feed(s, &zero, 1);
  for (i = 0; i < 8; i++) lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_feed(s, lenb, 8);
  for (i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(s->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)s->h[i];
  }
}

/*** The SHA-256 digest of s (32 raw bytes). */
static int l_sha256(lua_State *L) {
  size_t len;
  const char *p = luaL_checklstring(L, 1, &len);
  unsigned char out[32];
  sha256 s;
  sha256_init(&s);
  sha256_feed(&s, (const unsigned char *)p, len);
  sha256_done(&s, out);
  lua_pushlstring(L, (const char *)out, sizeof out);
  return 1;
}

/*** n random bytes from the kernel (1 <= n <= 4096). */
static int l_random(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  unsigned char buf[4096];
  size_t got = 0;
  luaL_argcheck(L, n >= 1 && n <= (lua_Integer)sizeof buf, 1, "between 1 and 4096 bytes");
  while (got < (size_t)n) {
    ssize_t r = getrandom(buf + got, (size_t)n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return luaL_error(L, "lash.secret.random: getrandom: %s", strerror(errno));
    got += (size_t)r;
  }
  lua_pushlstring(L, (const char *)buf, got);
  return 1;
}

/* ---- ECDSA P-256 signing (ES256) ---------------------------------------- */

/* 256-bit numbers as 8 little-endian 32-bit limbs. Only what one signature
** needs, written for clarity over speed: a signature costs a few thousand
** modular multiplications (milliseconds), once per token request. The
** curve is FIPS 186-4's P-256. */
typedef struct { uint32_t v[8]; } u256;

static const u256 P256_P = {{0xffffffff, 0xffffffff, 0xffffffff, 0x00000000,
                             0x00000000, 0x00000000, 0x00000001, 0xffffffff}};
static const u256 P256_N = {{0xfc632551, 0xf3b9cac2, 0xa7179e84, 0xbce6faad,
                             0xffffffff, 0xffffffff, 0x00000000, 0xffffffff}};
static const u256 P256_GX = {{0xd898c296, 0xf4a13945, 0x2deb33a0, 0x77037d81,
                              0x63a440f2, 0xf8bce6e5, 0xe12c4247, 0x6b17d1f2}};
static const u256 P256_GY = {{0x37bf51f5, 0xcbb64068, 0x6b315ece, 0x2bce3357,
                              0x7c0f9e16, 0x8ee7eb4a, 0xfe1a7f9b, 0x4fe342e2}};

static int u_cmp(const u256 *a, const u256 *b) {
  int i;
  for (i = 7; i >= 0; i--)
    if (a->v[i] != b->v[i]) return a->v[i] < b->v[i] ? -1 : 1;
  return 0;
}

static int u_zero(const u256 *a) {
  int i;
  for (i = 0; i < 8; i++)
    if (a->v[i]) return 0;
  return 1;
}

/* r = a - b, returns the borrow */
static uint32_t u_sub(u256 *r, const u256 *a, const u256 *b) {
  uint64_t borrow = 0;
  int i;
  for (i = 0; i < 8; i++) {
    uint64_t d = (uint64_t)a->v[i] - b->v[i] - borrow;
    r->v[i] = (uint32_t)d;
    borrow = (d >> 63) & 1;
  }
  return (uint32_t)borrow;
}

/* r = a + b mod m, for a, b < m */
static void m_add(u256 *r, const u256 *a, const u256 *b, const u256 *m) {
  uint64_t carry = 0;
  u256 t;
  int i;
  for (i = 0; i < 8; i++) {
    uint64_t s = (uint64_t)a->v[i] + b->v[i] + carry;
    t.v[i] = (uint32_t)s;
    carry = s >> 32;
  }
  if (carry || u_cmp(&t, m) >= 0) u_sub(&t, &t, m);
  *r = t;
}

static void m_sub(u256 *r, const u256 *a, const u256 *b, const u256 *m) {
  u256 t;
  if (u_sub(&t, a, b)) {
    uint64_t carry = 0;
    int i;
    for (i = 0; i < 8; i++) {
      uint64_t s = (uint64_t)t.v[i] + m->v[i] + carry;
      t.v[i] = (uint32_t)s;
      carry = s >> 32;
    }
  }
  *r = t;
}

/* r = a * b mod m by doubling and adding over b's bits, top first */
static void m_mul(u256 *r, const u256 *a, const u256 *b, const u256 *m) {
  u256 acc = {{0}};
  int i;
  for (i = 255; i >= 0; i--) {
    m_add(&acc, &acc, &acc, m);
    if ((b->v[i / 32] >> (i % 32)) & 1) m_add(&acc, &acc, a, m);
  }
  *r = acc;
}

/* r = a^(m-2) mod m: the inverse, m prime */
static void m_inv(u256 *r, const u256 *a, const u256 *m) {
  u256 e, two = {{2}}, acc = {{1}};
  int i;
  u_sub(&e, m, &two);
  for (i = 255; i >= 0; i--) {
    m_mul(&acc, &acc, &acc, m);
    if ((e.v[i / 32] >> (i % 32)) & 1) m_mul(&acc, &acc, a, m);
  }
  *r = acc;
}

typedef struct { u256 x, y, z; } jpoint;   /* Jacobian; z = 0 is infinity */

static void j_double(jpoint *r, const jpoint *a) {
  const u256 *p = &P256_P;
  u256 delta, gamma, beta, alpha, t1, t2, x3, y3, z3;
  if (u_zero(&a->z) || u_zero(&a->y)) {
    memset(r, 0, sizeof *r);
    return;
  }
  m_mul(&delta, &a->z, &a->z, p);
  m_mul(&gamma, &a->y, &a->y, p);
  m_mul(&beta, &a->x, &gamma, p);
  m_sub(&t1, &a->x, &delta, p);
  m_add(&t2, &a->x, &delta, p);
  m_mul(&alpha, &t1, &t2, p);
  m_add(&t1, &alpha, &alpha, p);
  m_add(&alpha, &t1, &alpha, p);            /* 3 (x - delta)(x + delta) */
  m_mul(&x3, &alpha, &alpha, p);
  m_add(&t1, &beta, &beta, p);              /* 2 beta */
  m_add(&t1, &t1, &t1, p);                  /* 4 beta */
  m_add(&t2, &t1, &t1, p);                  /* 8 beta */
  m_sub(&x3, &x3, &t2, p);
  m_add(&z3, &a->y, &a->z, p);
  m_mul(&z3, &z3, &z3, p);
  m_sub(&z3, &z3, &gamma, p);
  m_sub(&z3, &z3, &delta, p);
  m_sub(&t1, &t1, &x3, p);                  /* 4 beta - x3 */
  m_mul(&y3, &alpha, &t1, p);
  m_mul(&t2, &gamma, &gamma, p);
  m_add(&t2, &t2, &t2, p);
  m_add(&t2, &t2, &t2, p);
  m_add(&t2, &t2, &t2, p);                  /* 8 gamma^2 */
  m_sub(&y3, &y3, &t2, p);
  r->x = x3;
  r->y = y3;
  r->z = z3;
}

/* r = a + (x2, y2), the second point affine */
static void j_add_affine(jpoint *r, const jpoint *a, const u256 *x2, const u256 *y2) {
  const u256 *p = &P256_P;
  u256 z1z1, u2, s2, h, hh, i4, j, rr, v, t, x3, y3, z3;
  if (u_zero(&a->z)) {
    r->x = *x2;
    r->y = *y2;
    memset(&r->z, 0, sizeof r->z);
    r->z.v[0] = 1;
    return;
  }
  m_mul(&z1z1, &a->z, &a->z, p);
  m_mul(&u2, x2, &z1z1, p);
  m_mul(&s2, y2, &a->z, p);
  m_mul(&s2, &s2, &z1z1, p);
  m_sub(&h, &u2, &a->x, p);
  m_sub(&rr, &s2, &a->y, p);
  if (u_zero(&h)) {
    if (u_zero(&rr)) j_double(r, a);
    else memset(r, 0, sizeof *r);
    return;
  }
  m_add(&rr, &rr, &rr, p);
  m_mul(&hh, &h, &h, p);
  m_add(&i4, &hh, &hh, p);
  m_add(&i4, &i4, &i4, p);
  m_mul(&j, &h, &i4, p);
  m_mul(&v, &a->x, &i4, p);
  m_mul(&x3, &rr, &rr, p);
  m_sub(&x3, &x3, &j, p);
  m_sub(&x3, &x3, &v, p);
  m_sub(&x3, &x3, &v, p);
  m_sub(&t, &v, &x3, p);
  m_mul(&y3, &rr, &t, p);
  m_mul(&t, &a->y, &j, p);
  m_add(&t, &t, &t, p);
  m_sub(&y3, &y3, &t, p);
  m_add(&z3, &a->z, &h, p);
  m_mul(&z3, &z3, &z3, p);
  m_sub(&z3, &z3, &z1z1, p);
  m_sub(&z3, &z3, &hh, p);
  r->x = x3;
  r->y = y3;
  r->z = z3;
}

static void u_from_be(u256 *r, const unsigned char b[32]) {
  int i;
  for (i = 0; i < 8; i++)
    r->v[7 - i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
                  (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
}

static void u_to_be(unsigned char b[32], const u256 *a) {
  int i;
  for (i = 0; i < 8; i++) {
    b[4 * i] = (unsigned char)(a->v[7 - i] >> 24);
    b[4 * i + 1] = (unsigned char)(a->v[7 - i] >> 16);
    b[4 * i + 2] = (unsigned char)(a->v[7 - i] >> 8);
    b[4 * i + 3] = (unsigned char)a->v[7 - i];
  }
}

/* The x coordinate of k*G. */
static void base_mul_x(u256 *x, const u256 *k) {
  jpoint acc;
  u256 zi, zi2;
  int i;
  memset(&acc, 0, sizeof acc);
  for (i = 255; i >= 0; i--) {
    j_double(&acc, &acc);
    if ((k->v[i / 32] >> (i % 32)) & 1) j_add_affine(&acc, &acc, &P256_GX, &P256_GY);
  }
  m_inv(&zi, &acc.z, &P256_P);
  m_mul(&zi2, &zi, &zi, &P256_P);
  m_mul(x, &acc.x, &zi2, &P256_P);
}

/* The P-256 private scalar of a PEM (PKCS#8 "PRIVATE KEY" or SEC1 "EC
** PRIVATE KEY") or DER key: ECPrivateKey's INTEGER 1, OCTET STRING (32). */
static int ec_private_key(const char *key, size_t len, unsigned char d[32]) {
  static const unsigned char p256_oid[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
  static const unsigned char lead[] = {0x02, 0x01, 0x01, 0x04, 0x20};
  unsigned char der[4096];
  size_t n = 0, i;
  const char *begin = memchr(key, '-', len) && strstr(key, "-----BEGIN") ? strstr(key, "-----BEGIN") : NULL;
  if (begin) {
    const char *p = strchr(begin + 10, '\n'), *end;
    long got;
    if (!p) return -1;
    end = strstr(p, "-----END");
    if (!end) end = p + strlen(p);
    got = lash_base64_decode(p, (size_t)(end - p), der, sizeof der, 1);
    if (got < 0) return -1;
    n = (size_t)got;
  } else {
    if (len > sizeof der) return -1;
    memcpy(der, key, len);
    n = len;
  }
  for (i = 0; i + sizeof lead + 32 <= n; i++)
    if (memcmp(der + i, lead, sizeof lead) == 0) {
      size_t j;
      for (j = 0; j + sizeof p256_oid <= n; j++)
        if (memcmp(der + j, p256_oid, sizeof p256_oid) == 0) {
          memcpy(d, der + i + sizeof lead, 32);
          return 0;
        }
      return -2;   /* an EC key on another curve */
    }
  /* an algorithm that is not EC (an RSA key's PKCS#8 header) */
  {
    static const unsigned char ec_oid[] = {0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};
    int ec = 0;
    for (i = 0; i + sizeof ec_oid <= n; i++)
      if (memcmp(der + i, ec_oid, sizeof ec_oid) == 0) ec = 1;
    if (ec || (begin && n > 16)) return -2;
  }
  return -1;
}

/*** The ES256 (ECDSA P-256, SHA-256) signature of message under a PEM or
** DER private key: 64 bytes, r then s (as JWS wants it). */
static int l_es256_sign(lua_State *L) {
  size_t klen, mlen;
  const char *key = luaL_checklstring(L, 1, &klen);
  const char *msg = luaL_checklstring(L, 2, &mlen);
  unsigned char db[32], hash[32], kb[32], out[64];
  u256 d, e, k, r, s, t, kinv;
  sha256 h;
  int rc = ec_private_key(key, klen, db);
  if (rc == -2) return luaL_error(L, "lash.secret.es256_sign: the key is not a P-256 (prime256v1) EC key");
  if (rc) return luaL_error(L, "lash.secret.es256_sign: cannot read the EC private key (PEM or DER, PKCS#8 or SEC1)");
  u_from_be(&d, db);
  if (u_zero(&d) || u_cmp(&d, &P256_N) >= 0) return luaL_error(L, "lash.secret.es256_sign: the private key is out of range");
  sha256_init(&h);
  sha256_feed(&h, (const unsigned char *)msg, mlen);
  sha256_done(&h, hash);
  u_from_be(&e, hash);
  if (u_cmp(&e, &P256_N) >= 0) u_sub(&e, &e, &P256_N);
  for (;;) {
    size_t got = 0;
    while (got < sizeof kb) {
      ssize_t g = getrandom(kb + got, sizeof kb - got, 0);
      if (g < 0 && errno == EINTR) continue;
      if (g < 0) return luaL_error(L, "lash.secret.es256_sign: getrandom: %s", strerror(errno));
      got += (size_t)g;
    }
    u_from_be(&k, kb);
    if (u_zero(&k) || u_cmp(&k, &P256_N) >= 0) continue;
    base_mul_x(&r, &k);
    if (u_cmp(&r, &P256_N) >= 0) u_sub(&r, &r, &P256_N);
    if (u_zero(&r)) continue;
    m_mul(&t, &r, &d, &P256_N);           /* r d */
    m_add(&t, &t, &e, &P256_N);           /* e + r d */
    m_inv(&kinv, &k, &P256_N);
    m_mul(&s, &kinv, &t, &P256_N);
    if (u_zero(&s)) continue;
    break;
  }
  memset(db, 0, sizeof db);
  memset(kb, 0, sizeof kb);
  u_to_be(out, &r);
  u_to_be(out + 32, &s);
  lua_pushlstring(L, (const char *)out, sizeof out);
  return 1;
}

/* ---- files only the owner can read ---------------------------------- */

static int mkdirs(char *path) {
  char *p;
  for (p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      *p = '/';
      return -1;
    }
    *p = '/';
  }
  return 0;
}

/*** Replace path with data, mode 0600, atomically. Returns true, or nil
** and a message. */
static int l_write_file(lua_State *L) {
  size_t plen, len, off = 0;
  const char *path = luaL_checklstring(L, 1, &plen);
  const char *data = luaL_checklstring(L, 2, &len);
  char *tmp, *dir;
  int fd, e = 0;
  luaL_argcheck(L, plen > 0 && strlen(path) == plen, 1, "a path without NUL bytes");
  tmp = lua_newuserdatauv(L, plen + 32, 0);
  dir = lua_newuserdatauv(L, plen + 1, 0);
  memcpy(dir, path, plen + 1);
  if (strchr(dir, '/') && mkdirs(dir) != 0) {
    e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "cannot create the directory of %s: %s", path, strerror(e));
    return 2;
  }
  {
    unsigned char r[6];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) memset(r, 0, sizeof r);
    snprintf(tmp, plen + 32, "%s.tmp%02x%02x%02x%02x%02x%02x", path, r[0], r[1], r[2], r[3],
             r[4], r[5]);
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) e = errno;
  while (!e && off < len) {
    ssize_t w = write(fd, data + off, len - off);
    if (w < 0 && errno != EINTR) e = errno;
    if (w > 0) off += (size_t)w;
  }
  if (!e && fchmod(fd, 0600) != 0) e = errno;   /* whatever the umask said */
  if (!e && fsync(fd) != 0) e = errno;
  if (fd >= 0 && close(fd) != 0 && !e) e = errno;
  if (!e && rename(tmp, path) != 0) e = errno;
  if (e) {
    if (fd >= 0) unlink(tmp);
    lua_pushnil(L);
    lua_pushfstring(L, "cannot write %s: %s", path, strerror(e));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/*** The contents of path; nil and a message when it cannot be read. A file
** that others may read or write, or that is not a regular file, raises. */
static int l_read_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    lua_pushnil(L);
    lua_pushfstring(L, "cannot read %s: %s", path, strerror(e));
    return 2;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 ||
      st.st_uid != geteuid()) {
    int reg = S_ISREG(st.st_mode);
    close(fd);
    return luaL_error(L, "%s holds credentials but %s; fix it with chmod 600 %s (or remove it)",
                      path, !reg ? "is not a regular file"
                      : st.st_uid != geteuid() ? "belongs to another user"
                      : "others may read or write it", path);
  }
  {
    /* credentials are small: read them whole, with nothing that can
    ** raise while the descriptor is open */
    char buf[65536];
    size_t got = 0;
    for (;;) {
      ssize_t r = read(fd, buf + got, sizeof buf - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
      if (got == sizeof buf) break;
    }
    close(fd);
    if (got == sizeof buf) return luaL_error(L, "%s is too big for a credentials file (64 KiB or more)", path);
    lua_pushlstring(L, buf, got);
  }
  return 1;
}

int lash_open_secret(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"random", l_random}, {"sha256", l_sha256}, {"write_file", l_write_file},
    {"read_file", l_read_file}, {"es256_sign", l_es256_sign}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
