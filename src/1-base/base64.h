/*
** base64.h: decoding base64 (RFC 4648), standard and URL-safe alphabets
** alike, for the places that read it: gRPC's status details, Modal's token
** payload, a PEM key's body. No Lua.
*/
#ifndef lash_base64_h
#define lash_base64_h

#include <stddef.h>
#include <stdint.h>

/* The 6-bit value of c in either alphabet, or -1. */
int lash_base64_value(int c);

/* Decode in[0..n) into out, which has room for cap bytes (n * 3 / 4 is
** always enough). Trailing '=' and whitespace are dropped. With lenient,
** any other character outside the alphabet (the line breaks of a PEM body)
** is skipped; without it, it is an error. Returns the bytes written, or -1
** on a bad character or when out is too small. */
long lash_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap,
                        int lenient);

#endif
