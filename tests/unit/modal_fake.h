/*
** modal_fake.h: start and stop tests/modal_fake/server.py from a C test
** (header-only, test-only). The server gets a fresh state directory, watches
** this process's pid and has a bounded lifetime, so it never outlives the
** test. fake_start returns 0, 77 when the fake cannot run here (no
** /usr/bin/python3, grpcio or protoc), or -1.
*/
#ifndef lash_modal_fake_h
#define lash_modal_fake_h

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct fake_server {
  pid_t pid;
  int control, router;
  char state[256];
  char jail[16];
  int tls;
  char ca[300];           /* CA bundle (the self-signed cert) when tls */
} fake_server;

static int fake_start(fake_server *f, const char *const *extra) {
  memset(f, 0, sizeof *f);
  if (access("/usr/bin/python3", X_OK) != 0) return 77;
  snprintf(f->state, sizeof f->state, "/tmp/lash-modal-fake-XXXXXX");
  if (!mkdtemp(f->state)) return -1;
  char watch[32];
  snprintf(watch, sizeof watch, "%d", (int)getpid());
  const char *argv[32] = { "/usr/bin/python3", "tests/modal_fake/server.py",
                           "--state", f->state, "--watch-pid", watch,
                           "--lifetime", "600" };
  int n = 8;
  for (const char *const *e = extra; e && *e && n < 30; e++) argv[n++] = *e;
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  f->pid = pid;
  char path[300];
  snprintf(path, sizeof path, "%s/ports.json", f->state);
  for (int i = 0; i < 600; i++) {   /* up to 30 s */
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      f->pid = 0;
      return WIFEXITED(st) && WEXITSTATUS(st) == 77 ? 77 : -1;
    }
    FILE *fp = fopen(path, "r");
    if (fp) {
      char buf[1024] = { 0 };
      size_t r = fread(buf, 1, sizeof buf - 1, fp);
      fclose(fp);
      buf[r] = 0;
      const char *c = strstr(buf, "\"control\": "), *ro = strstr(buf, "\"router\": ");
      const char *j = strstr(buf, "\"jail\": \"");
      const char *ca = strstr(buf, "\"ca\": \"");
      f->tls = strstr(buf, "\"tls\": true") != NULL;
      if (ca) snprintf(f->ca, sizeof f->ca, "%.*s", (int)strcspn(ca + 7, "\""), ca + 7);
      if (c && ro) {
        f->control = atoi(c + 11);
        f->router = atoi(ro + 10);
        if (j) snprintf(f->jail, sizeof f->jail, "%.*s", (int)strcspn(j + 9, "\""), j + 9);
        return 0;
      }
    }
    struct timespec ts = { 0, 50 * 1000000L };
    nanosleep(&ts, NULL);
  }
  return -1;
}

/* Replace the fault rules (a JSON list) atomically. */
static void fake_faults(fake_server *f, const char *json) {
  char tmp[300], path[300];
  snprintf(tmp, sizeof tmp, "%s/faults.json.tmp", f->state);
  snprintf(path, sizeof path, "%s/faults.json", f->state);
  FILE *fp = fopen(tmp, "w");
  if (!fp) return;
  fputs(json, fp);
  fclose(fp);
  rename(tmp, path);
}

static void fake_stop(fake_server *f) {
  if (f->pid > 0) {
    kill(f->pid, SIGTERM);
    int st;
    for (int i = 0; i < 100; i++) {
      if (waitpid(f->pid, &st, WNOHANG) == f->pid) { f->pid = 0; break; }
      struct timespec ts = { 0, 50 * 1000000L };
      nanosleep(&ts, NULL);
    }
    if (f->pid > 0) { kill(f->pid, SIGKILL); waitpid(f->pid, &st, 0); f->pid = 0; }
  }
  if (f->state[0] && !getenv("LASH_KEEP_FAKE_STATE")) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->state);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", f->state);
  }
}

#endif
