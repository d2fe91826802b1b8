-- lash.template: {{ expr }} rendering in a restricted environment.
local lash = require "lash"
local template = require "lash.template"

local function render_error(src, vars, name)
  local ok, err = pcall(template.render, src, vars, name)
  assert.is_false(ok, "expected the render to fail")
  return err
end

describe("template.render", function()
  it("renders expressions against the variables", function()
    assert.equal("Hello Ada, you have 3 files.",
      template.render("Hello {{ deps.user }}, you have {{ #deps.files }} files.",
                      { deps = { user = "Ada", files = { 1, 2, 3 } } }))
  end)

  it("returns text without placeholders unchanged", function()
    assert.equal("plain text { not } a template", template.render("plain text { not } a template", {}))
  end)

  it("formats numbers, booleans and tables", function()
    assert.equal("2 2.5 true [1,2]", template.render("{{ 4/2 }} {{ 2.5 }} {{ x }} {{ l }}",
      { x = true, l = lash.json.array({ 1, 2 }) }))
  end)

  it("allows string helpers but nothing dangerous", function()
    assert.equal("ADA", template.render("{{ string.upper(name) }}", { name = "ada" }))
    local err = render_error("{{ os.execute('true') }}", {}, "instructions")
    assert.equal("template 'instructions' line 1: undefined name 'os'", err.message)
    err = render_error("{{ io }}", {}, "t")
    assert.matches("undefined name 'io'", err.message, 1, true)
    err = render_error("{{ require('os') }}", {}, "t")
    assert.matches("undefined name 'require'", err.message, 1, true)
  end)

  it("fails on an undefined name with the template, the line and the name", function()
    local err = render_error("line one\nline two {{ deps.sandbox }}\n{{ nope }}", { deps = {} }, "Sandbox.attach_to")
    assert.is_true(lash.is_error(err, "template"))
    assert.equal("template 'Sandbox.attach_to' line 2: undefined name 'deps.sandbox'", err.message)
    assert.equal("Sandbox.attach_to", err.template)
    assert.equal(2, err.line)
    assert.equal("deps.sandbox", err.name)
    err = render_error("a\nb\nc {{ missing_var }}", {}, "instructions")
    assert.equal("template 'instructions' line 3: undefined name 'missing_var'", err.message)
    assert.equal("missing_var", err.name)
  end)

  it("reports parse errors and unclosed placeholders with the line", function()
    local err = render_error("x\n{{ 1 + }}", {}, "t")
    assert.matches("^template 't' line 2: cannot parse '1 %+'", err.message)
    err = render_error("x\ny\n{{ open", {}, "t")
    assert.equal("template 't' line 3: '{{' is never closed", err.message)
  end)

  it("reports an expression that raises", function()
    local err = render_error("{{ f() }}", { f = function() error("boom", 0) end }, "t")
    assert.equal("template 't' line 1: {{ f() }} failed: boom", err.message)
  end)

  it("cannot assign to variables", function()
    local vars = { deps = {} }
    render_error("{{ (function() x = 1 end)() }}", vars, "t")
    assert.is_nil(vars.x)
  end)

  it("writes a literal {{ through an expression", function()
    assert.equal("use {{ name }}", template.render('use {{ "{{" }} name }}', {}))
  end)

  it("renders the same template against different variables (compiled once)", function()
    local src = "n={{ n }}"
    for i = 1, 5 do assert.equal("n=" .. i, template.render(src, { n = i })) end
  end)
end)

describe("template.render_fields", function()
  it("renders string fields into a copy and leaves the original alone", function()
    local opts = { attach_to = "{{ deps.sandbox }}", timeout = 30, nested = { path = "/w/{{ deps.sandbox }}" } }
    local out = template.render_fields(opts, { deps = { sandbox = "sb-1" } }, "Sandbox")
    assert.same({ attach_to = "sb-1", timeout = 30, nested = { path = "/w/sb-1" } }, out)
    assert.equal("{{ deps.sandbox }}", opts.attach_to)
    assert.equal("/w/{{ deps.sandbox }}", opts.nested.path)
  end)

  it("names the field in errors", function()
    local ok, err = pcall(template.render_fields, { attach_to = "{{ deps.sandbox }}" }, { deps = {} }, "Sandbox")
    assert.is_false(ok)
    assert.equal("template 'Sandbox.attach_to' line 1: undefined name 'deps.sandbox'", err.message)
  end)
end)
