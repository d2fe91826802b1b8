/* test_netpolicy.c: egress rules, special addresses and the decisions of
** src/1-base/netpolicy.c, and the DNS wire format of src/1-base/dns.c. */
#include "dns.h"
#include "netpolicy.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

static lash_netaddr A(const char *s) {
  lash_netaddr a;
  if (lash_netaddr_parse(s, strlen(s), &a) != 0) abort();
  return a;
}

static void add(lash_netpolicy *p, int deny, const char *s) {
  char err[300];
  if (lash_netpol_add(p, deny, s, strlen(s), err, sizeof err) != 0) {
    printf("# %s\n", err);
    abort();
  }
}

static void rules(void) {
  static const struct { const char *in, *canon; int kind; } good[] = {
    {"pypi.org", "pypi.org", LASH_NETRULE_NAME},
    {"PyPI.Org.:443", "pypi.org:443", LASH_NETRULE_NAME},
    {"*.example.org", "*.example.org", LASH_NETRULE_SUFFIX},
    {"*.Example.org:8080", "*.example.org:8080", LASH_NETRULE_SUFFIX},
    {"10.0.0.5:5432", "10.0.0.5:5432", LASH_NETRULE_ADDR},
    {"10.1.2.3/8", "10.0.0.0/8", LASH_NETRULE_ADDR},
    {"[2001:db8::1]:443", "[2001:db8::1]:443", LASH_NETRULE_ADDR},
    {"2001:db8::/32", "2001:db8::/32", LASH_NETRULE_ADDR},
    {"[fd00::/8]:22", "[fd00::/8]:22", LASH_NETRULE_ADDR},
    {"localhost", "localhost", LASH_NETRULE_NAME},
    {"_dmarc.x.test", "_dmarc.x.test", LASH_NETRULE_NAME},
  };
  static const struct { const char *in, *says; } bad[] = {
    {"", "empty"},
    {"*", "network = \"on\""},
    {"a.*.b", "may only open a rule"},
    {"https://pypi.org/simple", "is a URL"},
    {"pypi.org:0", "bad port"},
    {"pypi.org:65536", "bad port"},
    {"pypi.org:http", "bad port"},
    {"pypi org", "space"},
    {"b\xc3\xbc" "cher.de", "punycode"},
    {"a..b", "empty label"},
    {"10.0.0.0/33", "is not a rule"},
    {"[10.0.0.1]:80", "is not a rule"},
    {"[::1", "is not a rule"},
  };
  size_t i;
  for (i = 0; i < sizeof good / sizeof *good; i++) {
    lash_netrule r;
    char err[300], out[300];
    int rc = lash_netrule_parse(good[i].in, strlen(good[i].in), &r, err, sizeof err);
    T_OK(rc == 0 && r.kind == good[i].kind, "rule '%s' parses", good[i].in);
    if (rc == 0) {
      lash_netrule_format(&r, out, sizeof out);
      T_EQ_STR(out, good[i].canon, "its canonical form");
    } else {
      printf("#   %s\n", err);
    }
  }
  for (i = 0; i < sizeof bad / sizeof *bad; i++) {
    lash_netrule r;
    char err[300] = "";
    int rc = lash_netrule_parse(bad[i].in, strlen(bad[i].in), &r, err, sizeof err);
    T_OK(rc != 0 && strstr(err, bad[i].says), "rule '%s' is refused: %s",
         bad[i].in, err);
  }
}

static void specials(void) {
  static const struct { const char *a, *what; } cases[] = {
    {"127.0.0.1", "loopback"}, {"127.9.9.9", "loopback"}, {"::1", "loopback"},
    {"169.254.169.254", "the cloud metadata address"},
    {"fd00:ec2::254", "the cloud metadata address"},
    {"169.254.1.1", "link-local"}, {"fe80::1", "link-local"},
    {"10.2.3.4", "private"}, {"172.31.0.1", "private"}, {"192.168.1.1", "private"},
    {"fc00::1", "private"}, {"100.64.0.1", "shared (carrier-grade NAT)"},
    {"0.0.0.0", "unspecified"}, {"::", "unspecified"},
    {"224.0.0.1", "multicast"}, {"ff02::1", "multicast"},
    {"255.255.255.255", "reserved"}, {"192.0.2.1", "documentation"},
    {"::ffff:127.0.0.1", "loopback"},            /* mapped */
    {"::ffff:169.254.169.254", "the cloud metadata address"},
    {"64:ff9b::a9fe:a9fe", "the cloud metadata address"},   /* NAT64 */
    {"2002:7f00:1::", "loopback"},               /* 6to4 of 127.0.0.1 */
    {"::127.0.0.1", "reserved"},                 /* IPv4-compatible */
  };
  static const char *const public[] = {"93.184.216.34", "8.8.8.8",
                                       "172.32.0.1", "2606:4700::1111",
                                       "::ffff:8.8.8.8"};
  size_t i;
  for (i = 0; i < sizeof cases / sizeof *cases; i++) {
    lash_netaddr a = A(cases[i].a);
    const char *w = lash_netaddr_special(&a);
    T_OK(w && strcmp(w, cases[i].what) == 0, "%s is %s (got %s)", cases[i].a,
         cases[i].what, w ? w : "public");
  }
  for (i = 0; i < sizeof public / sizeof *public; i++) {
    lash_netaddr a = A(public[i]);
    T_OK(lash_netaddr_special(&a) == NULL, "%s is public", public[i]);
  }
}

static void decisions(void) {
  lash_netpolicy p, narrow;
  lash_netaddr a;
  lash_netrule r;
  char err[300], out[300];
  lash_netpol_init(&p);
  add(&p, 0, "allowed.test:8080");
  add(&p, 0, "*.example.org");
  add(&p, 0, "10.0.0.5:5432");
  add(&p, 0, "localhost:8080");
  add(&p, 1, "bad.example.org");
  add(&p, 1, "93.184.216.0/24");
  T_OK(lash_netpol_add_host(&p, "allowed.test", 12, "127.0.0.1", 9, err,
                            sizeof err) == 0, "a pinned host");
  T_OK(lash_netpol_add_host(&p, "x", 1, "not-an-ip", 9, err, sizeof err) == -1 &&
       strstr(err, "not an IPv4 or IPv6"), "a bad pin is refused: %s", err);

  T_EQ_INT(lash_netpol_check_name(&p, "allowed.test", 8080), LASH_NETPOL_ALLOW,
           "the allowed name on its port");
  T_EQ_INT(lash_netpol_check_name(&p, "allowed.test", 443), LASH_NETPOL_UNLISTED,
           "the allowed name on another port");
  T_EQ_INT(lash_netpol_check_name(&p, "allowed.test", 0), LASH_NETPOL_ALLOW,
           "the allowed name on some port (a DNS answer)");
  T_EQ_INT(lash_netpol_check_name(&p, "other.test", 0), LASH_NETPOL_UNLISTED,
           "another name, even for DNS");
  T_EQ_INT(lash_netpol_check_name(&p, "a.b.example.org", 443), LASH_NETPOL_ALLOW,
           "a subdomain under *.example.org");
  T_EQ_INT(lash_netpol_check_name(&p, "example.org", 443), LASH_NETPOL_UNLISTED,
           "*.example.org does not cover example.org itself");
  T_EQ_INT(lash_netpol_check_name(&p, "evilexample.org", 443), LASH_NETPOL_UNLISTED,
           "nor a name that only ends alike");
  T_EQ_INT(lash_netpol_check_name(&p, "bad.example.org", 443), LASH_NETPOL_DENIED,
           "deny wins over allow");

  a = A("127.0.0.1");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 8080, 1, 0), LASH_NETPOL_SPECIAL,
           "an allowed name resolving to loopback is refused (rebinding)");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 8080, 1, 1), LASH_NETPOL_ALLOW,
           "unless the policy pinned the name there");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 8080, 0, 0), LASH_NETPOL_SPECIAL,
           "loopback asked for as a literal is refused");
  a = A("169.254.169.254");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 80, 0, 0), LASH_NETPOL_SPECIAL,
           "the metadata address is refused");
  a = A("10.0.0.5");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 5432, 0, 0), LASH_NETPOL_ALLOW,
           "a private address allowed by address and port");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 22, 0, 0), LASH_NETPOL_SPECIAL,
           "on another port it is not");
  a = A("::ffff:10.0.0.5");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 5432, 0, 0), LASH_NETPOL_ALLOW,
           "the same address written as mapped IPv6");
  a = A("93.184.216.34");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 443, 1, 0), LASH_NETPOL_DENIED,
           "a denied range refuses what a name resolves to");
  a = A("8.8.8.8");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 443, 1, 0), LASH_NETPOL_ALLOW,
           "a public address of an allowed name");
  T_EQ_INT(lash_netpol_check_addr(&p, &a, 443, 0, 0), LASH_NETPOL_UNLISTED,
           "a public address asked for as a literal (a raw IP)");

  lash_netpol_describe(&p, out, sizeof out);
  T_EQ_STR(out, "allowed.test:8080, *.example.org, 10.0.0.5:5432, localhost:8080",
           "the allow list as text");

  /* a narrowing: both have to allow */
  lash_netpol_init(&narrow);
  narrow.outer = &p;
  add(&narrow, 0, "a.example.org:443");
  add(&narrow, 0, "other.test");
  T_EQ_INT(lash_netpol_check_name(&narrow, "a.example.org", 443), LASH_NETPOL_ALLOW,
           "narrowed: inside both");
  T_EQ_INT(lash_netpol_check_name(&narrow, "b.example.org", 443), LASH_NETPOL_UNLISTED,
           "narrowed: outside the narrowing");
  T_EQ_INT(lash_netpol_check_name(&narrow, "other.test", 443), LASH_NETPOL_OUTER,
           "narrowed: a wider rule is still refused by the creator's");
  T_OK(lash_netpol_pinned(&narrow, "allowed.test") != NULL,
       "pins are the creator's, seen through a narrowing");
  lash_netrule_parse("a.example.org:443", 17, &r, err, sizeof err);
  T_OK(lash_netpol_covers(&p, &r), "a.example.org:443 is within *.example.org");
  lash_netrule_parse("*.x.example.org", 15, &r, err, sizeof err);
  T_OK(lash_netpol_covers(&p, &r), "*.x.example.org is within *.example.org");
  lash_netrule_parse("other.test", 10, &r, err, sizeof err);
  T_OK(!lash_netpol_covers(&p, &r), "other.test is not within the policy");
  lash_netrule_parse("allowed.test", 12, &r, err, sizeof err);
  T_OK(!lash_netpol_covers(&p, &r), "allowed.test on every port is wider than :8080");
  lash_netrule_parse("10.0.0.0/8", 10, &r, err, sizeof err);
  T_OK(!lash_netpol_covers(&p, &r), "10.0.0.0/8 is wider than 10.0.0.5:5432");
  lash_netpol_free(&narrow);
  lash_netpol_free(&p);
  lash_netpol_describe(&p, out, sizeof out);
  T_EQ_STR(out, "nothing", "an empty policy allows nothing");
}

/* A response as BIND or dnsmasq writes it: www.example.test is a CNAME of
** edge.example.test (compressed), which has two A records. */
static const uint8_t cname_answer[] = {
  0x12, 0x34, 0x81, 0x80, 0, 1, 0, 3, 0, 0, 0, 0,
  3, 'w', 'w', 'w', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 4, 't', 'e', 's', 't', 0,
  0, 1, 0, 1,
  0xc0, 12, 0, 5, 0, 1, 0, 0, 0x0e, 0x10, 0, 7,
  4, 'e', 'd', 'g', 'e', 0xc0, 16,
  0xc0, 46, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34,
  0xc0, 46, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 93, 184, 216, 35,
};

static void dns(void) {
  uint8_t q[512], a[512];
  size_t n, m;
  lash_dns_question dq;
  lash_dns_result res;
  lash_netaddr got[4], addrs[2];
  uint8_t loop_msg[] = {0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0,
                        1, 'a', 0, 0, 1, 0, 1, 0xc0, 19, 0, 1, 0, 1};
  n = lash_dns_build_query(q, sizeof q, 0xbeef, "allowed.test", LASH_DNS_A);
  T_EQ_INT(n, 12 + 14 + 4, "a query's length");
  T_OK(lash_dns_parse_query(q, n, &dq) == 0 && dq.id == 0xbeef &&
       strcmp(dq.name, "allowed.test") == 0 && dq.qtype == LASH_DNS_A &&
       dq.qclass == 1 && dq.end == n, "the query reads back");
  addrs[0] = A("127.0.0.1");
  addrs[1] = A("::1");
  m = lash_dns_build_answer(a, sizeof a, q, &dq, LASH_DNS_NOERROR, addrs, 2, 60);
  T_OK(m == n + 16, "an answer with the one A record of the two");
  T_OK(lash_dns_parse_answer(a, m, 0xbeef, "allowed.test", LASH_DNS_A, got, 4,
                             &res) == 0 && res.n == 1 && res.ttl == 60 &&
       memcmp(got[0].b, addrs[0].b, 4) == 0 && res.rcode == 0,
       "and reads back");
  T_OK(lash_dns_parse_answer(a, m, 0xbeee, "allowed.test", LASH_DNS_A, got, 4,
                             &res) == -1, "another id is not our answer");
  T_OK(lash_dns_parse_answer(a, m, 0xbeef, "other.test", LASH_DNS_A, got, 4,
                             &res) == -1, "nor another question");
  m = lash_dns_build_answer(a, sizeof a, q, &dq, LASH_DNS_REFUSED, addrs, 2, 60);
  T_OK(m == n && (a[3] & 0xf) == LASH_DNS_REFUSED && a[7] == 0,
       "a refusal carries no record");
  T_OK(lash_dns_parse_answer(cname_answer, sizeof cname_answer, 0x1234,
                             "www.example.test", LASH_DNS_A, got, 4, &res) == 0 &&
       res.n == 2 && res.ttl == 30 && got[1].b[3] == 35,
       "a CNAME is followed to its records, with the smallest TTL");
  for (n = 0; n < sizeof cname_answer; n++)
    (void)lash_dns_parse_answer(cname_answer, n, 0x1234, "www.example.test",
                                LASH_DNS_A, got, 4, &res);
  T_OK(1, "every truncation of it is read without overrunning");
  T_OK(lash_dns_parse_answer(loop_msg, sizeof loop_msg, 1, "a", LASH_DNS_A, got,
                             4, &res) == -1, "a pointer loop is refused");
  T_OK(lash_dns_build_query(q, sizeof q, 1, "a..b", LASH_DNS_A) == 0,
       "an empty label cannot be written");
}

int main(void) {
  rules();
  specials();
  decisions();
  dns();
  return T_DONE();
}
