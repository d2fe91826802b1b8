/*
** t.h: the tiny TAP-printing harness every C unit test uses.
** Each check prints "ok N - what" or "not ok N - what"; tests/run.sh counts
** them. T_DONE() returns the exit status (non-zero if anything failed).
*/
#ifndef lash_t_h
#define lash_t_h

#include <stdio.h>
#include <string.h>

static int t_count, t_failed;

#define T_OK(cond, ...) do {                                              \
    int t_c_ = !!(cond);                                                  \
    t_count++;                                                            \
    if (!t_c_) t_failed++;                                                \
    printf("%s %d - ", t_c_ ? "ok" : "not ok", t_count);                   \
    printf(__VA_ARGS__);                                                  \
    printf("\n");                                                         \
    if (!t_c_) printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
  } while (0)

#define T_EQ_INT(a, b, what) do {                                         \
    long long t_a_ = (long long)(a), t_b_ = (long long)(b);               \
    T_OK(t_a_ == t_b_, "%s", what);                                       \
    if (t_a_ != t_b_) printf("#   got %lld, want %lld\n", t_a_, t_b_);    \
  } while (0)

#define T_EQ_MEM(a, alen, b, blen, what) do {                             \
    size_t t_al_ = (alen), t_bl_ = (blen);                                \
    int t_eq_ = t_al_ == t_bl_ && memcmp((a), (b), t_al_) == 0;           \
    T_OK(t_eq_, "%s", what);                                              \
    if (!t_eq_) printf("#   got  [%.*s] (%zu)\n#   want [%.*s] (%zu)\n",   \
                       (int)t_al_, (const char *)(a), t_al_,              \
                       (int)t_bl_, (const char *)(b), t_bl_);             \
  } while (0)

#define T_EQ_STR(a, b, what) T_EQ_MEM((a), strlen(a), (b), strlen(b), what)

#define T_DONE() (printf("1..%d\n", t_count), t_failed ? 1 : 0)

#endif
