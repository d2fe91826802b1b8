// host.cpp: a C++17 host of lash. It includes lash.h as is (no extern "C"
// wrapper, no Lua headers), registers a tool made from a C++ function, runs
// a scripted offline agent that calls it, and prints the answer.
//
//   g++ -std=c++17 host.cpp $(pkg-config --cflags --libs lash) -o host
#include "lash.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Inventory {
  std::vector<std::string> items;
};

// The tool: add an item to the inventory, answered at once.
void add_item(lash_Call *call, const char *args_json, void *ud) {
  auto *inv = static_cast<Inventory *>(ud);
  std::string args(args_json);
  auto k = args.find("\"item\":\"");
  std::string item = k == std::string::npos ? "?" : args.substr(k + 8, args.find('"', k + 8) - k - 8);
  inv->items.push_back(item);
  std::string text = "added " + item + " (" + std::to_string(inv->items.size()) + " items)";
  lash_call_return(call, text.c_str());
}

const char *kSpec = R"(
return {
  name = "quartermaster",
  model = lash.script_model {
    function() return { tool_calls = { { name = "add_item", args = { item = "sword" } } } } end,
    function(messages)
      return "Stocked: " .. messages[#messages].parts[1].content
    end,
  },
})";

}  // namespace

int main() {
  Inventory inv;
  lash_State *S = lash_open(nullptr);
  if (!S || lash_load_spec_string(S, kSpec, "quartermaster.lua") != LASH_OK ||
      lash_register_tool(S, "add_item", "Add an item to the inventory.",
                         R"({"type":"object","properties":{"item":{"type":"string"}},"required":["item"]})",
                         add_item, &inv) != LASH_OK) {
    std::fprintf(stderr, "lash: %s\n", S ? lash_errmsg(S) : "out of memory");
    lash_close(S);
    return 1;
  }
  lash_Run *run = nullptr;
  if (lash_run_start(S, "Stock the armoury.", nullptr, &run) != LASH_OK ||
      lash_run(S) < 0) {
    std::fprintf(stderr, "lash: %s\n", lash_errmsg(S));
    lash_run_free(run);
    lash_close(S);
    return 1;
  }
  const char *out = nullptr;
  int status = lash_run_status(run);
  int st = lash_run_result(run, &out, nullptr);
  std::printf("status %d: %s\ninventory: %zu\n", status, out ? out : "(none)", inv.items.size());
  lash_run_free(run);
  lash_close(S);
  return st == LASH_OK ? 0 : 1;
}
