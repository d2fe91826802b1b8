# lash build. `make` builds the CLI, the static and shared libraries, the
# Lua C module and the pkg-config file; `make test` runs every test with one
# summary; `make check` runs the same under ASan+UBSan.
#
# Sources are picked up by wildcard: every src/*.c but src/main.c goes into
# the library; every tests/unit/test_*.c is its own test binary.

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
# XCFLAGS is ours; CFLAGS is the caller's (LuaRocks passes its own).
XCFLAGS   := -std=gnu11 $(OPT) $(WARN) $(SAN) -fPIC -D_GNU_SOURCE \
             -DLASH_VERSION='"$(VERSION)"' -DLASH_PREFIX='"$(PREFIX)"' -DLASH_SRCDIR='"$(CURDIR)"' \
             $(PKG_CFLAGS) -Isrc
LDLIBS    += $(PKG_LIBS) -lm -ldl
LDFLAGS   += $(SAN)

LIB_SRC   := $(filter-out src/main.c,$(wildcard src/*.c))
LIB_OBJ   := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(wildcard tests/unit/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HDRS      := $(wildcard src/*.h) tests/unit/t.h

.PHONY: all test check deps clean install examples bench fuzz unit specs integration rock rock-install

all: $(BUILD)/bin/lash $(BUILD)/liblash.a $(BUILD)/liblash.so $(BUILD)/lash/core.so $(BUILD)/lash.pc $(TEST_BIN)

$(BUILD)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/liblash.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library carries a soname (liblash.so.0: the ABI major), so
# hosts link against the major and a minor update replaces the file.
SOMAJOR   := 0
$(BUILD)/liblash.so.$(VERSION): $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,liblash.so.$(SOMAJOR) -o $@ $^ $(LDLIBS)

$(BUILD)/liblash.so: $(BUILD)/liblash.so.$(VERSION)
	ln -sf liblash.so.$(VERSION) $(BUILD)/liblash.so.$(SOMAJOR)
	ln -sf liblash.so.$(VERSION) $@

# The module a stock lua5.4 loads: it must not link liblua itself, the
# interpreter provides the symbols.
$(BUILD)/lash/core.so: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs libcurl yaml-0.1 sqlite3) -lm

# The program's own terminal code (src/cli/: `lash chat`'s line editor;
# it loads libedit when a chat starts); the libraries never have it.
CLI_OBJ   := $(BUILD)/obj/cli/term.o
$(CLI_OBJ) $(BUILD)/obj/main.o: src/cli/term.h

$(BUILD)/bin/lash: $(BUILD)/obj/main.o $(CLI_OBJ) $(BUILD)/liblash.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -rdynamic -o $@ $< $(CLI_OBJ) -Wl,--whole-archive $(BUILD)/liblash.a -Wl,--no-whole-archive $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liblash.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(CFLAGS) -Itests/unit -o $@ $< -Wl,--whole-archive $(BUILD)/liblash.a -Wl,--no-whole-archive $(LDLIBS) $(LDFLAGS)

$(BUILD)/lash.pc: Makefile
	@mkdir -p $(dir $@)
	printf 'prefix=$${pcfiledir}/../..\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: lash\nDescription: embeddable Lua-scriptable agent harness\nVersion: %s\nRequires.private: lua5.4 libcurl yaml-0.1 sqlite3\nCflags: -I$${includedir}\nLibs: -L$${libdir} -llash\nLibs.private: -lm -ldl\n' '$(VERSION)' > $@

# ---- tests -------------------------------------------------------------

test: all
	@bash tests/run.sh

unit: $(TEST_BIN)
	@bash tests/run.sh unit

specs: all
	@bash tests/run.sh specs

check:
	$(MAKE) BUILD=build-san OPT='-O1 -g -fno-omit-frame-pointer' \
	  SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined' all
	LASH_BUILD=build-san LASH_SANITIZED=1 bash tests/run.sh

deps:
	@bash .ci/deps.sh

examples: all
	@if [ -f examples/embed/Makefile ]; then $(MAKE) -C examples/embed BUILD=$(CURDIR)/$(BUILD); fi

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
	  $(DESTDIR)$(PREFIX)/lib/lua/5.4/lash
	install -m755 $(BUILD)/bin/lash $(DESTDIR)$(PREFIX)/bin/lash
	install -m644 $(BUILD)/liblash.a $(BUILD)/liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblash.so.$(SOMAJOR)
	ln -sf liblash.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/liblash.so
	install -m644 $(BUILD)/lash.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m644 src/lash.h src/lash_lua.h $(DESTDIR)$(PREFIX)/include/
	install -m755 $(BUILD)/lash/core.so $(DESTDIR)$(PREFIX)/lib/lua/5.4/lash/
	cd lua && find lash -name '*.lua' -exec install -D -m644 {} $(DESTDIR)$(PREFIX)/share/lash/lua/{} \;

clean:
	rm -rf build build-san build-rock
