-- LuaRocks spec for lash: installs the C module lash.core and the Lua
-- modules under lash.* for Lua 5.4. Build with, from the checkout:
--   luarocks --lua-version=5.4 make rockspec/lash-scm-1.rockspec
rockspec_format = "3.0"
package = "lash"
version = "scm-1"
source = {
  url = "git+https://example.invalid/lash.git",
}
description = {
  summary = "An embeddable, Lua-scriptable agent harness",
  detailed = [[
lash runs an LLM in a loop: it sends instructions, history and tool
definitions to a model, runs the tools the model calls in a sandbox, feeds
results back and stops with an answer. The event loop, HTTP, sandboxes and
output shaping are C; agents, tools and capabilities are Lua.
]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
-- libcurl and its headers are found with pkg-config by the Makefile
-- (Debian puts curl.h under a multiarch directory LuaRocks does not search).
build = {
  type = "make",
  build_target = "rock",
  install_target = "rock-install",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    BUILD = "build-rock",
  },
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
    BUILD = "build-rock",
  },
}
