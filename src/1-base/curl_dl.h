/*
** curl_dl.h: libcurl loaded on first use, for the lash CLI (its objects
** that call libcurl are built with -DLASH_CURL_DLOPEN; the libraries link
** libcurl as usual and this header changes nothing for them). libcurl
** brings about twenty shared libraries (TLS, HTTP/2, Kerberos, LDAP, ...)
** whose relocations and initialisers were two thirds of every CLI start,
** also of the commands that never make a request (`lash sandbox exec`,
** `lash eval`). Included by loop.h after curl/curl.h: each curl_* that
** lash calls becomes a pointer of one table (curl_dl.c), filled once.
** lash_curl_load is called where a use of libcurl begins (the loop's
** first transfer, an HTTP or gRPC context) and fails with a message; any
** other call before it loads the library too, or ends the process with
** that message, as the dynamic linker did when libcurl was linked.
*/
#ifndef lash_curl_dl_h
#define lash_curl_dl_h

#include <stddef.h>

/* 0, or -1 with why (naming the package) in err. Idempotent, thread-safe.
** Without LASH_CURL_DLOPEN always 0. */
int lash_curl_load(char *err, size_t errsz);

#ifdef LASH_CURL_DLOPEN

#define LASH_CURL_FNS(X) \
  X(global_init) X(global_cleanup) X(version_info) \
  X(easy_init) X(easy_cleanup) X(easy_reset) X(easy_setopt) \
  X(easy_getinfo) X(easy_pause) X(easy_strerror) X(free) \
  X(multi_init) X(multi_cleanup) X(multi_setopt) X(multi_add_handle) \
  X(multi_remove_handle) X(multi_assign) X(multi_info_read) \
  X(multi_socket_action) \
  X(share_init) X(share_cleanup) X(share_setopt) \
  X(slist_append) X(slist_free_all) \
  X(url) X(url_cleanup) X(url_get) X(url_set) X(url_strerror)

typedef struct lash_curl_api {
#define LASH_CURL_FIELD(n) __typeof__(curl_##n) *n;
  LASH_CURL_FNS(LASH_CURL_FIELD)
#undef LASH_CURL_FIELD
} lash_curl_api;

/* The table, loading libcurl first if needed (see the top comment). */
const lash_curl_api *lash_curl_fns(void);

/* curl/curl.h makes some of these type-checking macros under GCC. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#undef curl_share_setopt

#define curl_global_init (lash_curl_fns()->global_init)
#define curl_global_cleanup (lash_curl_fns()->global_cleanup)
#define curl_version_info (lash_curl_fns()->version_info)
#define curl_easy_init (lash_curl_fns()->easy_init)
#define curl_easy_cleanup (lash_curl_fns()->easy_cleanup)
#define curl_easy_reset (lash_curl_fns()->easy_reset)
#define curl_easy_setopt (lash_curl_fns()->easy_setopt)
#define curl_easy_getinfo (lash_curl_fns()->easy_getinfo)
#define curl_easy_pause (lash_curl_fns()->easy_pause)
#define curl_easy_strerror (lash_curl_fns()->easy_strerror)
#define curl_free (lash_curl_fns()->free)
#define curl_multi_init (lash_curl_fns()->multi_init)
#define curl_multi_cleanup (lash_curl_fns()->multi_cleanup)
#define curl_multi_setopt (lash_curl_fns()->multi_setopt)
#define curl_multi_add_handle (lash_curl_fns()->multi_add_handle)
#define curl_multi_remove_handle (lash_curl_fns()->multi_remove_handle)
#define curl_multi_assign (lash_curl_fns()->multi_assign)
#define curl_multi_info_read (lash_curl_fns()->multi_info_read)
#define curl_multi_socket_action (lash_curl_fns()->multi_socket_action)
#define curl_share_init (lash_curl_fns()->share_init)
#define curl_share_cleanup (lash_curl_fns()->share_cleanup)
#define curl_share_setopt (lash_curl_fns()->share_setopt)
#define curl_slist_append (lash_curl_fns()->slist_append)
#define curl_slist_free_all (lash_curl_fns()->slist_free_all)
#define curl_url (lash_curl_fns()->url)
#define curl_url_cleanup (lash_curl_fns()->url_cleanup)
#define curl_url_get (lash_curl_fns()->url_get)
#define curl_url_set (lash_curl_fns()->url_set)
#define curl_url_strerror (lash_curl_fns()->url_strerror)

#endif
#endif
