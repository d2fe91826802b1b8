#!/usr/bin/env bash
# tests/integration/test_layers.sh: tools/check_layers, the check that every
# #include, cross-file call and require points down the layers of docs/architecture.md with no
# cycle. First on planted trees (so the check is seen to catch each kind of
# offence, flat and moved layout), then on lash itself. TAP output.
. "$(dirname "$0")/../lib.sh"
CHECK="lua5.4 tools/check_layers"
command -v lua5.4 >/dev/null || skip_all "needs lua5.4"
command -v nm >/dev/null || skip_all "needs nm (binutils)"
[ -d "$BUILD/obj" ] || skip_all "$BUILD is not built"
new_tmp plant

# plant_c DIR FILE TEXT: a C file of the planted tree, compiled into its
# build/obj the way the Makefile does (src/X.c -> build/obj/X.o)
plant_c() {
  local root=$1 file=$2 obj
  mkdir -p "$root/$(dirname "$file")"
  printf '%s\n' "$3" > "$root/$file"
  case $file in *.c)
    obj=$root/build/obj/${file#src/}; obj=${obj%.c}.o
    mkdir -p "$(dirname "$obj")"
    cc -c $(pkg-config --cflags lua5.4) -I"$root/src" $(for d in "$root"/src/[0-9]*/ "$root"/src/[0-9]*/*/; do [ -d "$d" ] && printf -- '-I%s ' "$d"; done) \
      -o "$obj" "$root/$file" || echo "# cc failed on $file"
  esac
}
plant_lua() { mkdir -p "$1/lua/$(dirname "$2")"; printf '%s\n' "$3" > "$1/lua/$2"; }
run_check() { out=$($CHECK --root "$1" --build "$1/build" "${@:2}" 2>&1); rc=$?; }

# --- a flat tree with one offence of each kind ---
f=$plant/flat
mkdir -p "$f/tools"
cat > "$f/tools/layers.txt" <<'EOF'
src/base.h -> 1-base
src/base.c -> 1-base
src/core.c -> 6-lua
src/core.h -> 6-lua
src/a.c -> 2-runtime
src/b.c -> 2-runtime
src/local.c -> 5-backend/local
src/modal.c -> 5-backend/modal
src/lua1.c -> 1-base
lash.core -> 1
lash.json -> 1
lash.tool -> 2
lash.models.* -> 2
lash -> 4
EOF
plant_c "$f" src/core.h 'int core_fn(void);'
plant_c "$f" src/base.h '#include "core.h"'
plant_c "$f" src/base.c '#include "base.h"
int base_fn(void); int base_fn(void) { return core_fn(); }'
plant_c "$f" src/core.c 'int core_fn(void); int core_fn(void) { return 1; }'
plant_c "$f" src/a.c 'int a_fn(void); int b_fn(void); int a_fn(void) { return b_fn(); }'
plant_c "$f" src/b.c 'int a_fn(void); int b_fn(void); int b_fn(void) { return a_fn(); }'
plant_c "$f" src/local.c 'int modal_fn(void); int local_fn(void); int local_fn(void) { return modal_fn(); }'
plant_c "$f" src/modal.c 'int modal_fn(void); int modal_fn(void) { return 2; }'
plant_c "$f" src/lua1.c '#include "lua.h"'
plant_c "$f" src/new.c 'int new_fn(void); int new_fn(void) { return 3; }'
plant_lua "$f" lash/init.lua 'return {}'
plant_lua "$f" lash/json.lua 'local core = require "lash.core"
-- an example in a comment does not count: require "lash"
return {}'
plant_lua "$f" lash/tool.lua 'local lash = require("lash")
local ok, m = pcall(require, "lash.models." .. "x")
return {}'
plant_lua "$f" lash/models/init.lua 'return {}'
plant_lua "$f" lash/models/x.lua 'local t = require "lash.tool"
return {}'
plant_lua "$f" lash/unranked.lua 'return {}'
run_check "$f"
printf '%s\n' "$out" | sed 's/^/# /'
[ "$rc" = 1 ]; ok $? "a tree with offences fails (exit $rc)"
line() { printf '%s\n' "$out" | grep -qF -- "$1"; }
line 'UP        src/base.h [1-base] -> src/core.h [6-lua]: include "core.h"'
ok $? "an include of a header of a higher layer is UP, naming both files and the include"
line 'UP        src/base.c [1-base] -> src/core.c [6-lua]: calls core_fn'
ok $? "a call into an object of a higher layer is UP, naming the symbol (nm)"
line 'CYCLE     #' && line 'src/a.c [2-runtime] -> src/b.c [2-runtime]: calls b_fn' &&
  line 'src/b.c [2-runtime] -> src/a.c [2-runtime]: calls a_fn'
ok $? "a cycle within a layer is a CYCLE, each of its arrows on a line"
line 'SIDEWAYS  src/local.c [5-backend/local] -> src/modal.c [5-backend/modal]: calls modal_fn'
ok $? "one backend calling the other is SIDEWAYS"
line 'LUA-API   src/lua1.c [1-base, Lua-free]: include "lua.h"'
ok $? "layer 1 including a Lua header is refused"
line 'UNPLACED  src/new.c: no layer'
ok $? "a C file with no layer is UNPLACED"
line 'UNPLACED  lash.unranked (lua/lash/unranked.lua): no rank'
ok $? "a Lua module with no rank is UNPLACED"
line 'UP        lash.tool [2] -> lash [4]: require "lash"'
ok $? "a module requiring the facade from below is UP"
line 'CYCLE     #' && line 'lash.models.x [2] -> lash.tool [2]: require "lash.tool"' &&
  line 'lash.tool [2] -> lash.models.x [2]: require "lash.models."..'
ok $? "a cycle through a computed require (pcall(require, prefix .. name)) is found"
! line 'lash.json [1] -> lash [4]'
ok $? "a require in a comment is not an arrow"

# --- the same kinds of files, laid out in layer directories, all down ---
m=$plant/moved
mkdir -p "$m/tools"; : > "$m/tools/layers.txt"
printf 'lash -> 4\nlash.core -> 1\n' > "$m/tools/layers.txt"
mkdir -p "$m"/src/1-base "$m"/src/6-lua "$m"/src/5-backend/local "$m"/src/5-backend/modal
plant_c "$m" src/1-base/base.h 'int base_fn(void);'
plant_c "$m" src/1-base/base.c '#include "base.h"
int base_fn(void) { return 1; }'
plant_c "$m" src/6-lua/core.c '#include "base.h"
int core_fn(void); int core_fn(void) { return base_fn(); }'
plant_c "$m" src/5-backend/local/local.c '#include "base.h"
int local_fn(void); int local_fn(void) { return base_fn(); }'
plant_lua "$m" lash/init.lua 'local core = require "lash.core"
return {}'
run_check "$m"
printf '%s\n' "$out" | sed 's/^/# /'
[ "$rc" = 0 ]; ok $? "layer directories place files with no table line; all arrows down passes (exit $rc)"
line 'every arrow points down'; ok $? "and the summary says so"
plant_c "$m" src/1-base/up.c 'int core_fn(void); int up_fn(void); int up_fn(void) { return core_fn(); }'
run_check "$m"
[ "$rc" = 1 ] && line 'UP        src/1-base/up.c [1-base] -> src/6-lua/core.c [6-lua]: calls core_fn'
ok $? "an upward call between layer directories fails"

rm -f "$m/src/1-base/up.c" "$m/build/obj/1-base/up.o"

# --- a sublayer: a group inside another sits below it; lua-free groups ---
printf 'lua-free 5-backend/local/prim\n' >> "$m/tools/layers.txt"
mkdir -p "$m/src/5-backend/local/prim"
plant_c "$m" src/5-backend/local/prim/prim.h 'int prim_fn(void);'
plant_c "$m" src/5-backend/local/prim/prim.c '#include "prim.h"
int prim_fn(void) { return 4; }'
plant_c "$m" src/5-backend/local/slot.c '#include "prim/prim.h"
int slot_fn(void); int slot_fn(void) { return prim_fn(); }'
run_check "$m"
[ "$rc" = 0 ] && line 'sublayers: 5-backend/local/prim (Lua-free) below 5-backend/local'
ok $? "a group calling into the sublayer it holds passes, and the summary names the sublayer"
plant_c "$m" src/5-backend/local/prim/back.c 'int slot_fn(void); int back_fn(void); int back_fn(void) { return slot_fn(); }'
run_check "$m"
[ "$rc" = 1 ] && line 'UP        src/5-backend/local/prim/back.c [5-backend/local/prim] -> src/5-backend/local/slot.c [5-backend/local]: calls slot_fn (a sublayer reaches into the group that holds it)'
ok $? "a sublayer calling up into the group that holds it is UP"
rm -f "$m/src/5-backend/local/prim/back.c" "$m/build/obj/5-backend/local/prim/back.o"
plant_c "$m" src/5-backend/local/luaish.h '#include "lua.h"'
plant_c "$m" src/5-backend/local/prim/lua2.c '#include "luaish.h"'
plant_c "$m" src/5-backend/local/prim/lua3.c 'int lua_gettop(void *L); int lua3_fn(void *L); int lua3_fn(void *L) { return lua_gettop(L); }'
run_check "$m"
[ "$rc" = 1 ] && line 'LUA-API   src/5-backend/local/prim/lua2.c [5-backend/local/prim, Lua-free]: include "luaish.h" (include "lua.h")' &&
  line 'LUA-API   src/5-backend/local/prim/lua3.c [5-backend/local/prim, Lua-free]: calls lua_gettop'
ok $? "a Lua-free sublayer including Lua through a header, or calling Lua's API, is LUA-API"

run_check "$m" --build "$plant/nowhere"
[ "$rc" = 2 ] && line 'build first'
ok $? "no objects to read is an error, not a pass"

# --- lash itself ---
run_check "$PWD" --build "$BUILD"
printf '%s\n' "$out" | sed 's/^/# /'
[ "$rc" = 0 ]; ok $? "lash: every include, call and require points down, no cycle (tools/check_layers)"
done_testing
