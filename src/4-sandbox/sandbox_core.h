/*
** sandbox_core.h: the sandbox core's insides, shared by its files and the
** binding lsandbox.c (not for backends: their contract is sandbox.h).
**   sandbox.c          lifecycle: registry, objects, calls into backends
**   sandbox_result.c   errors, the exec result, listings, JSON
**   sandbox_options.c  defaults, checks, backend options, the create spec
**   sandbox_policy.c   the network policy and its stamp
**   sandbox_claim.c    owner and holder marks (attach, release)
**   sandbox_path.c     lexical paths (sandbox_path.h)
** Dependencies point down that list's reverse: claim -> lifecycle ->
** options -> policy -> result.
*/
#ifndef lash_sandbox_core_h
#define lash_sandbox_core_h

#include "sandbox.h"

#define LASH_SB_MT "lash.sandbox"

/* ---- lifecycle (sandbox.c) ------------------------------------------- */

enum { LASH_SB_MODE_OWNED, LASH_SB_MODE_ATTACHED, LASH_SB_MODE_SESSION };
extern const char *const lash_sandbox_mode_names[];

/* A sandbox object; uservalue 1 is {id =, backend =, cfg =, fns =}. */
typedef struct lash_sandbox_obj {
  int closed;
  int mode;
  int owns;        /* close() destroys it */
} lash_sandbox_obj;

/* Registry: put the C backend b in it; register_lua is
** lash.sandbox.register_backend(name, t) on the stack (1, 2); push_backend
** pushes the fns table of name or raises naming the known ones;
** backend_names pushes their sorted list (returns 1). */
void lash_sandbox_register_c(lua_State *L, const lash_sandbox_backend *b);
int  lash_sandbox_register_lua(lua_State *L);
void lash_sandbox_push_backend(lua_State *L, const char *name);
int  lash_sandbox_backend_names(lua_State *L);

lash_sandbox_obj *lash_sandbox_checkobj(lua_State *L, int idx);
lash_sandbox_obj *lash_sandbox_checkopen(lua_State *L, int idx);   /* not closed */
/* Push field of the object's uservalue; returns its type. */
int  lash_sandbox_field(lua_State *L, int idx, const char *field);
/* Push the slot function of the object at idx, or raise. */
void lash_sandbox_push_slot(lua_State *L, int idx, const char *slot);
int  lash_sandbox_has_slot(lua_State *L, int idx, const char *slot);
/* Push the slot of the object at 1, then cfg and id: its call begun. */
void lash_sandbox_push_call(lua_State *L, const char *slot);
/* Raise "unsupported" ("the <backend> backend cannot <cannot>") unless the
** backend of the object at 1 has slot. */
void lash_sandbox_need_slot(lua_State *L, const char *slot, const char *cannot);
/* Call slot of the object at 1 with (cfg, id, <the nargs values on top>);
** k returns its results (ctx = the base below them). */
int  lash_sandbox_call(lua_State *L, const char *slot, int nargs, lua_KFunction k);
int  lash_sandbox_finish_k(lua_State *L, int status, lua_KContext ctx);  /* all results */
int  lash_sandbox_true_k(lua_State *L, int status, lua_KContext ctx);    /* true */

/* create{spec} at 1 in mode; wrap the id at idx with the options at opts
** (0: none); backend_call runs a module-level slot (list, gc, probe) with
** the options at 1. Each returns its results. */
int  lash_sandbox_create(lua_State *L, int mode, const char *context);
int  lash_sandbox_wrap(lua_State *L, int idx, int opts, int mode,
                       const char *context);
int  lash_sandbox_backend_call(lua_State *L, const char *slot, const char *what);
/* The same with one argument before the options: slot(cfg, arg) for the
** Lua call (arg, [opts]). */
int  lash_sandbox_backend_call_arg(lua_State *L, const char *slot, const char *what);
/* close (true, or nil and the error), __close (a failure only warns),
** __gc (warns about an owned sandbox never closed), detach (returns id). */
int  lash_sandbox_close(lua_State *L);
int  lash_sandbox_close_quiet(lua_State *L);
int  lash_sandbox_collect(lua_State *L);
int  lash_sandbox_detach(lua_State *L);

/* ---- results (sandbox_result.c) --------------------------------------- */

/* Continuations: check (and complete) exec's result table; sort list_dir's
** entries by name, in byte order. */
int  lash_sandbox_exec_k(lua_State *L, int status, lua_KContext ctx);
int  lash_sandbox_list_k(lua_State *L, int status, lua_KContext ctx);

/* ---- options (sandbox_options.c) -------------------------------------- */

extern const char *const lash_sandbox_opt_generic[];   /* creation settings */
enum { LASH_SB_OPT_CREATE, LASH_SB_OPT_EXISTING };

int  lash_sandbox_opt_in(const char *const *list, const char *s);
void lash_sandbox_opt_sort(const char **names, int n);
/* Push "a, b, c" from the names (sorted in place). */
void lash_sandbox_opt_push_names(lua_State *L, const char **names, int n);
/* Push the names of the set t.field as a sorted list. */
void lash_sandbox_opt_push_list(lua_State *L, int t, const char *field);
void lash_sandbox_opt_push_defaults(lua_State *L);

const char *lash_sandbox_opt_cstring(lua_State *L, int idx, const char *what);
const char *lash_sandbox_opt_path(lua_State *L, int idx);
void lash_sandbox_opt_identity(lua_State *L, int idx, const char *what);
lua_Integer lash_sandbox_opt_count(lua_State *L, int idx, const char *what);
/* Push a checked copy of the {string = string} table at idx (env: keys are
** variable names; user_tags: the lash_ prefix is refused). */
void lash_sandbox_opt_string_map(lua_State *L, int idx, const char *what,
                                 int env, int user_tags);
/* Check the options at opts (0: none) against the backend at fns for kind
** (LASH_SB_OPT_*), then push cfg: {backend = name, <config options>}. */
void lash_sandbox_opt_check(lua_State *L, int opts, int fns, int kind,
                            const char *context);
/* The backend named by the options at idx (0: none): default "local". */
const char *lash_sandbox_opt_backend(lua_State *L, int idx);
/* Push the normalized create spec (sandbox.h) from the user's at spec. */
void lash_sandbox_opt_spec(lua_State *L, int spec, int fns);
/* exec's (is_exec) or spawn's command at 2 and options at 3, checked and
** defaulted, left as arguments 2 and 3 of the backend's slot. */
void lash_sandbox_opt_command(lua_State *L, int is_exec);

/* ---- the network policy (sandbox_policy.c) ---------------------------- */

/* Push the normalized policy of the option at idx; push the lash_network
** stamp of the normalized policy at idx; push the policy of the stamp at
** idx, or nil when it is not one. */
void lash_sandbox_network_normalize(lua_State *L, int idx);
void lash_sandbox_network_encode(lua_State *L, int idx);
void lash_sandbox_network_decode(lua_State *L, int idx);

/* ---- claims (sandbox_claim.c) ------------------------------------------ */

/* The methods write_tags, attach and release on their arguments (1 self). */
int  lash_sandbox_claim_write_tags(lua_State *L);
int  lash_sandbox_claim_attach(lua_State *L);
int  lash_sandbox_claim_release(lua_State *L);
void lash_sandbox_claim_need_tags(lua_State *L);   /* raise unless taggable */

#endif
