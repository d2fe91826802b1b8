/*
** test_base64.c: the one base64 decoder (src/1-base/base64.c): both
** alphabets, padding, strict and lenient input, and the output bound.
*/
#include <stdint.h>

#include "base64.h"
#include "t.h"

#define DEC(lit, out, cap, lenient) \
  lash_base64_decode((lit), sizeof(lit) - 1, (out), (cap), (lenient))

int main(void) {
  uint8_t out[64];
  long n;
  n = DEC("aGVsbG8gd29ybGQ=", out, sizeof out, 0);
  T_EQ_MEM(out, n < 0 ? 0 : (size_t)n, "hello world", 11, "standard alphabet, padded");
  T_EQ_INT(DEC("aGVsbG8gd29ybGQ", out, sizeof out, 0), 11, "padding is optional");
  n = DEC("-_-_", out, sizeof out, 0);
  T_OK(n == 3 && out[0] == 0xfb && out[1] == 0xff && out[2] == 0xbf, "URL-safe alphabet (- and _)");
  n = DEC("+/+/", out, sizeof out, 0);
  T_OK(n == 3 && out[0] == 0xfb && out[1] == 0xff && out[2] == 0xbf, "standard alphabet (+ and /) decodes alike");
  T_EQ_INT(DEC("aGVs\nbG8=", out, sizeof out, 0), -1, "strict: a line break inside is an error");
  n = DEC("aGVs\nbG8=\n", out, sizeof out, 1);
  T_EQ_MEM(out, n < 0 ? 0 : (size_t)n, "hello", 5, "lenient: line breaks are skipped (a PEM body)");
  T_EQ_INT(DEC("aGVsbG8*", out, sizeof out, 0), -1, "strict: a character outside the alphabet is an error");
  T_EQ_INT(DEC("aGVsbG8gd29ybGQ=", out, 4, 0), -1, "output past cap is refused, not written");
  T_EQ_INT(DEC("", out, sizeof out, 0), 0, "empty input: nothing");
  T_EQ_INT(DEC("====  \n", out, sizeof out, 0), 0, "padding and trailing whitespace only: nothing");
  printf("1..%d\n", t_count);
  return t_failed != 0;
}
