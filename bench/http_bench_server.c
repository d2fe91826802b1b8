/*
** bench/http_bench_server.c: the loopback server bench_http.sh measures
** against: HTTP/1.1 keep-alive, one thread, poll(), every request answered
** at once with the same small 200 response, so the client is what is timed.
** Usage: http_bench_server LIFETIME_SECONDS; prints the port, binds
** 127.0.0.1 only, exits after LIFETIME_SECONDS.
*/
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64

static const char reply[] =
  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
  "\r\nhello, world\n";

struct conn { int fd; size_t n; char buf[8192]; };

int main(int argc, char **argv) {
  struct pollfd pf[MAXC + 1];
  struct conn c[MAXC];
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 60);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1, i;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 64) ||
      getsockname(ls, (struct sockaddr *)&a, &al))
    return perror("http_bench_server"), 1;
  printf("%d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (i = 0; i < MAXC; i++) c[i].fd = -1;
  while (time(NULL) < end) {
    pf[0].fd = ls;
    pf[0].events = POLLIN;
    for (i = 0; i < MAXC; i++) {
      pf[i + 1].fd = c[i].fd;
      pf[i + 1].events = POLLIN;
    }
    if (poll(pf, MAXC + 1, 1000) <= 0) continue;
    if (pf[0].revents & POLLIN) {
      int fd = accept(ls, NULL, NULL);
      for (i = 0; fd >= 0 && i < MAXC && c[i].fd >= 0; i++) {}
      if (fd >= 0 && i == MAXC) close(fd);
      else if (fd >= 0) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c[i].fd = fd;
        c[i].n = 0;
      }
    }
    for (i = 0; i < MAXC; i++) {
      ssize_t r;
      char *end_of_head;
      if (c[i].fd < 0 || !(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      r = read(c[i].fd, c[i].buf + c[i].n, sizeof c[i].buf - 1 - c[i].n);
      if (r <= 0) {
        close(c[i].fd);
        c[i].fd = -1;
        continue;
      }
      c[i].n += (size_t)r;
      c[i].buf[c[i].n] = '\0';
      /* Answer every complete request head (bodies are not expected). */
      while ((end_of_head = strstr(c[i].buf, "\r\n\r\n")) != NULL) {
        size_t used = (size_t)(end_of_head + 4 - c[i].buf);
        if (write(c[i].fd, reply, sizeof reply - 1) < 0) break;
        memmove(c[i].buf, c[i].buf + used, c[i].n - used + 1);
        c[i].n -= used;
      }
      if (c[i].n >= sizeof c[i].buf - 1) {  /* a head too large: drop it */
        close(c[i].fd);
        c[i].fd = -1;
      }
    }
  }
  return 0;
}
