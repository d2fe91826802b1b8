/*
** base64.c: base64 decoding (base64.h). One decoder for every reader of
** base64 in lash, so the alphabets and padding rules are settled once.
*/
#include "base64.h"

#include <ctype.h>

int lash_base64_value(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

long lash_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap,
                        int lenient) {
  uint32_t acc = 0;
  int bits = 0;
  size_t i, o = 0;
  while (n > 0 && (in[n - 1] == '=' || isspace((unsigned char)in[n - 1]))) n--;
  for (i = 0; i < n; i++) {
    int v = lash_base64_value((unsigned char)in[i]);
    if (v < 0) {
      if (lenient) continue;
      return -1;
    }
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o == cap) return -1;
      out[o++] = (uint8_t)(acc >> bits);
    }
  }
  return (long)o;
}
