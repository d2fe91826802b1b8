/*
** lsqlite.c: lash.sqlite, the small SQLite binding lash's own stores use
** (saved conversations). It offers what a store needs and no more: open
** a file in WAL mode with a busy timeout, run SQL, prepared statements
** with positional binds, and close. Transactions are SQL ("BEGIN
** IMMEDIATE" ... "COMMIT") run through exec.
**
** Two userdata types, one metatable each: a database and a statement.
** Both have idempotent __gc/__close and :close(); using a closed one
** raises. A statement keeps its database alive (user value), and closing
** the database finalizes every statement it still has, which then count
** as closed.
**
** Runtime failures return nil, message, code, where code is SQLite's
** primary result name in lower case ("busy", "corrupt", "notadb",
** "readonly", "constraint", ...), so callers can say what to do.
** Misuse (a closed handle, a bad argument) raises.
** Prefix: lash_open_sqlite, the rest static (l_*).
*/
#include "lua.h"
#include "lauxlib.h"
#include "laux.h"
#include "modules.h"

#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

#include "lsqlite_dl.h"

#define DB_MT "lash.sqlite.db"
#define STMT_MT "lash.sqlite.stmt"

typedef struct ldb {
  sqlite3 *db;        /* NULL once closed */
  int keep_wal;       /* close skips the checkpoint while the WAL is small */
} ldb;

/* Below this the WAL is left for the next process to read back (its
** recovery reads the whole file: ~1 M instructions per MiB); above it the
** closing connection checkpoints, paying the two fsyncs once for many
** short runs. */
#define KEEP_WAL_BYTES (256 * 1024)

typedef struct lstmt {
  sqlite3_stmt *st;   /* NULL once finalized */
  ldb *owner;         /* kept alive by the user value */
} lstmt;

static const char *code_name(int rc) {
  switch (rc & 0xff) {
    case SQLITE_ERROR: return "error";
    case SQLITE_INTERNAL: return "internal";
    case SQLITE_PERM: return "perm";
    case SQLITE_ABORT: return "abort";
    case SQLITE_BUSY: return "busy";
    case SQLITE_LOCKED: return "locked";
    case SQLITE_NOMEM: return "nomem";
    case SQLITE_READONLY: return "readonly";
    case SQLITE_INTERRUPT: return "interrupt";
    case SQLITE_IOERR: return "ioerr";
    case SQLITE_CORRUPT: return "corrupt";
    case SQLITE_NOTFOUND: return "notfound";
    case SQLITE_FULL: return "full";
    case SQLITE_CANTOPEN: return "cantopen";
    case SQLITE_PROTOCOL: return "protocol";
    case SQLITE_SCHEMA: return "schema";
    case SQLITE_TOOBIG: return "toobig";
    case SQLITE_CONSTRAINT: return "constraint";
    case SQLITE_MISMATCH: return "mismatch";
    case SQLITE_MISUSE: return "misuse";
    case SQLITE_AUTH: return "auth";
    case SQLITE_RANGE: return "range";
    case SQLITE_NOTADB: return "notadb";
    default: return "error";
  }
}

/* nil, message, code */
static int fail(lua_State *L, sqlite3 *db, int rc) {
  lua_pushnil(L);
  lua_pushstring(L, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  lua_pushstring(L, code_name(rc));
  return 3;
}

static ldb *check_db(lua_State *L, int idx) {
  ldb *d = (ldb *)luaL_checkudata(L, idx, DB_MT);
  if (d->db == NULL) luaL_error(L, "attempt to use a closed sqlite database");
  return d;
}

static lstmt *check_stmt(lua_State *L, int idx) {
  lstmt *s = (lstmt *)luaL_checkudata(L, idx, STMT_MT);
  if (s->st == NULL) luaL_error(L, "attempt to use a closed sqlite statement");
  return s;
}

/*** lash.sqlite.open(path [, opts]) -> db | nil, message, code
** opts: busy_timeout (ms, default 5000), readonly (default false),
** wal (default true: journal_mode=WAL, synchronous=NORMAL). Foreign keys
** are on. The file is created when missing (unless readonly). */
static int l_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int busy = 5000, readonly = 0, wal = 1;
  static const char *const options[] = {"busy_timeout", "readonly", "wal", NULL};
  LASH_SQLITE_NEED(L);
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lashA_checkoptions(L, 2, "lash.sqlite.open", options);
    if (lua_getfield(L, 2, "busy_timeout") != LUA_TNIL) {
      lua_Integer ms = luaL_checkinteger(L, -1);
      luaL_argcheck(L, ms >= 0 && ms <= 3600000, 2, "busy_timeout must be 0..3600000 ms");
      busy = (int)ms;
    }
    if (lua_getfield(L, 2, "readonly") != LUA_TNIL) readonly = lua_toboolean(L, -1);
    if (lua_getfield(L, 2, "wal") != LUA_TNIL) wal = lua_toboolean(L, -1);
    lua_pop(L, 3);
  }
  ldb *d = (ldb *)lua_newuserdatauv(L, sizeof *d, 0);
  d->db = NULL;
  d->keep_wal = 0;
  luaL_setmetatable(L, DB_MT);
  int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
              | SQLITE_OPEN_NOMUTEX;
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, flags, NULL);
  if (rc != SQLITE_OK) {
    int r = fail(L, db, rc);
    sqlite3_close_v2(db);
    return r;
  }
  sqlite3_extended_result_codes(db, 0);
  sqlite3_busy_timeout(db, busy);
  /* no checkpoint when the last connection closes while the WAL is small
  ** (db_close): it would fsync the WAL and the database (milliseconds each,
  ** tens under load) at the end of every short-lived lash process, and the
  ** next write would sync the restarted WAL's header twice more. A WAL
  ** left behind is read back by the next open; committed transactions are
  ** in it, and the database stays consistent across a power cut */
  if (wal && !readonly &&
      sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL) == SQLITE_OK)
    d->keep_wal = 1;
  d->db = db;
  /* journal_mode reads the file: a file that is not a database fails here */
  const char *setup = wal ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
                          : "PRAGMA foreign_keys=ON;";
  if (readonly) setup = "PRAGMA foreign_keys=ON; PRAGMA schema_version;";
  rc = sqlite3_exec(db, setup, NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    int r = fail(L, db, rc);
    sqlite3_close_v2(db);
    d->db = NULL;
    return r;
  }
  return 1;
}

/*** db:exec(sql) -> true | nil, message, code: runs every statement in sql. */
static int db_exec(lua_State *L) {
  ldb *d = check_db(L, 1);
  const char *sql = luaL_checkstring(L, 2);
  int rc = sqlite3_exec(d->db, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fail(L, d->db, rc);
  lua_pushboolean(L, 1);
  return 1;
}

/*** db:prepare(sql) -> stmt | nil, message, code: one statement. */
static int db_prepare(lua_State *L) {
  ldb *d = check_db(L, 1);
  size_t n;
  const char *sql = luaL_checklstring(L, 2, &n);
  lstmt *s = (lstmt *)lua_newuserdatauv(L, sizeof *s, 1);
  s->st = NULL;
  s->owner = d;
  luaL_setmetatable(L, STMT_MT);
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  const char *tail = NULL;
  int rc = sqlite3_prepare_v2(d->db, sql, (int)n, &s->st, &tail);
  if (rc != SQLITE_OK) return fail(L, d->db, rc);
  if (s->st == NULL) return luaL_argerror(L, 2, "no SQL statement");
  if (tail && *tail) {
    while (*tail == ' ' || *tail == '\n' || *tail == '\t' || *tail == '\r' || *tail == ';') tail++;
    if (*tail) {
      sqlite3_finalize(s->st);
      s->st = NULL;
      return luaL_argerror(L, 2, "more than one SQL statement (use db:exec for scripts)");
    }
  }
  return 1;
}

static int db_changes(lua_State *L) {
  ldb *d = check_db(L, 1);
  lua_pushinteger(L, sqlite3_changes(d->db));
  return 1;
}

static int db_last_insert_rowid(lua_State *L) {
  ldb *d = check_db(L, 1);
  lua_pushinteger(L, (lua_Integer)sqlite3_last_insert_rowid(d->db));
  return 1;
}

/*** db:in_transaction() -> boolean */
static int db_in_transaction(lua_State *L) {
  ldb *d = check_db(L, 1);
  lua_pushboolean(L, !sqlite3_get_autocommit(d->db));
  return 1;
}

/* The one place a database is closed: statements first. Idempotent. */
static int db_close(lua_State *L) {
  ldb *d = (ldb *)luaL_checkudata(L, 1, DB_MT);
  if (d->db) {
    sqlite3_stmt *st;
    if (d->keep_wal) {
      const char *main_file = sqlite3_db_filename(d->db, "main");
      char wal[4096];
      struct stat sb;
      if (main_file && (size_t)snprintf(wal, sizeof wal, "%s-wal", main_file) < sizeof wal &&
          stat(wal, &sb) == 0 && sb.st_size > KEEP_WAL_BYTES)
        sqlite3_db_config(d->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, (int *)NULL);
    }
    while ((st = sqlite3_next_stmt(d->db, NULL)) != NULL) sqlite3_finalize(st);
    sqlite3_close_v2(d->db);
    d->db = NULL;
  }
  return 0;
}

static int db_isclosed(lua_State *L) {
  ldb *d = (ldb *)luaL_checkudata(L, 1, DB_MT);
  lua_pushboolean(L, d->db == NULL);
  return 1;
}

static int db_tostring(lua_State *L) {
  ldb *d = (ldb *)luaL_checkudata(L, 1, DB_MT);
  if (d->db) lua_pushfstring(L, "lash.sqlite.db (%s)", sqlite3_db_filename(d->db, "main"));
  else lua_pushliteral(L, "lash.sqlite.db (closed)");
  return 1;
}

/* A statement whose database was closed was finalized with it. */
static lstmt *live_stmt(lua_State *L, int idx) {
  lstmt *s = check_stmt(L, idx);
  if (s->owner->db == NULL) {
    s->st = NULL;
    luaL_error(L, "attempt to use a statement of a closed sqlite database");
  }
  return s;
}

/*** stmt:bind(...) -> stmt: positional values (nil, boolean, integer,
** number, string) replace the previous binds; the statement is reset. */
static int stmt_bind(lua_State *L) {
  lstmt *s = live_stmt(L, 1);
  int n = lua_gettop(L) - 1;
  int want = sqlite3_bind_parameter_count(s->st);
  if (n != want) return luaL_error(L, "the statement takes %d value(s), got %d", want, n);
  sqlite3_reset(s->st);
  sqlite3_clear_bindings(s->st);
  for (int i = 1; i <= n; i++) {
    int idx = i + 1, rc;
    switch (lua_type(L, idx)) {
      case LUA_TNIL: rc = sqlite3_bind_null(s->st, i); break;
      case LUA_TBOOLEAN: rc = sqlite3_bind_int(s->st, i, lua_toboolean(L, idx)); break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) rc = sqlite3_bind_int64(s->st, i, (sqlite3_int64)lua_tointeger(L, idx));
        else rc = sqlite3_bind_double(s->st, i, (double)lua_tonumber(L, idx));
        break;
      case LUA_TSTRING: {
        size_t len;
        const char *p = lua_tolstring(L, idx, &len);
        rc = sqlite3_bind_text64(s->st, i, p, (sqlite3_uint64)len, SQLITE_TRANSIENT, SQLITE_UTF8);
        break;
      }
      default:
        return luaL_argerror(L, idx, "a value to bind must be nil, a boolean, a number or a string");
    }
    if (rc != SQLITE_OK) return luaL_error(L, "bind %d: %s", i, sqlite3_errstr(rc));
  }
  lua_settop(L, 1);
  return 1;
}

static void push_column(lua_State *L, sqlite3_stmt *st, int i) {
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: lua_pushinteger(L, (lua_Integer)sqlite3_column_int64(st, i)); break;
    case SQLITE_FLOAT: lua_pushnumber(L, (lua_Number)sqlite3_column_double(st, i)); break;
    case SQLITE_NULL: lua_pushnil(L); break;
    default: {
      const void *p = sqlite3_column_blob(st, i);
      int n = sqlite3_column_bytes(st, i);
      lua_pushlstring(L, p ? (const char *)p : "", (size_t)n);
    }
  }
}

/*** stmt:step() -> row table (column name = value) | false when done |
** nil, message, code. */
static int stmt_step(lua_State *L) {
  lstmt *s = live_stmt(L, 1);
  int rc = sqlite3_step(s->st);
  if (rc == SQLITE_DONE) {
    sqlite3_reset(s->st);
    lua_pushboolean(L, 0);
    return 1;
  }
  if (rc != SQLITE_ROW) {
    sqlite3 *db = sqlite3_db_handle(s->st);
    int r = fail(L, db, rc);
    sqlite3_reset(s->st);
    return r;
  }
  int n = sqlite3_column_count(s->st);
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    push_column(L, s->st, i);
    lua_setfield(L, -2, sqlite3_column_name(s->st, i));
  }
  return 1;
}

static int stmt_reset(lua_State *L) {
  lstmt *s = live_stmt(L, 1);
  sqlite3_reset(s->st);
  lua_settop(L, 1);
  return 1;
}

/* The one place a statement is finalized. Idempotent; a statement of a
** closed database was finalized by db_close. */
static int stmt_close(lua_State *L) {
  lstmt *s = (lstmt *)luaL_checkudata(L, 1, STMT_MT);
  if (s->st) {
    if (s->owner->db) sqlite3_finalize(s->st);
    s->st = NULL;
  }
  return 0;
}

static int stmt_isclosed(lua_State *L) {
  lstmt *s = (lstmt *)luaL_checkudata(L, 1, STMT_MT);
  lua_pushboolean(L, s->st == NULL || s->owner->db == NULL);
  return 1;
}

static int l_version(lua_State *L) {
  LASH_SQLITE_NEED(L);
  lua_pushstring(L, sqlite3_libversion());
  return 1;
}

int lash_open_sqlite(lua_State *L) {
  static const luaL_Reg db_methods[] = {
    {"exec", db_exec}, {"prepare", db_prepare}, {"changes", db_changes},
    {"last_insert_rowid", db_last_insert_rowid}, {"in_transaction", db_in_transaction},
    {"close", db_close}, {"isclosed", db_isclosed}, {NULL, NULL}};
  static const luaL_Reg stmt_methods[] = {
    {"bind", stmt_bind}, {"step", stmt_step}, {"reset", stmt_reset},
    {"close", stmt_close}, {"isclosed", stmt_isclosed}, {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"open", l_open}, {"version", l_version}, {NULL, NULL}};
  if (luaL_newmetatable(L, DB_MT)) {
    luaL_newlib(L, db_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, db_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, db_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, db_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, STMT_MT)) {
    luaL_newlib(L, stmt_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, stmt_close);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, stmt_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
