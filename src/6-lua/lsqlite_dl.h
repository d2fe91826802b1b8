/*
** lsqlite_dl.h: libsqlite3 loaded on first use, for the lash CLI (built
** with -DLASH_SQLITE_DLOPEN; the libraries link it as usual). A run that
** saves nothing never maps libsqlite3, and the libraries it would add to
** the global scope do not slow every other symbol lookup at start-up
** (issue 15's cold start). Only lsqlite.c includes it, after sqlite3.h:
** each sqlite3_* it calls becomes a pointer of one table, filled once by
** the first lash.sqlite.open or .version; every other entry point needs
** a database those made.
*/
#ifndef LASH_LSQLITE_DL_H
#define LASH_LSQLITE_DL_H

#ifdef LASH_SQLITE_DLOPEN
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define LASH_SQLITE_FNS(X) \
  X(open_v2) \
  X(close_v2) \
  X(exec) \
  X(errstr) \
  X(errmsg) \
  X(step) \
  X(prepare_v2) \
  X(reset) \
  X(finalize) \
  X(next_stmt) \
  X(libversion) \
  X(last_insert_rowid) \
  X(get_autocommit) \
  X(extended_result_codes) \
  X(db_handle) \
  X(db_filename) \
  X(column_type) \
  X(column_name) \
  X(column_int64) \
  X(column_double) \
  X(column_count) \
  X(column_bytes) \
  X(column_blob) \
  X(clear_bindings) \
  X(changes) \
  X(busy_timeout) \
  X(db_config) \
  X(bind_text64) \
  X(bind_parameter_count) \
  X(bind_null) \
  X(bind_int64) \
  X(bind_int) \
  X(bind_double) \

static struct sqlite_api {
#define LASH_SQLITE_FIELD(n) __typeof__(sqlite3_##n) *n;
  LASH_SQLITE_FNS(LASH_SQLITE_FIELD)
#undef LASH_SQLITE_FIELD
} sqlite_api;

/* Written once, under pthread_once, before any pointer is used. */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static char sqlite_dl_error[256];

/* RTLD_DEEPBIND: the library's many calls to its own exported functions
** bind to it at once instead of after a search of every library of the
** process (3.4 M instructions against 0.95 M); the sanitizers refuse it. */
#if defined(__SANITIZE_ADDRESS__)
#define LASH_SQLITE_DLFLAGS (RTLD_NOW | RTLD_LOCAL)
#else
#define LASH_SQLITE_DLFLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)
#endif

static void sqlite_dl_load(void) {
  void *h = dlopen("libsqlite3.so.0", LASH_SQLITE_DLFLAGS);
  if (!h) {
    snprintf(sqlite_dl_error, sizeof sqlite_dl_error, "%s", dlerror());
    return;
  }
#define LASH_SQLITE_SYM(n)                                              \
  if (!(*(void **)&sqlite_api.n = dlsym(h, "sqlite3_" #n))) {           \
    snprintf(sqlite_dl_error, sizeof sqlite_dl_error,                    \
             "libsqlite3.so.0 has no sqlite3_" #n);                      \
    return;                                                              \
  }
  LASH_SQLITE_FNS(LASH_SQLITE_SYM)
#undef LASH_SQLITE_SYM
}

/* Raise when libsqlite3 cannot be loaded (a missing package). */
static void sqlite_dl_need(lua_State *L) {
  pthread_once(&sqlite_once, sqlite_dl_load);
  if (sqlite_dl_error[0])
    luaL_error(L, "lash.sqlite: cannot load libsqlite3 (%s); install it "
               "(Debian: libsqlite3-0), or run lash run with --no-save", sqlite_dl_error);
}

#define sqlite3_open_v2 (sqlite_api.open_v2)
#define sqlite3_close_v2 (sqlite_api.close_v2)
#define sqlite3_exec (sqlite_api.exec)
#define sqlite3_db_config (sqlite_api.db_config)
#define sqlite3_errstr (sqlite_api.errstr)
#define sqlite3_errmsg (sqlite_api.errmsg)
#define sqlite3_step (sqlite_api.step)
#define sqlite3_prepare_v2 (sqlite_api.prepare_v2)
#define sqlite3_reset (sqlite_api.reset)
#define sqlite3_finalize (sqlite_api.finalize)
#define sqlite3_next_stmt (sqlite_api.next_stmt)
#define sqlite3_libversion (sqlite_api.libversion)
#define sqlite3_last_insert_rowid (sqlite_api.last_insert_rowid)
#define sqlite3_get_autocommit (sqlite_api.get_autocommit)
#define sqlite3_extended_result_codes (sqlite_api.extended_result_codes)
#define sqlite3_db_handle (sqlite_api.db_handle)
#define sqlite3_db_filename (sqlite_api.db_filename)
#define sqlite3_column_type (sqlite_api.column_type)
#define sqlite3_column_name (sqlite_api.column_name)
#define sqlite3_column_int64 (sqlite_api.column_int64)
#define sqlite3_column_double (sqlite_api.column_double)
#define sqlite3_column_count (sqlite_api.column_count)
#define sqlite3_column_bytes (sqlite_api.column_bytes)
#define sqlite3_column_blob (sqlite_api.column_blob)
#define sqlite3_clear_bindings (sqlite_api.clear_bindings)
#define sqlite3_changes (sqlite_api.changes)
#define sqlite3_busy_timeout (sqlite_api.busy_timeout)
#define sqlite3_bind_text64 (sqlite_api.bind_text64)
#define sqlite3_bind_parameter_count (sqlite_api.bind_parameter_count)
#define sqlite3_bind_null (sqlite_api.bind_null)
#define sqlite3_bind_int64 (sqlite_api.bind_int64)
#define sqlite3_bind_int (sqlite_api.bind_int)
#define sqlite3_bind_double (sqlite_api.bind_double)

#define LASH_SQLITE_NEED(L) sqlite_dl_need(L)
#else
#define LASH_SQLITE_NEED(L) ((void)(L))
#endif

#endif
