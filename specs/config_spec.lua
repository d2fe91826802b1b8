-- lash.config: parsing Lua-data config files, and that the config only
-- steers models once the CLI has taken it in (a host embedding lash is not
-- steered by a file in the user's home).
local config = require "lash.config"

describe("lash.config", function()
  after_each(function()
    config.reset()
    config.active = nil
  end)

  it("parses assignments and a returned table alike", function()
    local a = assert(config.parse('model = "test"\nmodel_settings = { temperature = 0.5 }', "a.lua"))
    assert.equal("test", a.model)
    assert.equal(0.5, a.model_settings.temperature)
    local b = assert(config.parse('return { model = "test" }', "b.lua"))
    assert.equal("test", b.model)
  end)

  it("refuses a file that both assigns and returns", function()
    local c, err = config.parse('model = "test" return { model = "x" }', "c.lua")
    assert.is_nil(c)
    assert.matches("either assign settings", err, 1, true)
  end)

  it("leaves the string metatable as it found it, even after an error", function()
    local index = getmetatable("").__index
    assert.is_nil((config.parse('x = ("a"):upper()', "d.lua")))
    assert.equal(index, getmetatable("").__index)
    assert.equal("A", ("a"):upper())
  end)

  it("refuses a file larger than the size budget", function()
    local c, err = config.parse(string.rep(" ", config.BUDGET.size + 1), "big.lua")
    assert.is_nil(c)
    assert.matches("larger than", err, 1, true)
  end)

  it("fills provider options only once active", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write('providers = { openai = { base_url = "http://127.0.0.1:9/v1" } }\n')
    f:close()
    local c = assert(config.load(path))
    config.reset()
    local old_get = config.get
    config.get = function() return c end
    local inactive = config.model_options("openai", {})
    config.active = true
    local active = config.model_options("openai", {})
    local given = config.model_options("openai", { base_url = "http://given/v1" })
    config.get = old_get
    os.remove(path)
    assert.is_nil(inactive.base_url)
    if os.getenv("OPENAI_BASE_URL") == nil or os.getenv("OPENAI_BASE_URL") == "" then
      assert.equal("http://127.0.0.1:9/v1", active.base_url)
    end
    assert.equal("http://given/v1", given.base_url)
  end)
end)
