/*
** term.h: the terminal of the `lash` program (`lash chat`): line editing,
** input history and Ctrl-C, read on lash's loop. Part of the program only,
** never of the library: an embedding host owns its own terminal.
*/
#ifndef lash_cli_term_h
#define lash_cli_term_h

#include "lua.h"

typedef struct cli_term cli_term;

/* Push the `host.term` table (see term.c). *slot is set to the terminal
** while it is open and cleared when it closes or is collected, so the
** program's signal watcher never reaches a freed one. */
void cli_term_push(lua_State *L, cli_term **slot);

/* A signal the program caught. Returns 1 if the terminal took it (SIGINT
** while term.open is in force: it ends the line being read, or the wait
** of term.wait_interrupt, or is kept for the next one), 0 if the program
** should act on it as usual. Any other signal also ends the line being
** read (term.read returns nil, "signal") and returns 0. */
int cli_term_signal(cli_term *t, int signo);

#endif
