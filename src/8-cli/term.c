/*
** term.c: `host.term`, the terminal of the `lash` program, for `lash chat`.
**
** Lines are read on lash's loop, never by blocking it: term.read watches
** fd 0 with a lash_io and yields (in a task) or drives the loop in place
** (outside one) until a line is complete, so runs, spinners and timers go
** on while the user types. On a terminal the line is edited by libedit
** through its readline-compatible callback interface
** (rl_callback_handler_install / rl_callback_read_char: one character per
** readable event), with history kept in a file; otherwise stdin is read
** line by line as it arrives (scripts, pipes, files).
**
** While term.open is in force SIGINT belongs to the session, not to the
** shutdown path: main.c hands it here (cli_term_signal). It ends the line
** being read (term.read returns nil, "interrupt"), or the wait of
** term.wait_interrupt (how chat cancels a turn), or is kept for the next
** of them. SIGTERM and SIGHUP still stop lash; they also end a read.
**
** The readline layer of libedit is process-wide state (one terminal, one
** line), so one terminal per process, reached from libedit's line
** callback through `editing`. The program opens it once.
**
** libedit is loaded with dlopen when a chat opens the terminal, not linked:
** every other command runs exactly the process it ran before (libedit and
** its dependencies change the process's timing, which a race in killing a
** jail mid-setup turned out to notice), and without libedit.so.2 a chat
** still works, reading plain lines.
*/
#include "term.h"
#include "lauxlib.h"
#include "runtime.h"

#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>
#include <editline/readline.h>

#define TERM_MT "lash.cli.term"
#define READ_MT "lash.cli.read_op"
#define INTR_MT "lash.cli.intr_op"
#define LINE_LIMIT (1u << 20)   /* a plain input line longer than this is refused */

typedef struct read_op read_op;
typedef struct intr_op intr_op;

struct cli_term {
  cli_term **slot;        /* the program's pointer to us, cleared on close */
  lash_loop *loop;
  lash_io io;             /* fd 0, while a read is in flight */
  int open;               /* term.open in force: SIGINT is ours */
  int edit;               /* editing with libedit (stdin and stdout are terminals) */
  int edit_ready;         /* libedit initialised */
  char *history;          /* the history file, or NULL */
  char *last;             /* the last line added to the history */
  int interrupts;         /* SIGINTs nobody has taken yet */
  int typed;              /* the line being edited is not empty */
  read_op *reading;
  intr_op *waiting;
  char *buf;              /* plain reading: bytes read, not yet returned */
  size_t len, cap;
  int eof;
};

enum { R_PENDING, R_LINE, R_EOF, R_INTERRUPT, R_SIGNAL, R_ERROR };

struct read_op {
  lash_wait w;
  cli_term *t;
  int status;
  int had_text;           /* an interrupted line was not empty */
  char *line;             /* malloc'd; ours until pushed */
  size_t len;             /* its length (a plain line may hold NUL bytes) */
  const char *error;
};

struct intr_op {
  lash_wait w;
  cli_term *t;
};

/* libedit's line callback has no user data: the terminal being edited */
static cli_term *editing;

/* libedit's readline interface, loaded once (see the top); the types come
** from its header, whose declarations are never referenced directly */
static struct {
  void *lib;
  __typeof__(rl_callback_handler_install) *callback_handler_install;
  __typeof__(rl_callback_read_char) *callback_read_char;
  __typeof__(rl_callback_handler_remove) *callback_handler_remove;
  __typeof__(rl_insert_text) *insert_text;
  __typeof__(rl_forced_update_display) *forced_update_display;
  __typeof__(rl_initialize) *initialize;
  __typeof__(using_history) *using_history;
  __typeof__(stifle_history) *stifle_history;
  __typeof__(read_history) *read_history;
  __typeof__(write_history) *write_history;
  __typeof__(add_history) *add_history;
  __typeof__(rl_end) *end;
  __typeof__(rl_catch_signals) *catch_signals;
  __typeof__(rl_readline_name) *readline_name;
  __typeof__(rl_outstream) *outstream;
} ed;

/* Load libedit; NULL, or why not. */
static const char *edit_load(void) {
  void *lib;
  if (ed.lib) return NULL;
  lib = dlopen("libedit.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return dlerror();
#define SYM(field, name) \
  if (!(*(void **)&ed.field = dlsym(lib, name))) { dlclose(lib); return "libedit.so.2 lacks " name; }
  SYM(callback_handler_install, "rl_callback_handler_install")
  SYM(callback_read_char, "rl_callback_read_char")
  SYM(callback_handler_remove, "rl_callback_handler_remove")
  SYM(insert_text, "rl_insert_text")
  SYM(forced_update_display, "rl_forced_update_display")
  SYM(initialize, "rl_initialize")
  SYM(using_history, "using_history")
  SYM(stifle_history, "stifle_history")
  SYM(read_history, "read_history")
  SYM(write_history, "write_history")
  SYM(add_history, "add_history")
  SYM(end, "rl_end")
  SYM(catch_signals, "rl_catch_signals")
  SYM(readline_name, "rl_readline_name")
  SYM(outstream, "rl_outstream")
#undef SYM
  ed.lib = lib;
  return NULL;
}

static cli_term *check_term(lua_State *L) {
  cli_term *t = luaL_checkudata(L, lua_upvalueindex(1), TERM_MT);
  return t;
}

/* Stop what a read started (the fd watch, libedit's raw mode). */
static void read_detach(read_op *op) {
  cli_term *t = op->t;
  if (!t || t->reading != op) return;
  t->reading = NULL;
  if (t->io.active) lash_io_stop(t->loop, &t->io);
  if (t->edit) {
    ed.callback_handler_remove();
    editing = NULL;
  }
}

static void read_finish(read_op *op, int status) {
  if (op->status != R_PENDING) return;
  op->status = status;
  read_detach(op);
  lash_wait_done(&op->w);
}

static void on_line(char *line) {
  cli_term *t = editing;
  read_op *op = t ? t->reading : NULL;
  if (!op) {
    free(line);
    return;
  }
  op->line = line;
  op->len = line ? strlen(line) : 0;
  read_finish(op, line ? R_LINE : R_EOF);
}

/* Plain reading: finish op with the next line buffered, if there is one. */
static int take_line(cli_term *t, read_op *op) {
  char *nl = t->len ? memchr(t->buf, '\n', t->len) : NULL;
  size_t n;
  if (!nl && !t->eof) {
    if (t->len > LINE_LIMIT) {
      op->error = "an input line is longer than 1 MiB";
      t->len = 0;
      read_finish(op, R_ERROR);
      return 1;
    }
    return 0;
  }
  if (!nl && t->len == 0) {
    read_finish(op, R_EOF);
    return 1;
  }
  n = nl ? (size_t)(nl - t->buf) : t->len;
  op->line = malloc(n + 1);
  if (!op->line) {
    op->error = "out of memory";
    read_finish(op, R_ERROR);
    return 1;
  }
  memcpy(op->line, t->buf, n);
  op->line[n] = '\0';
  op->len = n > 0 && op->line[n - 1] == '\r' ? n - 1 : n;
  if (nl) n++;
  memmove(t->buf, t->buf + n, t->len - n);
  t->len -= n;
  read_finish(op, R_LINE);
  return 1;
}

/* Read what fd 0 has (one read: it was readable, or is a file). */
static void plain_read(cli_term *t) {
  char chunk[4096];
  ssize_t n = read(0, chunk, sizeof chunk);
  if (n == 0) {
    t->eof = 1;
  } else if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    t->eof = 1;
  } else {
    if (t->len + (size_t)n > t->cap) {
      size_t cap = t->cap ? t->cap * 2 : 8192;
      char *b;
      while (cap < t->len + (size_t)n) cap *= 2;
      b = realloc(t->buf, cap);
      if (!b) {
        t->eof = 1;
        return;
      }
      t->buf = b;
      t->cap = cap;
    }
    memcpy(t->buf + t->len, chunk, (size_t)n);
    t->len += (size_t)n;
  }
}

static void on_stdin(lash_loop *loop, lash_io *io, unsigned events) {
  cli_term *t = io->data;
  (void)loop;
  if (!t->reading) return;
  if (t->edit) {
    if ((events & LASH_HUP) && !(events & LASH_READ)) {
      read_finish(t->reading, R_EOF);
      return;
    }
    ed.callback_read_char();
    /* rl_end is only kept up to date by rl_callback_read_char */
    t->typed = *ed.end > 0;
    return;
  }
  plain_read(t);
  take_line(t, t->reading);
}

static void read_cancel(lash_wait *w) {
  read_detach((read_op *)w);
}

static int read_gc(lua_State *L) {
  read_op *op = lua_touserdata(L, 1);
  read_detach(op);
  free(op->line);
  op->line = NULL;
  return 0;
}

static int read_k(lua_State *L, int status, lua_KContext ctx) {
  read_op *op = (read_op *)ctx;
  (void)status;
  read_detach(op);
  lash_wait_check(L, &op->w);
  switch (op->status) {
    case R_LINE:
      lua_pushlstring(L, op->line, op->len);
      free(op->line);
      op->line = NULL;
      return 1;
    case R_EOF:
      luaL_pushfail(L);
      lua_pushliteral(L, "eof");
      return 2;
    case R_INTERRUPT:
      luaL_pushfail(L);
      lua_pushliteral(L, "interrupt");
      lua_pushboolean(L, op->had_text);
      return 3;
    case R_SIGNAL:
      luaL_pushfail(L);
      lua_pushliteral(L, "signal");
      return 2;
    default:
      luaL_pushfail(L);
      lua_pushstring(L, op->error ? op->error : "cannot read standard input");
      return 2;
  }
}

/*** term.read([prompt [, text]]) -> line | nil, "eof" | nil, "interrupt",
** had_text | nil, "signal" | nil, message. Edits the line on a terminal
** (text: what the line starts with); the prompt is written either way. */
static int l_read(lua_State *L) {
  cli_term *t = check_term(L);
  const char *prompt = luaL_optstring(L, 1, "");
  const char *text = luaL_optstring(L, 2, NULL);
  read_op *op;
  int rc;
  if (t->reading) return luaL_error(L, "term.read: another read is in flight");
  t->loop = lash_runtime_loop(L);
  op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, READ_MT);
  lash_wait_init(&op->w, read_cancel);
  op->t = t;
  t->reading = op;
  if (t->open && t->interrupts > 0) {
    t->interrupts--;
    read_finish(op, R_INTERRUPT);
    return lash_wait_yield(L, &op->w, (lua_KContext)op, read_k);
  }
  if (t->edit) {
    editing = t;
    t->typed = 0;
    ed.callback_handler_install(prompt, on_line);
    if (text && *text) {
      ed.insert_text(text);
      /* libedit redraws as if at the start of the line, where the prompt
      ** already is: go there so the prompt is drawn once */
      fputs("\r", *ed.outstream ? *ed.outstream : stdout);
      ed.forced_update_display();
      t->typed = 1;
    }
  } else {
    if (*prompt) {
      fputs(prompt, stdout);
      fflush(stdout);
    }
    if (take_line(t, op)) return lash_wait_yield(L, &op->w, (lua_KContext)op, read_k);
  }
  rc = lash_io_start(t->loop, &t->io, 0, LASH_READ, on_stdin, t);
  if (rc == -EPERM && !t->edit) {
    /* a regular file: epoll refuses it, and reading it never blocks */
    while (!take_line(t, op)) plain_read(t);
  } else if (rc != 0) {
    op->error = "cannot watch standard input";
    read_finish(op, R_ERROR);
  }
  return lash_wait_yield(L, &op->w, (lua_KContext)op, read_k);
}

static int mkdir_parents(const char *path) {
  char *p = strdup(path), *s;
  if (!p) return -1;
  for (s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      free(p);
      return -1;
    }
    *s = '/';
  }
  free(p);
  return 0;
}

/*** term.open{history = FILE, max = N} -> editing: SIGINT now goes to the
** session; on a terminal, libedit is set up and FILE's history loaded
** (its directories are made, mode 0700). Returns whether lines are edited. */
static int l_open(lua_State *L) {
  cli_term *t = check_term(L);
  const char *hist = NULL;
  lua_Integer max = 1000;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "history");
    hist = luaL_optstring(L, -1, NULL);
    lua_getfield(L, 1, "max");
    max = luaL_optinteger(L, -1, 1000);
    luaL_argcheck(L, max > 0 && max <= 1000000, 1, "max must be between 1 and 1000000");
  }
  t->open = 1;
  *t->slot = t;
  t->edit = isatty(0) && isatty(1);
  if (t->edit && !t->edit_ready) {
    const char *why = edit_load();
    if (why) {
      t->edit = 0;
      lua_pushboolean(L, 0);
      lua_pushfstring(L, "no line editing: cannot load libedit (%s)", why);
      return 2;
    }
  }
  if (!t->edit) {
    lua_pushboolean(L, 0);
    return 1;
  }
  free(t->history);
  t->history = hist ? strdup(hist) : NULL;
  if (!t->edit_ready) {
    /* multibyte input needs the user's character set; only LC_CTYPE, so
    ** numbers still print the C way */
    setlocale(LC_CTYPE, "");
    *ed.readline_name = "lash";
    /* no libedit signal handlers: the program reads its signals on the loop */
    *ed.catch_signals = 0;
    ed.initialize();
    ed.using_history();
    t->edit_ready = 1;
  }
  ed.stifle_history((int)max);
  if (t->history) {
    if (mkdir_parents(t->history) != 0) {
      lua_pushboolean(L, 1);
      lua_pushfstring(L, "cannot make the directory of %s: %s", t->history, strerror(errno));
      return 2;
    }
    ed.read_history(t->history);   /* a missing file is an empty history */
  }
  lua_pushboolean(L, 1);
  return 1;
}

/*** term.add_history(line) -> true | nil, message: remember an edited
** line (not a repeat of the last one) and save the history file (0600). */
static int l_add_history(lua_State *L) {
  cli_term *t = check_term(L);
  const char *line = luaL_checkstring(L, 1);
  if (!t->edit_ready || !*line || (t->last && strcmp(t->last, line) == 0)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  free(t->last);
  t->last = strdup(line);
  ed.add_history(line);
  if (t->history) {
    /* made 0600 as it is created (no moment readable by others); the
    ** chmod tightens an older one */
    mode_t old = umask(077);
    int rc = ed.write_history(t->history);
    umask(old);
    if (rc != 0) {
      luaL_pushfail(L);
      lua_pushfstring(L, "cannot save the history to %s: %s", t->history, strerror(rc > 0 ? rc : EIO));
      return 2;
    }
    chmod(t->history, 0600);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static void intr_cancel(lash_wait *w) {
  intr_op *op = (intr_op *)w;
  if (op->t && op->t->waiting == op) op->t->waiting = NULL;
  op->t = NULL;
}

static int intr_gc(lua_State *L) {
  intr_cancel(lua_touserdata(L, 1));
  return 0;
}

static int intr_k(lua_State *L, int status, lua_KContext ctx) {
  intr_op *op = (intr_op *)ctx;
  (void)status;
  intr_cancel(&op->w);
  lash_wait_check(L, &op->w);
  lua_pushboolean(L, 1);
  return 1;
}

/*** term.wait_interrupt() -> true: wait for the next SIGINT (one already
** caught and not taken returns at once). Only while term.open is in force. */
static int l_wait_interrupt(lua_State *L) {
  cli_term *t = check_term(L);
  intr_op *op;
  if (!t->open) return luaL_error(L, "term.wait_interrupt: the terminal is not open");
  if (t->waiting) return luaL_error(L, "term.wait_interrupt: another wait is in flight");
  op = lua_newuserdatauv(L, sizeof *op, 0);
  memset(op, 0, sizeof *op);
  luaL_setmetatable(L, INTR_MT);
  lash_wait_init(&op->w, intr_cancel);
  op->t = t;
  if (t->interrupts > 0) {
    t->interrupts--;
    lash_wait_done(&op->w);
  } else {
    t->waiting = op;
  }
  return lash_wait_yield(L, &op->w, (lua_KContext)op, intr_k);
}

/*** term.forget_interrupts(): drop the SIGINTs caught and not taken. */
static int l_forget_interrupts(lua_State *L) {
  check_term(L)->interrupts = 0;
  return 0;
}

static void term_close(cli_term *t) {
  if (t->reading) read_finish(t->reading, R_EOF);
  if (t->waiting) {
    intr_op *op = t->waiting;
    t->waiting = NULL;
    op->t = NULL;
  }
  t->open = 0;
  t->interrupts = 0;
  if (t->slot && *t->slot == t) *t->slot = NULL;
}

/*** term.close(): SIGINT stops lash again; idempotent. */
static int l_close(lua_State *L) {
  term_close(check_term(L));
  return 0;
}

/*** term.isatty() -> stdin is a terminal, stdout is a terminal. */
static int l_isatty(lua_State *L) {
  (void)L;
  lua_pushboolean(L, isatty(0));
  lua_pushboolean(L, isatty(1));
  return 2;
}

static int term_gc(lua_State *L) {
  cli_term *t = lua_touserdata(L, 1);
  term_close(t);
  free(t->history);
  free(t->last);
  free(t->buf);
  t->history = t->last = t->buf = NULL;
  return 0;
}

int cli_term_signal(cli_term *t, int signo) {
  if (!t || !t->open) return 0;
  if (signo != SIGINT) {
    if (t->reading) read_finish(t->reading, R_SIGNAL);
    return 0;
  }
  if (t->reading) {
    read_op *op = t->reading;
    if (t->edit) {
      op->had_text = t->typed;
      fputs("^C\n", stdout);
      fflush(stdout);
    }
    read_finish(op, R_INTERRUPT);
  } else if (t->waiting) {
    intr_op *op = t->waiting;
    t->waiting = NULL;
    lash_wait_done(&op->w);
  } else {
    t->interrupts++;
  }
  return 1;
}

static void new_meta(lua_State *L, const char *name, lua_CFunction gc) {
  if (luaL_newmetatable(L, name)) {
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
}

void cli_term_push(lua_State *L, cli_term **slot) {
  static const luaL_Reg funcs[] = {
    {"open", l_open}, {"read", l_read}, {"add_history", l_add_history},
    {"wait_interrupt", l_wait_interrupt}, {"forget_interrupts", l_forget_interrupts},
    {"close", l_close}, {"isatty", l_isatty}, {NULL, NULL}};
  cli_term *t;
  new_meta(L, READ_MT, read_gc);
  new_meta(L, INTR_MT, intr_gc);
  lua_newtable(L);
  t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t);
  t->slot = slot;
  t->io.fd = -1;
  if (luaL_newmetatable(L, TERM_MT)) {
    lua_pushcfunction(L, term_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  luaL_setfuncs(L, funcs, 1);
}
