/*
** untar.h: a streaming tar extractor for archives nobody trusts (a
** sandbox's directory copied out to the host). Bytes go in in chunks of any
** size; memory stays bounded (one header, a long name); every member is
** written under one destination directory through openat with no symlink
** followed, so a hostile archive cannot write outside it. Regular files,
** directories and symlinks are extracted (symlinks last, never followed);
** hard links, devices and fifos are skipped and counted; absolute names and
** names with ".." are skipped; modes keep only the permission bits.
** Prefix: lash_untar_.
*/
#ifndef lash_untar_h
#define lash_untar_h

#include <stddef.h>
#include <stdint.h>

typedef struct lash_untar lash_untar;

typedef struct lash_untar_stats {
  uint64_t files, dirs, links, bytes, skipped;
  char first_skip[256];   /* why the first skipped member was skipped */
} lash_untar_stats;

/* Open an extractor writing under dest (created if missing, with its
** parents). NULL with errno set on failure. */
lash_untar *lash_untar_open(const char *dest);
/* Feed n bytes. 0, or -1 with a message in err (a malformed stream or a
** write that failed): the extractor is then unusable except to close. */
int lash_untar_write(lash_untar *u, const char *data, size_t n, char *err, size_t errsz);
/* Finish: create the symlinks, check the stream ended where a member
** ends. 0, or -1 with a message. stats may be NULL. */
int lash_untar_finish(lash_untar *u, lash_untar_stats *stats, char *err, size_t errsz);
/* Free everything (idempotent on NULL). */
void lash_untar_close(lash_untar *u);

#endif
