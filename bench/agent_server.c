/*
** agent_server.c: the model server of bench_agent.sh. A single-threaded
** epoll HTTP/1.1 server on 127.0.0.1 that speaks just enough of the OpenAI
** Chat Completions API: every POST gets an instant, non-streamed answer --
** a call to the `echo` tool while the request holds fewer than K tool
** results (counted as occurrences of "role":"tool"), then a final "done".
** Keep-alive; Content-Length bodies only. Prints its port, exits after
** LIFETIME seconds (default 600) or on SIGTERM. With TOOL run_command the
** call is run_command {"command": "echo step N"} instead (bench_steps.sh).
**
** usage: agent_server K [LIFETIME [TOOL]]
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct conn {
  int fd;
  char *buf;
  size_t len, cap;
  unsigned long calls;
} conn;

static int K;
static int run_command;   /* answer with run_command instead of echo */

static void conn_free(int ep, conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c->buf);
  free(c);
}

static size_t count_tools(const char *p, size_t n) {
  static const char pat[] = "\"role\":\"tool\"";
  size_t count = 0;
  const char *end = p + n;
  while (p < end) {
    const char *hit = memmem(p, (size_t)(end - p), pat, sizeof pat - 1);
    if (!hit) break;
    count++;
    p = hit + sizeof pat - 1;
  }
  return count;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  /* tiny responses: wait for room */
        fd_set ws;
        FD_ZERO(&ws);
        FD_SET(fd, &ws);
        select(fd + 1, NULL, &ws, NULL, NULL);
        continue;
      }
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int respond(conn *c, const char *body, size_t blen) {
  char out[2048], json[1024];
  size_t tools = count_tools(body, blen);
  int jn, n;
  if ((int)tools < K && run_command) {
    jn = snprintf(json, sizeof json,
      "{\"id\":\"chatcmpl-b%lu\",\"object\":\"chat.completion\",\"created\":1,"
      "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
      "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_%zu\","
      "\"type\":\"function\",\"function\":{\"name\":\"run_command\",\"arguments\":"
      "\"{\\\"command\\\":\\\"echo step %zu\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],"
      "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,"
      "\"total_tokens\":15}}", c->calls, tools, tools + 1);
  } else if ((int)tools < K) {
    jn = snprintf(json, sizeof json,
      "{\"id\":\"chatcmpl-b%lu\",\"object\":\"chat.completion\",\"created\":1,"
      "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
      "\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_%zu\","
      "\"type\":\"function\",\"function\":{\"name\":\"echo\",\"arguments\":"
      "\"{\\\"text\\\":\\\"hi\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],"
      "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,"
      "\"total_tokens\":15}}", c->calls, tools);
  } else {
    jn = snprintf(json, sizeof json,
      "{\"id\":\"chatcmpl-b%lu\",\"object\":\"chat.completion\",\"created\":1,"
      "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
      "\"assistant\",\"content\":\"done\"},\"finish_reason\":\"stop\"}],"
      "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1,"
      "\"total_tokens\":11}}", c->calls);
  }
  c->calls++;
  n = snprintf(out, sizeof out,
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n%s", jn, json);
  return write_all(c->fd, out, (size_t)n);
}

/* Handle every complete request in c->buf; -1 closes the connection. */
static int serve(conn *c) {
  for (;;) {
    char *hdr_end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    size_t head, clen = 0, total;
    char *p;
    if (!hdr_end) return 0;
    head = (size_t)(hdr_end - c->buf) + 4;
    for (p = c->buf; p < hdr_end; p++) {
      if ((p == c->buf || p[-1] == '\n') && strncasecmp(p, "content-length:", 15) == 0) {
        clen = strtoul(p + 15, NULL, 10);
        break;
      }
    }
    total = head + clen;
    if (c->len < total) return 0;
    if (strncmp(c->buf, "POST ", 5) != 0) {
      static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      if (write_all(c->fd, nf, sizeof nf - 1)) return -1;
    } else if (respond(c, c->buf + head, clen)) {
      return -1;
    }
    memmove(c->buf, c->buf + total, c->len - total);
    c->len -= total;
  }
}

static void on_alarm(int sig) {
  (void)sig;
  _exit(0);
}

int main(int argc, char **argv) {
  struct sockaddr_in addr;
  socklen_t alen = sizeof addr;
  struct epoll_event ev, evs[256];
  int lfd, ep, one = 1;
  if (argc < 2) {
    fprintf(stderr, "usage: %s K [LIFETIME]\n", argv[0]);
    return 2;
  }
  K = atoi(argv[1]);
  run_command = argc > 3 && strcmp(argv[3], "run_command") == 0;
  signal(SIGALRM, on_alarm);
  signal(SIGPIPE, SIG_IGN);
  alarm(argc > 2 ? (unsigned)atoi(argv[2]) : 600);
  lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 4096)) {
    perror("agent_server: bind/listen");
    return 1;
  }
  getsockname(lfd, (struct sockaddr *)&addr, &alen);
  printf("%d\n", ntohs(addr.sin_port));
  fflush(stdout);
  ep = epoll_create1(EPOLL_CLOEXEC);
  ev.events = EPOLLIN;
  ev.data.ptr = NULL;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1), i;
    if (n < 0 && errno == EINTR) continue;
    for (i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          conn *nc = calloc(1, sizeof *nc);
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          nc->fd = fd;
          ev.events = EPOLLIN;
          ev.data.ptr = nc;
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        }
        continue;
      }
      for (;;) {
        ssize_t r;
        if (c->cap - c->len < 65536) {
          c->cap = c->cap ? c->cap * 2 : 131072;
          c->buf = realloc(c->buf, c->cap);
        }
        r = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (r > 0) {
          c->len += (size_t)r;
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
          if (serve(c)) conn_free(ep, c);
          break;
        }
        conn_free(ep, c);  /* EOF or error */
        break;
      }
    }
  }
}
