/*
** test_modal_config.c: Modal configuration (src/5-backend/modal/modal_config.c, src/5-backend/modal/modal_token.c): the TOML
** subset and profile choice, precedence of explicit options, environment
** and file, credential errors that never show secrets, JWT expiry reading,
** UUIDs and the localhost rule.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "modal_config.h"
#include "modal_rpc.h"
#include "modal_token.h"
#include "t.h"

static const char *const ENV[] = {
  "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_SERVER_URL", "MODAL_ENVIRONMENT",
  "MODAL_PROFILE", "MODAL_CONFIG_PATH", "MODAL_SANDBOX_V2",
  "MODAL_IMAGE_BUILDER_VERSION", "MODAL_MAX_THROTTLE_WAIT", NULL
};

static void clear_env(void) {
  for (int i = 0; ENV[i]; i++) unsetenv(ENV[i]);
}

static char dir[64];

static const char *write_file(const char *name, const char *text) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_toml(void) {
  const char *text =
    "# Modal config\n"
    "[first]\n"
    "token_id = \"ak-first\"\n"
    "token_secret = 'as-first'\n"
    "\n"
    "[\"second profile\"]  # quoted name\n"
    "token_id = \"ak-second\"\n"
    "token_secret = \"as-second\"\n"
    "active = true\n"
    "sandbox_v2 = false\n"
    "server_url = \"https://example.test\"\n"
    "[default]\n"
    "token_id = \"ak-default\"\n"
    "token_secret = \"as-default\"\n";
  modal_config c;
  char chosen[64], err[256];
  memset(&c, 0, sizeof c);
  c.sandbox_v2 = -1;
  T_OK(modal_config_parse_toml(&c, text, strlen(text), NULL, chosen, sizeof chosen,
                               err, sizeof err) == 0, "parses a config with three profiles");
  T_OK(!strcmp(chosen, "second profile") && !strcmp(c.token_id, "ak-second") &&
       c.sandbox_v2 == 0 && !strcmp(c.server_url, "https://example.test"),
       "without MODAL_PROFILE the active profile is used (%s)", chosen);
  modal_config_free(&c);

  memset(&c, 0, sizeof c);
  c.sandbox_v2 = -1;
  T_OK(modal_config_parse_toml(&c, text, strlen(text), "first", chosen, sizeof chosen,
                               err, sizeof err) == 0 && !strcmp(c.token_secret, "as-first"),
       "a named profile is used, single-quoted literal strings too");
  modal_config_free(&c);

  const char *noactive = "[x]\ntoken_id = \"ak-x\"\n[default]\ntoken_id = \"ak-d\"\n";
  memset(&c, 0, sizeof c);
  T_OK(modal_config_parse_toml(&c, noactive, strlen(noactive), NULL, chosen, sizeof chosen,
                               err, sizeof err) == 0 && !strcmp(c.token_id, "ak-d"),
       "with no active profile, 'default' is used");
  modal_config_free(&c);

  memset(&c, 0, sizeof c);
  T_OK(modal_config_parse_toml(&c, text, strlen(text), "missing", chosen, sizeof chosen,
                               err, sizeof err) < 0 && strstr(err, "missing"),
       "a named profile that is absent is an error: %s", err);
  modal_config_free(&c);

  const char *bad = "[p]\ntoken_id = \"ak-1\"\ntoken_secret = \"as-SECRET-VALUE\n";
  memset(&c, 0, sizeof c);
  T_OK(modal_config_parse_toml(&c, bad, strlen(bad), NULL, chosen, sizeof chosen,
                               err, sizeof err) < 0 && strstr(err, "line 3") &&
       !strstr(err, "SECRET"), "a malformed line is named by number, never quoted: %s", err);
  modal_config_free(&c);
}

static void test_load(void) {
  modal_config c;
  char err[512];
  clear_env();
  setenv("HOME", dir, 1);
  /* nothing anywhere */
  T_OK(modal_config_load(&c, NULL, err, sizeof err) == MODAL_CONFIG_NO_CREDENTIALS &&
       strstr(err, "MODAL_TOKEN_ID") && strstr(err, "modal token new"),
       "no credentials: says how to set them (%s)", err);

  const char *path = write_file("cfg.toml",
    "[p]\nactive = true\ntoken_id = \"ak-file\"\ntoken_secret = \"as-file\"\n"
    "server_url = \"https://file.test/\"\nenvironment = \"staging\"\n");
  modal_config_in in = { NULL, NULL, NULL, path, NULL, -1 };
  T_OK(modal_config_load(&c, &in, err, sizeof err) == 0 && !strcmp(c.token_id, "ak-file") &&
       !strcmp(c.server_url, "https://file.test") && !strcmp(c.environment, "staging") &&
       c.sandbox_v2 == 1 && strstr(c.source, "profile 'p'"),
       "from the file: trailing slash dropped, V2 by default (%s)", c.source);
  T_OK(!strstr(c.source, "as-file"), "the source description holds no secret");
  modal_config_free(&c);

  setenv("MODAL_TOKEN_ID", "ak-env", 1);
  setenv("MODAL_TOKEN_SECRET", "as-env", 1);
  setenv("MODAL_SERVER_URL", "https://env.test,https://fallback.test", 1);
  setenv("MODAL_SANDBOX_V2", "0", 1);
  T_OK(modal_config_load(&c, &in, err, sizeof err) == 0 && !strcmp(c.token_id, "ak-env") &&
       !strcmp(c.token_secret, "as-env") && !strcmp(c.server_url, "https://env.test") &&
       !strcmp(c.environment, "staging") && c.sandbox_v2 == 0,
       "the environment wins over the file (first of a URL list; MODAL_SANDBOX_V2=0)");
  modal_config_free(&c);

  modal_config_in explicit = { "http://127.0.0.1:1", "prod", NULL, path, "/ca.pem", 1 };
  T_OK(modal_config_load(&c, &explicit, err, sizeof err) == 0 &&
       !strcmp(c.server_url, "http://127.0.0.1:1") && !strcmp(c.environment, "prod") &&
       !strcmp(c.ca_file, "/ca.pem") && c.sandbox_v2 == 1,
       "explicit options win over the environment");
  modal_config_free(&c);

  setenv("MODAL_SERVER_URL", "ftp://nope", 1);
  T_OK(modal_config_load(&c, &in, err, sizeof err) == MODAL_CONFIG_BAD && strstr(err, "https://"),
       "a server URL that is not http(s) is refused");
  unsetenv("MODAL_SERVER_URL");
  setenv("MODAL_MAX_THROTTLE_WAIT", "soon", 1);
  T_OK(modal_config_load(&c, &in, err, sizeof err) == MODAL_CONFIG_BAD,
       "a bad MODAL_MAX_THROTTLE_WAIT is refused");
  setenv("MODAL_MAX_THROTTLE_WAIT", "2.5", 1);
  T_OK(modal_config_load(&c, &in, err, sizeof err) == 0 && c.max_throttle_wait == 2.5,
       "MODAL_MAX_THROTTLE_WAIT is read");
  modal_config_free(&c);

  clear_env();
  setenv("MODAL_PROFILE", "absent", 1);
  T_OK(modal_config_load(&c, &in, err, sizeof err) == MODAL_CONFIG_BAD && strstr(err, "absent"),
       "MODAL_PROFILE naming a missing profile is an error");
  clear_env();
  modal_config_in dir_in = { NULL, NULL, NULL, "/tmp", NULL, -1 };
  T_OK(modal_config_load(&c, &dir_in, err, sizeof err) == MODAL_CONFIG_BAD &&
       strstr(err, "Is a directory") && strstr(err, "/tmp"),
       "a config path that is a directory is refused, not read as empty");
  clear_env();
  setenv("MODAL_TOKEN_ID", "ak-only-id", 1);
  modal_config_in nofile = { NULL, NULL, NULL, NULL, NULL, -1 };
  T_OK(modal_config_load(&c, &nofile, err, sizeof err) == MODAL_CONFIG_NO_CREDENTIALS,
       "an id without a secret is not credentials");
  clear_env();
}

static void b64url(const char *in, char *out) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t n = strlen(in), o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned char)in[i] << 16;
    if (i + 1 < n) v |= (unsigned char)in[i + 1] << 8;
    if (i + 2 < n) v |= (unsigned char)in[i + 2];
    out[o++] = tbl[v >> 18 & 63];
    out[o++] = tbl[v >> 12 & 63];
    if (i + 1 < n) out[o++] = tbl[v >> 6 & 63];
    if (i + 2 < n) out[o++] = tbl[v & 63];
  }
  out[o] = 0;
}

static void test_jwt(void) {
  char payload[128], enc[256], jwt[400];
  snprintf(payload, sizeof payload, "{\"sub\":\"x\",\"exp\": %ld}", (long)time(NULL) + 100);
  b64url(payload, enc);
  snprintf(jwt, sizeof jwt, "eyJhbGciOiJIUzI1NiJ9.%s.sig", enc);
  double ttl = modal_token_ttl(jwt);
  T_OK(ttl > 95 && ttl <= 101, "a JWT's exp is read (%.1f s left)", ttl);
  b64url("{\"sub\":\"x\"}", enc);
  snprintf(jwt, sizeof jwt, "h.%s.s", enc);
  T_OK(modal_token_ttl(jwt) < 0, "no exp: unknown");
  T_OK(modal_token_ttl("not a jwt") < 0 && modal_token_ttl("a.!!!.c") < 0, "garbage: unknown");

  char u[37], v[37];
  modal_rpc_uuid4(u);
  modal_rpc_uuid4(v);
  T_OK(strlen(u) == 36 && u[8] == '-' && u[14] == '4' && strchr("89ab", u[19]) && strcmp(u, v),
       "UUIDv4 idempotency keys (%s)", u);
  T_OK(modal_config_is_localhost("http://127.0.0.1:5000") && modal_config_is_localhost("https://localhost") &&
       !modal_config_is_localhost("https://api.modal.com") && !modal_config_is_localhost("http://127.0.0.10"),
       "the localhost rule");
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/lash-modal-cfg-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_toml();
  test_load();
  test_jwt();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("# cannot remove %s\n", dir);
  return T_DONE();
}
