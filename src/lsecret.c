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
**   lash.secret.read_file(path)    its contents, or nil, message when it
**                                  is missing; raises when others may read
**                                  or write it (a token left 0644 is
**                                  refused, not used)
**
** SHA-256 follows FIPS 180-4.
*/
#include "lua.h"
#include "lauxlib.h"
#include "modules.h"

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
    {"read_file", l_read_file}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  return 1;
}
