/*
** modal_config.h: Modal's client settings (modal_config.c; prefix
** modal_config_): credentials, server URL, environment and lash's own
** options, from explicit options, the environment and ~/.modal.toml. The
** bottom of lash's Modal client: it calls nothing of the client.
*/
#ifndef lash_modal_config_h
#define lash_modal_config_h

#include <stddef.h>

#define MODAL_DEFAULT_SERVER "https://api.modal.com"
#define MODAL_AUTH_MESSAGE \
  "Modal rejected the credentials. Set MODAL_TOKEN_ID / MODAL_TOKEN_SECRET or run `modal token new`."

typedef struct modal_config {
  char *token_id, *token_secret;   /* secrets: never printed */
  char *server_url;                /* no trailing slash */
  char *environment;               /* "" = the default environment */
  char *image_builder_version;     /* NULL: ask EnvironmentGetOrCreate */
  char *ca_file;                   /* extra CA bundle (lash option) */
  int sandbox_v2;                  /* create V2 sandboxes (default 1) */
  double max_throttle_wait;        /* total server-directed delay; <0 unlimited */
  char source[1280];               /* where the settings came from */
} modal_config;

/* Explicit settings (lash config options); NULL / -1 = not given. They win
** over the environment, which wins over the config file. */
typedef struct modal_config_in {
  const char *server_url, *environment, *profile, *config_path, *ca_file;
  int sandbox_v2;
} modal_config_in;

enum { MODAL_CONFIG_OK = 0, MODAL_CONFIG_BAD = -1, MODAL_CONFIG_NO_CREDENTIALS = -2 };

/* Load settings. Returns MODAL_CONFIG_OK, or an error with err set (a
** malformed file, or no credentials anywhere). */
int  modal_config_load(modal_config *c, const modal_config_in *in, char *err,
                       size_t errlen);
/* Free the strings (the secret scrubbed first). */
void modal_config_free(modal_config *c);
/* Parse the TOML subset Modal's config uses, for one profile (NULL: the
** `active` one, else none). Exposed for tests. Fills only the keys found. */
int  modal_config_parse_toml(modal_config *c, const char *text, size_t n,
                             const char *profile, char *chosen, size_t chosen_len,
                             char *err, size_t errlen);
/* Whether url's host is this machine (a local fake or dev server: Modal's
** SDKs then allow plaintext). */
int  modal_config_is_localhost(const char *url);

#endif
