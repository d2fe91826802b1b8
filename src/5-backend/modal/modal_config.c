/*
** modal_config.c: Modal configuration (see modal_config.h; prefix
** modal_config_). Explicit lash options win over the environment
** (MODAL_TOKEN_ID, MODAL_TOKEN_SECRET, MODAL_SERVER_URL, MODAL_ENVIRONMENT,
** MODAL_SANDBOX_V2, MODAL_IMAGE_BUILDER_VERSION, MODAL_MAX_THROTTLE_WAIT),
** which wins over ~/.modal.toml (MODAL_CONFIG_PATH; the profile named by
** MODAL_PROFILE, else the one with `active = true`, else `default`).
** Secrets never enter a message.
*/
#include "modal_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static void set_str(char **dst, const char *v) {
  free(*dst);
  *dst = xstrdup(v);
}

void modal_config_free(modal_config *c) {
  free(c->token_id);
  if (c->token_secret) {
    /* scrub the secret before giving the memory back */
    volatile char *p = c->token_secret;
    while (*p) *p++ = 0;
    free(c->token_secret);
  }
  free(c->server_url);
  free(c->environment);
  free(c->image_builder_version);
  free(c->ca_file);
  memset(c, 0, sizeof *c);
}

/* ---- a TOML subset: [tables], key = "string" | 'literal' | bool | number ---- */

typedef struct toml_val {
  int kind;          /* 's' string, 'b' bool, 'n' number */
  char *s;
  int b;
  double n;
} toml_val;

static const char *skip_ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t')) p++;
  return p;
}

/* Parse a quoted string at p (p points at the quote); returns the end or
** NULL. *out is malloc'ed. */
static const char *parse_string(const char *p, const char *e, char **out) {
  char q = *p++;
  size_t cap = 64, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  while (p < e && *p != q && *p != '\n') {
    char ch = *p++;
    if (q == '"' && ch == '\\') {
      if (p >= e) break;
      char x = *p++;
      switch (x) {
        case 'n': ch = '\n'; break;
        case 't': ch = '\t'; break;
        case 'r': ch = '\r'; break;
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        default: free(s); return NULL;   /* \u escapes: not in Modal's files */
      }
    }
    if (n + 2 > cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) { free(s); return NULL; }
      s = t;
    }
    s[n++] = ch;
  }
  if (p >= e || *p != q) { free(s); return NULL; }
  s[n] = 0;
  *out = s;
  return p + 1;
}

static int parse_value(const char *p, const char *e, toml_val *v) {
  memset(v, 0, sizeof *v);
  if (p < e && (*p == '"' || *p == '\'')) {
    const char *end = parse_string(p, e, &v->s);
    if (!end) return -1;
    end = skip_ws(end, e);
    if (end < e && *end != '#') { free(v->s); v->s = NULL; return -1; }
    v->kind = 's';
    return 0;
  }
  size_t n = (size_t)(e - p);
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  const char *hash = memchr(p, '#', n);
  if (hash) { n = (size_t)(hash - p); while (n && isspace((unsigned char)p[n - 1])) n--; }
  if (n == 4 && !memcmp(p, "true", 4)) { v->kind = 'b'; v->b = 1; return 0; }
  if (n == 5 && !memcmp(p, "false", 5)) { v->kind = 'b'; v->b = 0; return 0; }
  char buf[64];
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, p, n);
  buf[n] = 0;
  char *end;
  v->n = strtod(buf, &end);
  if (*end) return -1;
  v->kind = 'n';
  return 0;
}

typedef struct profile_keys {
  char *token_id, *token_secret, *server_url, *environment, *ibv;
  int sandbox_v2;            /* -1 unset */
  int active;
} profile_keys;

static void keys_free(profile_keys *k) {
  free(k->token_id);
  if (k->token_secret) memset(k->token_secret, 0, strlen(k->token_secret));
  free(k->token_secret);
  free(k->server_url);
  free(k->environment);
  free(k->ibv);
  memset(k, 0, sizeof *k);
  k->sandbox_v2 = -1;
}

int modal_config_parse_toml(modal_config *c, const char *text, size_t len,
                            const char *profile, char *chosen, size_t chosen_len,
                            char *err, size_t errlen) {
  /* Two passes: find the profile (named, else active, else default), then
  ** read its keys. Tables are kept by name as we go. */
  enum { MAXP = 64 };
  char *names[MAXP];
  profile_keys keys[MAXP];
  int np = 0, cur = -1, rc = 0, line = 0;
  const char *p = text, *end = text + len;
  if (chosen_len) chosen[0] = 0;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    line++;
    const char *s = skip_ws(p, eol);
    const char *e = eol;
    if (e > s && e[-1] == '\r') e--;
    p = eol + 1;
    if (s >= e || *s == '#') continue;
    if (*s == '[') {
      const char *q = skip_ws(s + 1, e);
      char *name = NULL;
      if (q < e && (*q == '"' || *q == '\'')) {
        q = parse_string(q, e, &name);
        if (!q) goto bad;
      } else {
        const char *b = q;
        while (q < e && (isalnum((unsigned char)*q) || *q == '_' || *q == '-')) q++;
        if (q == b) goto bad;
        name = strndup(b, (size_t)(q - b));
      }
      q = skip_ws(q, e);
      if (!name || q >= e || *q != ']') { free(name); goto bad; }
      q = skip_ws(q + 1, e);
      if (q < e && *q != '#') { free(name); goto bad; }
      if (np == MAXP) { free(name); snprintf(err, errlen, "too many profiles"); rc = -1; goto out; }
      names[np] = name;
      memset(&keys[np], 0, sizeof keys[np]);
      keys[np].sandbox_v2 = -1;
      cur = np++;
      continue;
    }
    /* key = value */
    const char *k = s;
    char *key = NULL;
    if (*k == '"' || *k == '\'') {
      k = parse_string(k, e, &key);
      if (!k) goto bad;
    } else {
      while (k < e && (isalnum((unsigned char)*k) || *k == '_' || *k == '-')) k++;
      if (k == s) goto bad;
      key = strndup(s, (size_t)(k - s));
    }
    k = skip_ws(k, e);
    if (!key || k >= e || *k != '=') { free(key); goto bad; }
    toml_val v;
    if (parse_value(skip_ws(k + 1, e), e, &v) < 0) { free(key); goto bad; }
    if (cur >= 0) {
      profile_keys *pk = &keys[cur];
      char **dst = NULL;
      if (!strcmp(key, "token_id")) dst = &pk->token_id;
      else if (!strcmp(key, "token_secret")) dst = &pk->token_secret;
      else if (!strcmp(key, "server_url")) dst = &pk->server_url;
      else if (!strcmp(key, "environment")) dst = &pk->environment;
      else if (!strcmp(key, "image_builder_version")) dst = &pk->ibv;
      if (dst && v.kind == 's') { free(*dst); *dst = v.s; v.s = NULL; }
      else if (!strcmp(key, "active") && v.kind == 'b') pk->active = v.b;
      else if (!strcmp(key, "sandbox_v2") && v.kind == 'b') pk->sandbox_v2 = v.b;
    }
    free(v.s);
    free(key);
  }
  {
    int pick = -1;
    for (int i = 0; i < np && pick < 0; i++)
      if (profile ? !strcmp(names[i], profile) : keys[i].active) pick = i;
    for (int i = 0; i < np && pick < 0 && !profile; i++)
      if (!strcmp(names[i], "default")) pick = i;
    if (pick < 0 && profile) {
      snprintf(err, errlen, "profile '%s' is not in the Modal config file", profile);
      rc = -1;
      goto out;
    }
    if (pick >= 0) {
      profile_keys *pk = &keys[pick];
      if (chosen_len) snprintf(chosen, chosen_len, "%s", names[pick]);
      if (pk->token_id && !c->token_id) set_str(&c->token_id, pk->token_id);
      if (pk->token_secret && !c->token_secret) set_str(&c->token_secret, pk->token_secret);
      if (pk->server_url && !c->server_url) set_str(&c->server_url, pk->server_url);
      if (pk->environment && !c->environment) set_str(&c->environment, pk->environment);
      if (pk->ibv && !c->image_builder_version) set_str(&c->image_builder_version, pk->ibv);
      if (pk->sandbox_v2 >= 0 && c->sandbox_v2 < 0) c->sandbox_v2 = pk->sandbox_v2;
    }
  }
  goto out;
bad:
  /* never quote the line: it may hold a secret */
  snprintf(err, errlen, "line %d is not TOML this reader understands "
           "([profile] tables of key = \"string\" | true | false | number)", line);
  rc = -1;
out:
  for (int i = 0; i < np; i++) {
    free(names[i]);
    keys_free(&keys[i]);
  }
  return rc;
}

static char *read_file_text(const char *path, size_t *n, int *err_no) {
  FILE *f = fopen(path, "rb");
  if (!f) { *err_no = errno; return NULL; }
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  size_t r;
  if (!s) *err_no = ENOMEM;
  while (s && (r = fread(s + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) {
      if (cap >= (1u << 20)) { free(s); s = NULL; *err_no = EFBIG; break; }
      char *t = realloc(s, cap *= 2);
      if (!t) { free(s); s = NULL; *err_no = ENOMEM; break; }
      s = t;
    }
  }
  /* A read error (the path is a directory: EISDIR) is not an empty file. */
  if (s && ferror(f)) {
    *err_no = errno ? errno : EIO;
    free(s);
    s = NULL;
  }
  fclose(f);
  *n = len;
  return s;
}

static int truthy_env(const char *v) {
  return !(!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
           !strcasecmp(v, "off") || !*v);
}

static int check_url(const char *u) {
  return !strncmp(u, "https://", 8) || !strncmp(u, "http://", 7);
}

int modal_config_load(modal_config *c, const modal_config_in *in, char *err,
                      size_t errlen) {
  modal_config_in none = { NULL, NULL, NULL, NULL, NULL, -1 };
  const char *v;
  if (!in) in = &none;
  memset(c, 0, sizeof *c);
  c->sandbox_v2 = -1;
  c->max_throttle_wait = -1;
  /* explicit options */
  if (in->server_url) set_str(&c->server_url, in->server_url);
  if (in->environment) set_str(&c->environment, in->environment);
  if (in->ca_file) set_str(&c->ca_file, in->ca_file);
  if (in->sandbox_v2 >= 0) c->sandbox_v2 = in->sandbox_v2;
  /* environment */
  int env_id = 0, env_secret = 0;
  if ((v = getenv("MODAL_TOKEN_ID")) && *v) { set_str(&c->token_id, v); env_id = 1; }
  if ((v = getenv("MODAL_TOKEN_SECRET")) && *v) { set_str(&c->token_secret, v); env_secret = 1; }
  if (!c->server_url && (v = getenv("MODAL_SERVER_URL")) && *v) set_str(&c->server_url, v);
  if (!c->environment && (v = getenv("MODAL_ENVIRONMENT"))) set_str(&c->environment, v);
  if (c->sandbox_v2 < 0 && (v = getenv("MODAL_SANDBOX_V2")) && *v) c->sandbox_v2 = truthy_env(v);
  if ((v = getenv("MODAL_IMAGE_BUILDER_VERSION")) && *v) set_str(&c->image_builder_version, v);
  if ((v = getenv("MODAL_MAX_THROTTLE_WAIT")) && *v) {
    char *e;
    double t = strtod(v, &e);
    if (*e || !(t >= 0)) {
      snprintf(err, errlen, "MODAL_MAX_THROTTLE_WAIT must be a number of seconds (0 disables)");
      modal_config_free(c);
      return MODAL_CONFIG_BAD;
    }
    c->max_throttle_wait = t;
  }
  /* the config file */
  char path[1024], chosen[128] = "";
  const char *profile = in->profile ? in->profile : getenv("MODAL_PROFILE");
  if (profile && !*profile) profile = NULL;
  if (in->config_path) snprintf(path, sizeof path, "%s", in->config_path);
  else if ((v = getenv("MODAL_CONFIG_PATH")) && *v) snprintf(path, sizeof path, "%s", v);
  else if ((v = getenv("HOME")) && *v) snprintf(path, sizeof path, "%s/.modal.toml", v);
  else path[0] = 0;
  int from_file = 0;
  if (path[0]) {
    size_t n;
    int eno = 0;
    char *text = read_file_text(path, &n, &eno);
    if (text) {
      char perr[256];
      int had_id = c->token_id != NULL, had_secret = c->token_secret != NULL;
      int prc = modal_config_parse_toml(c, text, n, profile, chosen, sizeof chosen,
                                        perr, sizeof perr);
      free(text);
      if (prc < 0) {
        snprintf(err, errlen, "%s: %s", path, perr);
        modal_config_free(c);
        return MODAL_CONFIG_BAD;
      }
      from_file = (!had_id && c->token_id) || (!had_secret && c->token_secret);
    } else if (eno != ENOENT || in->config_path || profile) {
      if (eno == ENOENT && !in->config_path && env_id && env_secret) {
        /* a profile name with credentials in the environment: fine */
      } else {
        snprintf(err, errlen, "cannot read the Modal config file %s: %s", path, strerror(eno));
        modal_config_free(c);
        return MODAL_CONFIG_BAD;
      }
    }
  }
  if (!c->server_url) set_str(&c->server_url, MODAL_DEFAULT_SERVER);
  if (!c->environment) set_str(&c->environment, "");
  if (c->sandbox_v2 < 0) c->sandbox_v2 = 1;
  /* Python accepts a comma-separated fallback list; lash takes the first. */
  char *comma = strchr(c->server_url, ',');
  if (comma) *comma = 0;
  size_t ul = strlen(c->server_url);
  while (ul > 0 && c->server_url[ul - 1] == '/') c->server_url[--ul] = 0;
  if (!check_url(c->server_url)) {
    snprintf(err, errlen, "the Modal server URL must start with https:// (or http:// "
             "for a local server)");
    modal_config_free(c);
    return MODAL_CONFIG_BAD;
  }
  if (!c->token_id || !c->token_secret) {
    snprintf(err, errlen, "no Modal credentials: set MODAL_TOKEN_ID and "
             "MODAL_TOKEN_SECRET, or run `modal token new` (it writes %s)",
             path[0] ? path : "~/.modal.toml");
    modal_config_free(c);
    return MODAL_CONFIG_NO_CREDENTIALS;
  }
  if (from_file)
    snprintf(c->source, sizeof c->source, "credentials from profile '%s' in %s",
             chosen, path);
  else
    snprintf(c->source, sizeof c->source,
             "credentials from MODAL_TOKEN_ID / MODAL_TOKEN_SECRET");
  return MODAL_CONFIG_OK;
}

/* ---- small helpers ----------------------------------------------------------- */

int modal_config_is_localhost(const char *url) {
  const char *h = strstr(url, "://");
  h = h ? h + 3 : url;
  static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]", "172.21.0.1", NULL };
  for (int i = 0; hosts[i]; i++) {
    size_t n = strlen(hosts[i]);
    if (!strncmp(h, hosts[i], n) && (h[n] == 0 || h[n] == ':' || h[n] == '/')) return 1;
  }
  return 0;
}
