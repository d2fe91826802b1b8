/*
** host.c: a small "engine" that embeds lash. A fixed 60 Hz frame loop
** prints a frame counter; two engine functions over an in-memory scene
** (spawn_entity, list_entities) are registered as tools; an agent (the
** offline scripted one in village.lua) builds a village through them while
** the frames keep ticking. A hook (lash_register_hook, before_tool_call)
** keeps every spawn inside the level: one asked for outside is moved to
** the edge, by editing the call's arguments before the tool sees them. spawn_entity is answered on the next frame, when
** the engine applies queued changes, as an engine would; list_entities at
** once. At the end it reports late frames: frames whose work (applying
** changes, lash_step, "rendering") took longer than one frame budget.
**
** usage: host [SPEC.lua] [--quiet] [--events FILE]   (default spec: village.lua)
** --events FILE writes every event, whole, one JSON line each (the console
** shows them cut to 160 characters).
** exit status: 0 when the agent answered, 1 otherwise.
*/
#define _GNU_SOURCE
#include "lash.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FRAME_NS 16666667ll       /* 60 Hz */
#define MAX_FRAMES 1800           /* give up after 30 s of frames */
#define MAX_ENTITIES 64
#define MAX_QUEUED 16

typedef struct entity {
  int id;
  char kind[16];
  double x, y;
} entity;

typedef struct spawn_cmd {
  lash_Call *call;                /* answered when the command is applied */
  char kind[16];
  double x, y;
} spawn_cmd;

typedef struct scene {
  entity e[MAX_ENTITIES];
  int n, next_id;
  spawn_cmd queue[MAX_QUEUED];    /* applied at the start of the next frame */
  int nqueue;
} scene;

static int quiet;
static FILE *events_log;   /* --events FILE, or NULL */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* A tiny reader for the flat argument objects our schemas allow. */
static int arg_str(const char *json, const char *key, char *out, size_t n) {
  char pat[32];
  const char *p, *q;
  snprintf(pat, sizeof pat, "\"%s\":\"", key);
  if (!(p = strstr(json, pat))) return 0;
  p += strlen(pat);
  if (!(q = strchr(p, '"')) || (size_t)(q - p) >= n) return 0;
  memcpy(out, p, (size_t)(q - p));
  out[q - p] = '\0';
  return 1;
}

static int arg_num(const char *json, const char *key, double *out) {
  char pat[32];
  const char *p;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  if (!(p = strstr(json, pat))) return 0;
  *out = strtod(p + strlen(pat), NULL);
  return 1;
}

/* ---- the tools ------------------------------------------------------------ */

static const char SPAWN_SCHEMA[] =
  "{\"type\":\"object\",\"properties\":{"
  "\"kind\":{\"type\":\"string\",\"enum\":[\"house\",\"tree\",\"rock\"]},"
  "\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},"
  "\"required\":[\"kind\",\"x\",\"y\"]}";

/* Queue the spawn; the frame loop applies it (and answers) next frame. */
static void spawn_entity(lash_Call *call, const char *args, void *ud) {
  scene *sc = ud;
  spawn_cmd *cmd;
  if (sc->nqueue == MAX_QUEUED || sc->n + sc->nqueue >= MAX_ENTITIES) {
    lash_call_retry(call, "The scene is full; spawn nothing more.");
    return;
  }
  cmd = &sc->queue[sc->nqueue++];
  cmd->call = call;
  if (!arg_str(args, "kind", cmd->kind, sizeof cmd->kind)) strcpy(cmd->kind, "?");
  arg_num(args, "x", &cmd->x);
  arg_num(args, "y", &cmd->y);
}

static void apply_queued(scene *sc) {
  char msg[128];
  for (int i = 0; i < sc->nqueue; i++) {
    spawn_cmd *cmd = &sc->queue[i];
    entity *e;
    /* The run may have been cancelled meanwhile: then drop the change. */
    if (lash_call_status(cmd->call) != LASH_CALL_PENDING) continue;
    e = &sc->e[sc->n++];
    e->id = ++sc->next_id;
    snprintf(e->kind, sizeof e->kind, "%s", cmd->kind);
    e->x = cmd->x;
    e->y = cmd->y;
    snprintf(msg, sizeof msg, "spawned %s #%d at (%g, %g)", e->kind, e->id, e->x, e->y);
    lash_call_return(cmd->call, msg);
  }
  sc->nqueue = 0;
}

/* Answered at once: a JSON list of the entities. */
static void list_entities(lash_Call *call, const char *args, void *ud) {
  scene *sc = ud;
  char buf[4096];
  size_t len = 0;
  (void)args;
  len += (size_t)snprintf(buf + len, sizeof buf - len, "[");
  for (int i = 0; i < sc->n && len < sizeof buf - 80; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len,
                            "%s{\"id\":%d,\"kind\":\"%s\",\"x\":%g,\"y\":%g}",
                            i ? "," : "", sc->e[i].id, sc->e[i].kind,
                            sc->e[i].x, sc->e[i].y);
  snprintf(buf + len, sizeof buf - len, "]");
  lash_call_return(call, buf);
}

/* ---- a hook: the level's bounds ------------------------------------------ */

#define LEVEL_MIN 0.0
#define LEVEL_MAX 10.0

static double clamp(double v) {
  return v < LEVEL_MIN ? LEVEL_MIN : v > LEVEL_MAX ? LEVEL_MAX : v;
}

/* Every tool call passes here before it runs. A spawn outside the level is
** moved to its edge: the answer edits the call's arguments. Anything else
** goes through unchanged (NULL). The answer could also refuse the call
** ("\"message for the model\"") or come frames later. */
static void keep_in_level(lash_Call *call, const char *payload, void *ud) {
  char kind[16] = "?", edit[160];
  double x = 0, y = 0;
  (void)ud;
  if (!strstr(payload, "\"name\":\"spawn_entity\"") || !arg_num(payload, "x", &x) ||
      !arg_num(payload, "y", &y) || (clamp(x) == x && clamp(y) == y)) {
    lash_call_return(call, NULL);
    return;
  }
  arg_str(payload, "kind", kind, sizeof kind);
  snprintf(edit, sizeof edit, "{\"args\":{\"kind\":\"%s\",\"x\":%g,\"y\":%g}}", kind, clamp(x), clamp(y));
  lash_call_return(call, edit);
}

/* ---- events ----------------------------------------------------------- */

static void on_event(lash_Run *run, const char *json, void *ud) {
  const char *frame = ud;
  (void)run;
  if (events_log) fprintf(events_log, "%s\n", json);
  /* Show what the agent does; text_delta and usage are noise here. */
  if (quiet || strstr(json, "\"type\":\"text_delta\"") || strstr(json, "\"type\":\"usage\""))
    return;
  printf("  [agent, frame %s] %.160s%s\n", frame, json, strlen(json) > 160 ? "..." : "");
}

/* ---- the frame loop --------------------------------------------------- */

int main(int argc, char **argv) {
  const char *spec = "village.lua";
  static scene sc;
  char frame_label[16] = "0";
  lash_State *S;
  lash_Run *run;
  const char *output = NULL;
  int64_t tick, worst_step = 0, worst_work = 0;
  int frame, late = 0, missed = 0, ended_at = -1, status, i;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else if (strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      if (!(events_log = fopen(argv[++i], "w"))) {
        fprintf(stderr, "host: cannot write %s: %s\n", argv[i], strerror(errno));
        return 2;
      }
    } else spec = argv[i];
  }
  S = lash_open(NULL);
  if (!S) {
    fprintf(stderr, "host: out of memory\n");
    return 1;
  }
  if (lash_load_spec_file(S, spec) != LASH_OK ||
      lash_register_tool(S, "spawn_entity", "Spawn an entity in the scene.",
                         SPAWN_SCHEMA, spawn_entity, &sc) != LASH_OK ||
      lash_register_tool(S, "list_entities", "List the entities in the scene.",
                         NULL, list_entities, &sc) != LASH_OK ||
      lash_register_hook(S, "before_tool_call", keep_in_level, NULL) != LASH_OK ||
      lash_set_value(S, "level", "Green Hills") != LASH_OK ||
      lash_set_event_handler(S, on_event, frame_label) != LASH_OK ||
      lash_run_start(S, "Build a small village.", NULL, &run) != LASH_OK) {
    fprintf(stderr, "host: %s\n", lash_errmsg(S));
    lash_close(S);
    return 1;
  }

  tick = now_ns();
  for (frame = 1; frame <= MAX_FRAMES; frame++) {
    int64_t start = now_ns(), t0, t1, work;
    struct timespec next;
    snprintf(frame_label, sizeof frame_label, "%d", frame);
    if (start - tick > FRAME_NS) missed++;   /* the OS woke us late */
    /* update: apply the changes the agent asked for last frame */
    apply_queued(&sc);
    /* the agent's share of the frame: about a millisecond */
    t0 = now_ns();
    if (lash_step(S, 1) < 0) {
      fprintf(stderr, "host: lash_step: %s\n", lash_errmsg(S));
      break;
    }
    t1 = now_ns();
    if (t1 - t0 > worst_step) worst_step = t1 - t0;
    /* "render" */
    if (!quiet) printf("frame %4d  entities %d\n", frame, sc.n);
    work = now_ns() - start;
    if (work > worst_work) worst_work = work;
    if (work > FRAME_NS) late++;
    if (ended_at < 0 && lash_run_status(run) >= LASH_RUN_DONE) ended_at = frame;
    if (ended_at > 0 && frame >= ended_at + 5) break;
    /* sleep until the next tick */
    tick += FRAME_NS;
    next.tv_sec = (time_t)(tick / 1000000000ll);
    next.tv_nsec = (long)(tick % 1000000000ll);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }

  status = lash_run_status(run);
  lash_run_result(run, &output, NULL);
  printf("\nagent: %s\n", status == LASH_RUN_DONE && output ? output : "(no answer)");
  printf("scene: %d entities\n", sc.n);
  printf("frames: %d, agent finished at frame %d\n", frame > MAX_FRAMES ? MAX_FRAMES : frame, ended_at);
  printf("late frames: %d (work over one %.1f ms budget; worst frame %.2f ms, "
         "worst lash_step %.2f ms; ticks the OS woke late: %d)\n",
         late, FRAME_NS / 1e6, worst_work / 1e6, worst_step / 1e6, missed);
  lash_run_free(run);
  lash_close(S);
  if (events_log) fclose(events_log);
  return status == LASH_RUN_DONE && output ? 0 : 1;
}
