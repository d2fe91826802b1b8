/*
** sandbox_modal_ports.c: ports of a Modal sandbox reached from outside
** (prefix msb_, declared in sandbox_modal_int.h). Modal tunnels a port only
** when the sandbox is created with it (Sandbox.open_ports, one PortSpec
** each); once the container runs, SandboxGetTunnels says where each one is
** reachable: a TLS endpoint (host, port; https://host) always, and a raw
** TCP one (unencrypted_host, unencrypted_port) for an unencrypted port.
** lash asks for encrypted tunnels only: a dev server's traffic never
** crosses the internet in clear.
*/
#include "sandbox_modal_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PORTS 64   /* far above any dev setup; bounds the request */

/* spec.publish (at index spec of the create call): a list of ports, each
** tunnelled encrypted. Raises naming the bad entry. */
void msb_publish_parse(lua_State *L, mop *op, int spec, modal_PortSpecs *out) {
  if (lua_getfield(L, spec, "publish") == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "modal backend: option 'publish' must be a list of ports, such as {8000}");
  size_t n = lua_rawlen(L, -1);
  if (n > MAX_PORTS)
    luaL_error(L, "modal backend: option 'publish' lists %d ports; at most %d",
               (int)n, MAX_PORTS);
  if (n) {
    out->ports = pb_arena_alloc(op->arena, n * sizeof *out->ports);
    if (!out->ports) luaL_error(L, "modal backend: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    lua_Integer p = lua_tointeger(L, -1);
    if (!lua_isinteger(L, -1) || p < 1 || p > 65535)
      luaL_error(L, "modal backend: option 'publish' holds TCP ports (integers "
                    "1-65535); entry %d is not one", (int)i + 1);
    for (size_t j = 0; j < i; j++)
      if (out->ports[j].port == (uint32_t)p)
        luaL_error(L, "modal backend: option 'publish' lists port %d twice", (int)p);
    out->ports[i].port = (uint32_t)p;
    out->ports[i].unencrypted = false;
    lua_pop(L, 1);
  }
  out->ports_n = n;
  lua_pop(L, 1);
}

/* ---- tunnels(cfg, id, timeout) -> {{port =, url =, host =, tls_port =,
**      tcp_host =, tcp_port =}, ...} sorted by port ------------------------ */

static int cmp_tunnel(const void *a, const void *b) {
  const modal_TunnelData *x = a, *y = b;
  return (x->container_port > y->container_port) - (x->container_port < y->container_port);
}

static int tunnels_k(lua_State *L, int status, lua_KContext ctx) {
  mop *op = (mop *)ctx;
  modal_rpc *r = &op->rpc;
  (void)status;
  lash_wait_check(L, &op->w);
  if (r->code == GRPC_NOT_FOUND || r->code == GRPC_FAILED_PRECONDITION)
    return msb_op_fail(L, op, 1);
  if (r->code != GRPC_OK) return msb_op_fail(L, op, 1);
  modal_SandboxGetTunnelsResponse *t = (modal_SandboxGetTunnelsResponse *)r->resp;
  if (t->result && t->result->status == MODAL_STATUS_TIMEOUT)
    return msb_sb_raise(L, LASH_SB_ERROR, "timeout", "Modal has not opened the sandbox's "
                        "tunnels yet (its container is not running); try again");
  if (t->result && t->result->status != MODAL_STATUS_UNSPECIFIED &&
      t->result->status != MODAL_STATUS_SUCCESS)
    return msb_sb_raise(L, LASH_SB_UNAVAILABLE, "gone", "the sandbox has ended (%s); its "
                        "tunnels are closed", msb_result_status(t->result->status));
  if (t->tunnels_n > 1) qsort(t->tunnels, t->tunnels_n, sizeof *t->tunnels, cmp_tunnel);
  lua_createtable(L, (int)t->tunnels_n, 0);
  for (size_t i = 0; i < t->tunnels_n; i++) {
    const modal_TunnelData *d = &t->tunnels[i];
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, d->container_port);
    lua_setfield(L, -2, "port");
    lua_pushinteger(L, d->port);
    lua_setfield(L, -2, "tls_port");
    lua_pushlstring(L, d->host.p, d->host.n);
    /* as Modal's SDKs spell the URL: the port only when it is not 443 */
    if (d->port == 443) lua_pushfstring(L, "https://%s", lua_tostring(L, -1));
    else lua_pushfstring(L, "https://%s:%d", lua_tostring(L, -1), (int)d->port);
    lua_setfield(L, -3, "url");
    lua_setfield(L, -2, "host");
    if (d->has_unencrypted_host && d->has_unencrypted_port) {
      lua_pushlstring(L, d->unencrypted_host.p, d->unencrypted_host.n);
      lua_setfield(L, -2, "tcp_host");
      lua_pushinteger(L, d->unencrypted_port);
      lua_setfield(L, -2, "tcp_port");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

int msb_tunnels(lua_State *L) {
  lua_settop(L, 3);
  double timeout = luaL_optnumber(L, 3, 50);
  if (!(timeout >= 0) || timeout > 600) luaL_argerror(L, 3, "a timeout of 0-600 seconds");
  mop *op = msb_op_new(L, 1, "tunnels");
  const char *id = luaL_checkstring(L, 2);
  if (!*id) luaL_argerror(L, 2, "empty sandbox id");
  modal_sbx *s = op->sbx = modal_client_sbx(op->cl, id);
  if (!s) luaL_error(L, "modal backend: out of memory");
  modal_SandboxGetTunnelsRequest req = { pb_cstr(s->id), (float)timeout };
  return SBX_CALL(L, op, s, "SandboxGetTunnels", &modal_SandboxGetTunnelsRequest_desc, &req,
                  &modal_SandboxGetTunnelsResponse_desc, timeout + 30, tunnels_k);
}
