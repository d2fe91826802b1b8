/*
** curl_dl.c: the table of libcurl's entry points the lash CLI fills on
** first use (see curl_dl.h). Built into every lash object set; the table
** and the loader exist only with -DLASH_CURL_DLOPEN (the CLI's copy).
*/
#include <curl/curl.h>
#include "curl_dl.h"

#ifndef LASH_CURL_DLOPEN

int lash_curl_load(char *err, size_t errsz) {
  (void)err;
  (void)errsz;
  return 0;
}

#else

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Written once, under pthread_once, before any pointer is used. */
static lash_curl_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char dl_error[256];

/* RTLD_LAZY: a CLI process that makes one request calls a small part of
** libcurl and its libraries; their functions bind at first call instead
** of all at load. RTLD_LOCAL: nothing of them joins the global scope the
** rest of the process searches (libsqlite3, a spec's Lua C modules).
** RTLD_DEEPBIND: their symbols are looked up in their own scope first,
** before the CLI's large export table (11.4 M instructions to load
** instead of 13.9 M, callgrind); the sanitizers refuse it. */
#if defined(__SANITIZE_ADDRESS__)
#define LASH_CURL_DLFLAGS (RTLD_LAZY | RTLD_LOCAL)
#else
#define LASH_CURL_DLFLAGS (RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND)
#endif

static void load(void) {
  void *h = dlopen("libcurl.so.4", LASH_CURL_DLFLAGS);
  if (!h) {
    snprintf(dl_error, sizeof dl_error, "%s", dlerror());
    return;
  }
#define LASH_CURL_SYM(n)                                                \
  if (!(*(void **)&api.n = dlsym(h, "curl_" #n))) {                     \
    snprintf(dl_error, sizeof dl_error, "libcurl.so.4 has no curl_" #n); \
    return;                                                             \
  }
  LASH_CURL_FNS(LASH_CURL_SYM)
#undef LASH_CURL_SYM
}

int lash_curl_load(char *err, size_t errsz) {
  pthread_once(&once, load);
  if (!dl_error[0]) return 0;
  if (err && errsz)
    snprintf(err, errsz, "cannot load libcurl (%s); install it (Debian: libcurl4)", dl_error);
  return -1;
}

const lash_curl_api *lash_curl_fns(void) {
  char why[400];
  if (lash_curl_load(why, sizeof why) != 0) {
    /* reached only by a path that skipped lash_curl_load: what the
    ** dynamic linker did at start when libcurl was linked */
    fprintf(stderr, "lash: %s\n", why);
    exit(127);
  }
  return &api;
}

#endif
