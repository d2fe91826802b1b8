/* test_egress.c: the egress proxy (src/3-transport/egress.c) and the stub
** resolver under it, driven by libcurl (HTTP proxy, CONNECT tunnel, SOCKS5)
** against Python's http.server as the upstream, all on one lash loop. */
#include "dns.h"
#include "egress.h"
#include "loop.h"
#include "resolver.h"
#include "t.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static lash_loop *loop;
static char denied_msgs[8192];
static int n_allowed, n_denied, n_failed;

static void on_event(void *data, const lash_egress_event *ev) {
  (void)data;
  if (ev->verdict == LASH_EGRESS_ALLOWED) n_allowed++;
  else if (ev->verdict == LASH_EGRESS_DENIED) n_denied++;
  else n_failed++;
  if (ev->message && strlen(denied_msgs) + strlen(ev->message) + 2 < sizeof denied_msgs) {
    strcat(denied_msgs, ev->message);
    strcat(denied_msgs, "\n");
  }
}

static int listener(int type, uint16_t *port) {
  struct sockaddr_in a;
  socklen_t l = sizeof a;
  int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      (type == SOCK_STREAM && listen(fd, 1024) != 0) ||
      getsockname(fd, (struct sockaddr *)&a, &l) != 0)
    abort();
  *port = ntohs(a.sin_port);
  return fd;
}

static int wait_port(uint16_t port) {
  int i;
  for (i = 0; i < 200; i++) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok) return 0;
    usleep(25000);
  }
  return -1;
}

typedef struct fetch {
  int done;
  CURLcode rc;
  long code, connect_code;
  char body[4096];
  size_t nbody;
  char headers[4096];
} fetch;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
  fetch *f = ud;
  size_t len = sz * n, room = sizeof f->body - 1 - f->nbody;
  memcpy(f->body + f->nbody, p, len < room ? len : room);
  f->nbody += len < room ? len : room;
  f->body[f->nbody] = '\0';
  return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud) {
  fetch *f = ud;
  size_t len = sz * n;
  if (strlen(f->headers) + len + 1 < sizeof f->headers)
    strncat(f->headers, p, len);
  return len;
}

static void on_done(lash_loop *l, CURL *e, CURLcode rc, void *ud) {
  fetch *f = ud;
  (void)l;
  f->rc = rc;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &f->code);
  curl_easy_getinfo(e, CURLINFO_HTTP_CONNECTCODE, &f->connect_code);
  f->done = 1;
}

/* GET url through proxy (tunnel: by CONNECT) and wait on the loop */
static void get(fetch *f, const char *url, const char *proxy, int tunnel) {
  CURL *e = curl_easy_init();
  memset(f, 0, sizeof *f);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_PROXY, proxy);
  curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, (long)tunnel);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "");
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
  curl_easy_setopt(e, CURLOPT_TIMEOUT, 20L);
  lash_curl_add(loop, e, on_done, f);
  while (!f->done) lash_loop_run_once(loop, 100);
  lash_curl_remove(loop, e);
  curl_easy_cleanup(e);
}

/* one DNS question to the proxy's DNS socket; returns the rcode, and the
** first address in out */
static int ask(uint16_t dns_port, const char *name, uint16_t qtype, char *out) {
  uint8_t q[512], a[512];
  size_t n = lash_dns_build_query(q, sizeof q, 0x4242, name, qtype);
  struct sockaddr_in to;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0), i;
  lash_netaddr addrs[4];
  lash_dns_result res;
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(dns_port);
  sendto(fd, q, n, 0, (struct sockaddr *)&to, sizeof to);
  *out = '\0';
  for (i = 0; i < 100; i++) {
    ssize_t m;
    lash_loop_run_once(loop, 20);
    m = recv(fd, a, sizeof a, 0);
    if (m > 0) {
      close(fd);
      if (lash_dns_parse_answer(a, (size_t)m, 0x4242, name, qtype, addrs, 4,
                                &res) != 0)
        return -1;
      if (res.n) lash_netaddr_format(&addrs[0], out);
      return res.rcode;
    }
  }
  close(fd);
  return -2;
}

int main(void) {
  char dir[] = "/tmp/lash-egress-test.XXXXXX", path[256], url[256], pol_rule[64];
  char hosts[300], resolv[300], proxy[64], socks[64], err[300], addr[64];
  uint16_t up_port, http_port, socks_port, dns_port;
  lash_netpolicy pol;
  lash_resolver *res;
  lash_egress *eg;
  lash_egress_opts o;
  lash_egress_stats st;
  fetch f;
  pid_t server;
  FILE *fh;
  int fd;

  signal(SIGPIPE, SIG_IGN);
  loop = lash_loop_new();
  if (!mkdtemp(dir)) abort();
  snprintf(path, sizeof path, "%s/hello.txt", dir);
  fh = fopen(path, "w");
  fputs("hello from upstream\n", fh);
  fclose(fh);
  snprintf(hosts, sizeof hosts, "%s/hosts", dir);
  fh = fopen(hosts, "w");
  fputs("127.0.0.1 rebind.test other.test\n169.254.169.254 metadata.test\n", fh);
  fclose(fh);
  snprintf(resolv, sizeof resolv, "%s/resolv.conf", dir);
  fh = fopen(resolv, "w");
  fclose(fh);

  /* the upstream: Python's own server, on a port we find free */
  fd = listener(SOCK_STREAM, &up_port);
  close(fd);
  server = fork();
  if (server == 0) {
    char port[8];
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    snprintf(port, sizeof port, "%u", (unsigned)up_port);
    execlp("python3", "python3", "-m", "http.server", port, "--bind",
           "127.0.0.1", "--directory", dir, (char *)NULL);
    _exit(127);
  }
  T_OK(wait_port(up_port) == 0, "python3 -m http.server listens on %u", up_port);

  lash_netpol_init(&pol);
  snprintf(pol_rule, sizeof pol_rule, "allowed.test:%u", (unsigned)up_port);
  lash_netpol_add(&pol, 0, pol_rule, strlen(pol_rule), err, sizeof err);
  snprintf(pol_rule, sizeof pol_rule, "rebind.test:%u", (unsigned)up_port);
  lash_netpol_add(&pol, 0, pol_rule, strlen(pol_rule), err, sizeof err);
  lash_netpol_add(&pol, 0, "metadata.test", 13, err, sizeof err);
  lash_netpol_add_host(&pol, "allowed.test", 12, "127.0.0.1", 9, err, sizeof err);
  res = lash_resolver_new(loop, resolv, hosts);
  memset(&o, 0, sizeof o);
  o.on_event = on_event;
  eg = lash_egress_new(loop, &pol, res, &o);
  T_OK(lash_egress_listen(eg, listener(SOCK_STREAM, &http_port), LASH_EGRESS_HTTP) == 0 &&
       lash_egress_listen(eg, listener(SOCK_STREAM, &socks_port), LASH_EGRESS_SOCKS) == 0 &&
       lash_egress_listen(eg, listener(SOCK_DGRAM, &dns_port), LASH_EGRESS_DNS_UDP) == 0,
       "the proxy listens (HTTP, SOCKS5, DNS)");
  T_OK(!lash_loop_alive(loop), "its listeners do not keep the loop alive");
  snprintf(proxy, sizeof proxy, "http://127.0.0.1:%u", (unsigned)http_port);
  snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%u", (unsigned)socks_port);

  /* allowed */
  snprintf(url, sizeof url, "http://allowed.test:%u/hello.txt", (unsigned)up_port);
  get(&f, url, proxy, 0);
  T_OK(f.rc == CURLE_OK && f.code == 200 && strcmp(f.body, "hello from upstream\n") == 0,
       "plain HTTP through the proxy reaches the allowed server (%d %ld)", f.rc, f.code);
  T_OK(strstr(f.headers, "Connection: close\r\n") != NULL,
       "and its response says Connection: close");
  get(&f, url, proxy, 1);
  T_OK(f.rc == CURLE_OK && f.connect_code == 200 && f.code == 200 &&
       strcmp(f.body, "hello from upstream\n") == 0,
       "a CONNECT tunnel reaches it (%d %ld %ld)", f.rc, f.connect_code, f.code);
  get(&f, url, socks, 0);
  T_OK(f.rc == CURLE_OK && f.code == 200 && strcmp(f.body, "hello from upstream\n") == 0,
       "SOCKS5 reaches it (%d %ld)", f.rc, f.code);
  T_EQ_INT(n_allowed, 3, "three connections were reported allowed");

  /* refused, each with a message naming what is allowed */
  snprintf(url, sizeof url, "http://other.test:%u/hello.txt", (unsigned)up_port);
  get(&f, url, proxy, 0);
  snprintf(path, sizeof path, "lash: egress to other.test:%u is not allowed by "
           "this sandbox's network policy; allowed: allowed.test:%u, "
           "rebind.test:%u, metadata.test", (unsigned)up_port,
           (unsigned)up_port, (unsigned)up_port);
  T_OK(f.code == 403 && strstr(f.body, path), "another name is refused with "
       "the allow list: %s", f.body);
  T_OK(strstr(f.headers, path) != NULL, "and the same words as the reason phrase");
  get(&f, url, proxy, 1);
  T_OK(f.rc != CURLE_OK && f.connect_code == 403, "and by CONNECT (%ld)", f.connect_code);
  get(&f, url, socks, 0);
  T_OK(f.rc != CURLE_OK && f.nbody == 0, "and by SOCKS5 (%d)", f.rc);
  snprintf(url, sizeof url, "http://allowed.test:%u/", (unsigned)up_port + 1);
  get(&f, url, proxy, 1);
  T_OK(f.connect_code == 403, "the allowed name on another port is refused");
  snprintf(url, sizeof url, "http://rebind.test:%u/hello.txt", (unsigned)up_port);
  get(&f, url, proxy, 1);
  T_OK(f.connect_code == 403 && strstr(f.headers, "rebind.test resolves to 127.0.0.1, loopback"),
       "an allowed name that resolves to loopback is refused (rebinding)");
  get(&f, "http://metadata.test/latest/meta-data/", proxy, 0);
  T_OK(f.code == 403 && strstr(f.body, "the cloud metadata address"),
       "an allowed name that resolves to the metadata address is refused");
  get(&f, "http://169.254.169.254/latest/meta-data/", proxy, 0);
  T_OK(f.code == 403 && strstr(f.body, "169.254.169.254 is the cloud metadata address"),
       "the metadata address itself is refused: %s", f.body);
  snprintf(url, sizeof url, "http://127.0.0.1:%u/hello.txt", (unsigned)up_port);
  get(&f, url, proxy, 0);
  T_OK(f.code == 403 && strstr(f.body, "127.0.0.1 is loopback"),
       "the host's loopback by address is refused, though the server is there");
  get(&f, url, socks, 0);
  T_OK(f.rc != CURLE_OK, "and by SOCKS5");
  get(&f, "http://93.184.216.34/", proxy, 0);
  T_OK(f.code == 403 && strstr(f.body, "egress to 93.184.216.34:80 is not allowed"),
       "a raw public IP is refused");
  get(&f, "https://allowed.test/", proxy, 0);
  T_OK(f.connect_code == 403, "https on a port the rule does not name is refused");

  /* DNS: answered for allowed names only */
  T_OK(ask(dns_port, "allowed.test", LASH_DNS_A, addr) == LASH_DNS_NOERROR &&
       strcmp(addr, "127.0.0.1") == 0, "DNS answers an allowed (pinned) name: %s", addr);
  T_EQ_INT(ask(dns_port, "allowed.test", LASH_DNS_AAAA, addr), LASH_DNS_NOERROR,
           "its AAAA question gets an empty answer");
  T_EQ_INT(ask(dns_port, "other.test", LASH_DNS_A, addr), LASH_DNS_REFUSED,
           "DNS refuses another name");
  T_EQ_INT(ask(dns_port, "rebind.test", LASH_DNS_A, addr), LASH_DNS_REFUSED,
           "DNS refuses an allowed name that resolves to loopback");
  T_OK(strstr(denied_msgs, "lash: a DNS lookup of other.test is not allowed") != NULL,
       "a refused lookup is reported");

  lash_egress_stats_get(eg, &st);
  T_OK(st.open == 0 || st.open <= 2, "connections are closed after use (%zu open)", st.open);
  T_OK(n_denied >= 10 && n_failed == 0, "refusals were reported (%d denied, %d failed)",
       n_denied, n_failed);

  lash_egress_free(eg);
  lash_resolver_free(res);
  lash_netpol_free(&pol);
  kill(server, SIGTERM);
  waitpid(server, NULL, 0);
  lash_loop_free(loop);
  snprintf(path, sizeof path, "rm -rf %s", dir);
  if (system(path) != 0) printf("# could not remove %s\n", dir);
  return T_DONE();
}
