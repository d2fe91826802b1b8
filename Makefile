# lash build. `make` builds the CLI, the static and shared libraries, the
# Lua C module and the pkg-config file; `make test` runs every test with one
# summary; `make check` runs the same under ASan+UBSan.
#
# Sources are picked up by wildcard from the layer directories (docs/architecture.md,
# "Layout"): every .c of src/1-base .. src/7-embed goes into the library,
# src/8-cli is the program; every tests/unit/test_*.c is its own test binary.

PREFIX    ?= /usr/local
BUILD     ?= build
CC        ?= cc
PKGS      := lua5.4 libcurl yaml-0.1 sqlite3
# `make deps` runs before pkg-config and the libraries exist.
ifneq ($(MAKECMDGOALS),deps)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
endif
VERSION   := 0.1.0

WARN      := -Wall -Wextra -Wshadow -Wundef -Wwrite-strings \
             -Wmissing-prototypes -Wstrict-prototypes -Wno-unused-parameter
OPT       ?= -O2 -g
SAN       ?=
# the layers, bottom up; each is on the include path, so "loop.h" needs no directory
LAYERS    := src/1-base src/2-runtime src/3-transport src/4-sandbox src/5-backend/local/prim src/5-backend/local src/5-backend/modal src/6-lua src/7-embed src/8-cli
INCS      := $(addprefix -I,$(LAYERS))
# XCFLAGS is ours; CFLAGS is the caller's (LuaRocks passes its own).
# -fvisibility=hidden: only what LASH_API marks leaves the library.
XCFLAGS   := -std=gnu11 $(OPT) $(WARN) $(SAN) -fPIC -fvisibility=hidden -D_GNU_SOURCE \
             -DLASH_VERSION='"$(VERSION)"' \
             $(PKG_CFLAGS) $(INCS)
LDLIBS    += $(PKG_LIBS) -lm -ldl
LDFLAGS   += $(SAN)

LIB_SRC   := $(foreach d,$(filter-out src/8-cli,$(LAYERS)),$(wildcard $(d)/*.c))
LIB_OBJ   := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/jaild_blob.o
# lash's Lua modules precompiled (src/7-embed/lbytecode.c loads them when they are
# at least as new as their sources); luac comes with Debian's lua5.4.
LUAC      ?= luac5.4
LUA_SRC   := $(shell find lua/lash -name '*.lua')
LUAC_OUT  := $(LUA_SRC:lua/%.lua=$(BUILD)/luac/%.luac)
TEST_SRC  := $(wildcard tests/unit/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HDRS      := $(foreach d,$(LAYERS),$(wildcard $(d)/*.h)) src/5-backend/local/prim/jaild/sandbox_jaild.h tests/unit/t.h

# The self-contained library carries its own Lua 5.4 (vendor/lua: Debian's
# 5.4.4 source, compiled PIC and hidden; Debian's liblua5.4.a is not PIC)
# and libyaml (Debian's libyaml.a), so it runs next to any other Lua
# (LuaJIT in LÖVE or Neovim) in one process; libcurl and libc stay shared.
LUA_VSRC  := $(filter-out vendor/lua/lua.c vendor/lua/luac.c,$(wildcard vendor/lua/*.c))
LUA_VOBJ  := $(LUA_VSRC:vendor/lua/%.c=$(BUILD)/obj/lua/%.o)
LUA_A     := $(BUILD)/obj/lua/liblua.a
ifneq ($(MAKECMDGOALS),deps)
YAML_A    ?= $(shell pkg-config --variable=libdir yaml-0.1)/libyaml.a
endif
SO_LIBS    = $(filter-out -llua5.4 -lyaml,$(LDLIBS))
# lash's Lua modules, compiled in as bytecode by tools/lua2c
LUA_MODS  := $(sort $(shell cd lua && find lash -name '*.lua'))
MOD_OBJ   := $(BUILD)/obj/gen/lua_modules.o

.PHONY: all test check deps clean install examples bench fuzz unit specs integration rock rock-install

all: $(BUILD)/bin/lash $(BUILD)/liblash_internal.a $(BUILD)/liblash.a $(BUILD)/liblash.so $(BUILD)/lash/core.so $(BUILD)/lash.pc $(BUILD)/lash.1 $(TEST_BIN) $(LUAC_OUT)

$(BUILD)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ $<

# The supervisor inside each local sandbox's jail: static (the jail's
# rootfs may be any tree), never sanitized (it runs in the jail, not in
# lash), embedded in the library (src/5-backend/local/prim/jaild/blob.S).
$(BUILD)/jaild/lash-jaild: src/5-backend/local/prim/jaild/jaild.c src/5-backend/local/prim/jaild/sandbox_jaild.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 $(WARN) -D_GNU_SOURCE $(INCS) -static -s -o $@ src/5-backend/local/prim/jaild/jaild.c

$(BUILD)/obj/jaild_blob.o: src/5-backend/local/prim/jaild/blob.S $(BUILD)/jaild/lash-jaild
	@mkdir -p $(dir $@)
	$(CC) -c -DJAILD_PATH='"$(abspath $(BUILD))/jaild/lash-jaild"' -o $@ src/5-backend/local/prim/jaild/blob.S

$(BUILD)/luac/%.luac: lua/%.lua
	@mkdir -p $(dir $@)
	$(LUAC) -o $@ $(abspath $<)

$(BUILD)/obj/lua/%.o: vendor/lua/%.c $(wildcard vendor/lua/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu99 $(OPT) -Wall -Wextra -fPIC -fvisibility=hidden -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -c -o $@ $<

$(LUA_A): $(LUA_VOBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tools/lua2c: tools/lua2c.c $(LUA_A)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(WARN) -Ivendor/lua -o $@ $< $(LUA_A) -lm -ldl

$(BUILD)/gen/lua_modules.c: $(BUILD)/tools/lua2c $(addprefix lua/,$(LUA_MODS))
	@mkdir -p $(dir $@)
	$(BUILD)/tools/lua2c $@ lua $(LUA_MODS)

$(MOD_OBJ): $(BUILD)/gen/lua_modules.c src/7-embed/lmodules.h
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ $<

# Every object with every symbol, Lua not included: for the unit tests,
# benchmarks and fuzzers, which use lash's insides and link the system
# Lua (the CLI links the objects themselves, below). Hosts link liblash.a
# or liblash.so instead.
$(BUILD)/liblash_internal.a: $(LIB_OBJ) $(MOD_OBJ)
	@rm -f $@
	ar rcs $@ $^

# liblash.a for hosts: one relocatable object (ld -r) with lash, Lua 5.4
# and libyaml in it, every symbol but the API of liblash.map made local
# (objcopy), so a host that links its own Lua or LuaJIT statically, or
# libyaml, gets no clash; the host adds libcurl, -lm and -ldl.
$(BUILD)/liblash.a: $(LIB_OBJ) $(MOD_OBJ) $(LUA_A) src/7-embed/liblash.map
	sed -n 's/^ *\(lash_[a-z0-9_]*\);/\1/p' src/7-embed/liblash.map > $(BUILD)/obj/liblash.syms
	ld -r -o $(BUILD)/obj/liblash.o $(LIB_OBJ) $(MOD_OBJ) $(LUA_A) $(YAML_A)
	objcopy --keep-global-symbols=$(BUILD)/obj/liblash.syms $(BUILD)/obj/liblash.o
	@rm -f $@
	ar rcs $@ $(BUILD)/obj/liblash.o

# The shared library carries a soname (liblash.so.0: the ABI major), so
# hosts link against the major and a minor update replaces the file. The
# version script exports exactly lash's API (tests/integration/test_symbols.sh).
SOMAJOR   := 0
$(BUILD)/liblash.so.$(VERSION): $(LIB_OBJ) $(MOD_OBJ) $(LUA_A) src/7-embed/liblash.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,liblash.so.$(SOMAJOR) \
	  -Wl,--version-script=src/7-embed/liblash.map -Wl,--exclude-libs,ALL $(if $(SAN),,-Wl,-z,defs) \
	  -o $@ $(LIB_OBJ) $(MOD_OBJ) $(LUA_A) $(YAML_A) $(SO_LIBS)

$(BUILD)/liblash.so: $(BUILD)/liblash.so.$(VERSION)
	ln -sf liblash.so.$(VERSION) $(BUILD)/liblash.so.$(SOMAJOR)
	ln -sf liblash.so.$(VERSION) $@

# The module a stock lua5.4 loads: it must not link liblua itself, the
# interpreter provides the symbols.
$(BUILD)/lash/core.so: $(LIB_OBJ) src/7-embed/lash_core.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=src/7-embed/lash_core.map -o $@ $(LIB_OBJ) $(shell pkg-config --libs libcurl yaml-0.1 sqlite3) -lm

# The program's own code (src/8-cli/: `lash chat`'s line editor, which
# loads libedit when a chat starts, and the Lua heap's pool); the
# libraries never have it.
CLI_OBJ   := $(BUILD)/obj/8-cli/term.o $(BUILD)/obj/8-cli/pool.o
$(CLI_OBJ) $(BUILD)/obj/8-cli/main.o: src/8-cli/term.h src/8-cli/pool.h

# The CLI links the vendored Lua and libyaml statically: every shared
# library costs each start-up its loading and symbol lookups (issue 15's
# cold start). Its Lua is compiled again with default visibility and
# exported (-rdynamic, whole archive), so Lua C modules a trusted spec
# requires bind to it, as they do to the stock lua5.4's.
LUA_CLI_OBJ := $(LUA_VSRC:vendor/lua/%.c=$(BUILD)/obj/lua-cli/%.o)
LUA_CLI_A := $(BUILD)/obj/lua-cli/liblua.a
# and it loads libsqlite3 when a run first saves or reads a session
# (src/6-lua/lsqlite_dl.h): its own lsqlite.o, no -lsqlite3; and libcurl
# (with its TLS, HTTP/2 and Kerberos libraries) at the first request
# (src/1-base/curl_dl.h): its own objects of the files that call libcurl,
# no -lcurl, so a start that makes no request maps none of them.
CLI_CURL_SRC := src/1-base/curl_dl.c src/1-base/loop.c src/3-transport/http.c \
                src/3-transport/grpc.c src/6-lua/lhttp.c
CLI_CURL_OBJ := $(patsubst src/%.c,$(BUILD)/obj/cli/%.o,$(CLI_CURL_SRC))
CLI_LIBS   = $(filter-out -llua5.4 -lyaml -lsqlite3 -lcurl,$(LDLIBS))
CLI_LIBOBJ = $(filter-out $(BUILD)/obj/6-lua/lsqlite.o $(CLI_CURL_SRC:src/%.c=$(BUILD)/obj/%.o),$(LIB_OBJ)) \
             $(MOD_OBJ) $(BUILD)/obj/cli/lsqlite.o $(CLI_CURL_OBJ)

$(BUILD)/obj/cli/lsqlite.o: src/6-lua/lsqlite.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -DLASH_SQLITE_DLOPEN -c -o $@ $<

$(CLI_CURL_OBJ): $(BUILD)/obj/cli/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -DLASH_CURL_DLOPEN -c -o $@ $<

$(BUILD)/obj/lua-cli/%.o: vendor/lua/%.c $(wildcard vendor/lua/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu99 $(OPT) -Wall -Wextra -DLUA_COMPAT_5_3 -DLUA_USE_LINUX -c -o $@ $<

$(LUA_CLI_A): $(LUA_CLI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/lash: $(BUILD)/obj/8-cli/main.o $(CLI_OBJ) $(CLI_LIBOBJ) $(LUA_CLI_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -rdynamic -Wl,-O1,--as-needed -o $@ $< $(CLI_OBJ) $(CLI_LIBOBJ) -Wl,--whole-archive $(LUA_CLI_A) -Wl,--no-whole-archive $(YAML_A) $(CLI_LIBS) -lpthread

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liblash_internal.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Itests/unit -o $@ $< -Wl,--whole-archive $(BUILD)/liblash_internal.a -Wl,--no-whole-archive $(LDLIBS) $(LDFLAGS)

# The man page, made from the CLI's own help texts (`man -l build/lash.1`).
$(BUILD)/lash.1: $(BUILD)/bin/lash tools/manpage.sh
	bash tools/manpage.sh $(BUILD)/bin/lash > $@.tmp && mv $@.tmp $@

# Libs.private names libcurl and libsqlite3 as libraries (a static liblash.a
# links them shared): as Requires.private, `pkg-config --static` pulled in
# every static dependency of libcurl's own, whose archives Debian does not ship.
$(BUILD)/lash.pc: Makefile
	@mkdir -p $(dir $@)
	printf 'prefix=$${pcfiledir}/../..\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: lash\nDescription: embeddable Lua-scriptable agent harness\nVersion: %s\nCflags: -I$${includedir}\nLibs: -L$${libdir} -llash\nLibs.private: -lcurl -lsqlite3 -lm -ldl\n' '$(VERSION)' > $@

# ---- tests -------------------------------------------------------------

# make test T="json sandbox": only the tests whose names hold a word of T;
# make test -j2: two tests at a time (tests/run.sh says how).
TEST_JOBS = $(or $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))),1)
test: all
	@LASH_TEST_ONLY='$(T)' LASH_TEST_JOBS=$(TEST_JOBS) bash tests/run.sh

unit: $(TEST_BIN)
	@LASH_TEST_ONLY='$(T)' LASH_TEST_JOBS=$(TEST_JOBS) bash tests/run.sh unit

specs: all
	@LASH_TEST_ONLY='$(T)' LASH_TEST_JOBS=$(TEST_JOBS) bash tests/run.sh specs

check:
	$(MAKE) BUILD=build-san OPT='-O1 -g -fno-omit-frame-pointer' \
	  SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined' all
	LASH_BUILD=build-san LASH_SANITIZED=1 bash tests/run.sh

deps:
	@bash .ci/deps.sh

examples: all
	@if [ -f examples/embed/Makefile ]; then $(MAKE) -C examples/embed BUILD=$(CURDIR)/$(BUILD); fi
	@if pkg-config --exists luajit; then $(MAKE) -C examples/luajit-host BUILD=$(CURDIR)/$(BUILD) run static; fi

bench: all
	@bash bench/run.sh

fuzz:
	@bash fuzz/run.sh

# LuaRocks (rockspec/lash-scm-1.rockspec) builds only the module and hands
# us its install directories.
LUA_INCDIR ?=
rock:
	$(MAKE) BUILD=$(BUILD) $(if $(LUA_INCDIR),PKG_CFLAGS='-I$(LUA_INCDIR) $(shell pkg-config --cflags libcurl)') $(BUILD)/lash/core.so

rock-install:
	install -d $(INST_LIBDIR)/lash $(INST_LUADIR)/lash
	install -m755 $(BUILD)/lash/core.so $(INST_LIBDIR)/lash/core.so
	cd lua && find lash -name '*.lua' -exec install -D -m644 {} $(INST_LUADIR)/{} \;

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/lash/lua/lash \
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/lash $(DESTDIR)$(PREFIX)/share/lua/5.1 \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m644 $(BUILD)/lash.1 $(DESTDIR)$(PREFIX)/share/man/man1/lash.1
	install -m755 $(BUILD)/bin/lash $(DESTDIR)$(PREFIX)/bin/lash
	install -m644 $(BUILD)/liblash.a $(BUILD)/liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblash.so.$(SOMAJOR)
	ln -sf liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblash.so
	install -m644 $(BUILD)/lash.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m644 src/7-embed/lash.h src/7-embed/lash_lua.h $(DESTDIR)$(PREFIX)/include/
	install -m755 $(BUILD)/lash/core.so $(DESTDIR)$(PREFIX)/lib/lua/5.4/lash/
	# the LuaJIT FFI binding, where LuaJIT's require looks under the prefix
	install -m644 examples/ffi/lash_ffi.lua $(DESTDIR)$(PREFIX)/share/lua/5.1/
	cd lua && find lash -name '*.lua' -exec install -D -m644 {} $(DESTDIR)$(PREFIX)/share/lash/lua/{} \;
	cd $(BUILD)/luac && find lash -name '*.luac' -exec install -D -m644 {} $(DESTDIR)$(PREFIX)/share/lash/luac/{} \;

clean:
	rm -rf build build-san build-rock
