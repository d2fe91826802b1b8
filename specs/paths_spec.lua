-- lash.paths: one resolver for lash's per-user directories (XDG rules), and
-- every file lash keeps per user found through it.
local paths = require "lash.paths"

local function env(t) return function(k) return t[k] end end

describe("lash.paths", function()
  it("follows an absolute XDG variable, ignores a relative one, else goes under HOME", function()
    assert.same({ "/x/state/lash", "XDG_STATE_HOME" },
      { paths.user_dir("state", env { XDG_STATE_HOME = "/x/state", HOME = "/h" }) })
    assert.same({ "/h/.local/state/lash", "HOME" },
      { paths.user_dir("state", env { XDG_STATE_HOME = "rel/state", HOME = "/h" }) })
    assert.same({ "/h/.config/lash", "HOME" }, { paths.user_dir("config", env { HOME = "/h" }) })
    assert.same({ "/c/lash", "XDG_CONFIG_HOME" },
      { paths.user_dir("config", env { XDG_CONFIG_HOME = "/c", HOME = "/h" }) })
  end)

  it("says so when there is no directory at all, rather than guessing one", function()
    local dir, why = paths.user_dir("state", env { HOME = "relative" })
    assert.is_nil(dir)
    assert.matches("set %$XDG_STATE_HOME or %$HOME to an absolute path", why)
    assert.is_nil(paths.user_file(env {}, "LASH_CONFIG", "config", "config.lua"))
    assert.error_matches(function() paths.user_dir("cache", env {}) end, "invalid option 'cache'")
  end)

  it("puts the config file, the sessions database, the chat history and MCP tokens in one place", function()
    local e = env { XDG_STATE_HOME = "/s", XDG_CONFIG_HOME = "/c", HOME = "/h" }
    assert.same({ "/c/lash/config.lua", "XDG_CONFIG_HOME" }, { require("lash.config").path(e) })
    assert.same({ "/s/lash/sessions.db", "XDG_STATE_HOME" }, { require("lash.sessions").path(e) })
    assert.equal("/s/lash/chat_history", require("lash.commands.chat").history_path(e))
    assert.same({ "/h/.local/state/lash/sessions.db", "default" },
      { require("lash.sessions").path(env { HOME = "/h" }) })
    assert.same({ "/f.db", "LASH_SESSIONS_DB" }, { require("lash.sessions").path(env { LASH_SESSIONS_DB = "/f.db" }) })
    local state = paths.user_dir("state")
    if state then
      assert.equal(state .. "/mcp-oauth/",
        require("lash.mcp.oauth").default_token_file("https://x.test/mcp"):match("^(.*/)[^/]+$"))
    end
  end)
end)
