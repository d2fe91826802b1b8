-- Cross-task sandboxes (issue 7): attach_to and owner on the sandbox
-- capability -- construction refusals, per-run rendering of the handle,
-- identity (explicit, run holder, Airflow), the claim (owner refused,
-- holder refused, same holder re-enters, racing claims), release with
-- retries, the run_command note and its stability, deadlines cut to the
-- lifetime left, approvals across runs, and lash run --attach.
local lash = require "lash"
local fakes = require "helpers.fake_sandbox"
local sbcap = require "lash.capabilities.sandbox"
local agents = require "lash.cli.agents"
local fmt = require "lash.capabilities.sandbox_format"
local identity = require "lash.identity"

local TAGS = lash.sandbox.tags

local function refused(opts)
  local ok, err = pcall(lash.sandbox_capability, opts)
  assert.is_false(ok, "expected the options to be refused")
  return (tostring(err):gsub("^lash%.sandbox_capability: ", ""))
end

local function owned_by(owner, extra)
  local tags = { [TAGS.owner] = owner }
  for k, v in pairs(extra or {}) do tags[k] = v end
  return { tags = tags }
end

-- Swap module settings for one test.
local function with(settings, fn)
  local saved = {}
  for k, v in pairs(settings) do
    saved[k] = sbcap[k]
    sbcap[k] = v
  end
  local ok, err = pcall(fn)
  for k, v in pairs(saved) do sbcap[k] = v end
  if not ok then error(err, 0) end
end

local function no_env()
  return nil
end

local function env_of(t)
  return function(k) return t[k] end
end

-- An agent with the capability whose model runs `steps` (functions or
-- responses); returns run result or raises.
local function agent_of(cap, steps, extra)
  local def = { model = lash.script_model(steps), capabilities = { cap } }
  for k, v in pairs(extra or {}) do def[k] = v end
  return lash.agent(def)
end

local function run_failing(agent, prompt, opts)
  local ok, err = pcall(agent.run, agent, prompt or "go", opts)
  assert.is_false(ok, "expected the run to fail")
  return err
end

describe("construction refusals", function()
  local f = fakes.new { create_options = { "image" } }
  local untagged = fakes.new { tags = false }

  it("refuses owner without attach_to", function()
    assert.equal("owner only applies together with attach_to: it is the owner the provisioning step stamped on "
      .. "the sandbox this run attaches to. To stamp an owner, create the sandbox with it (`lash sandbox create "
      .. "--owner O`, or lash.sandbox.create{owner = ...}).", refused { owner = "me" })
  end)

  it("refuses attach_to with sandbox_id or session", function()
    assert.matches("^sandbox_id cannot be combined with `attach_to`",
      refused { backend = f.name, attach_to = "a", sandbox_id = "b" })
    local s <close> = lash.sandbox.session { backend = f.name }
    assert.equal("attach_to cannot be combined with `session`, which already owns the sandbox and its "
      .. "configuration.", refused { session = s, attach_to = "a" })
  end)

  it("refuses creation-only options with attach_to, naming each", function()
    for _, o in ipairs { { image = "x" }, { workdir = "/w" }, { env = {} }, { network = "off" } } do
      local k = next(o)
      o.backend, o.attach_to = f.name, "sb"
      assert.equal(k .. " only apply when creating a sandbox, but `attach_to` attaches to one an earlier step "
        .. "created (that step chose them). Remove them, or drop `attach_to` to create a sandbox.", refused(o))
    end
    assert.equal("sandbox_timeout only apply when creating a sandbox, but `attach_to` attaches to one an earlier "
      .. "step created (that step chose them). Remove them, or drop `attach_to` to create a sandbox. To raise the "
      .. "per-command timeout ceiling on a reused sandbox, set `max_command_timeout`.",
      refused { backend = f.name, attach_to = "sb", sandbox_timeout = 600 })
  end)

  it("refuses a handle that is empty or not a string", function()
    for _, v in ipairs { "", "nil", "None" } do
      assert.equal("attach_to must be a sandbox handle, not " .. fmt.quote(v) .. ". Pass the handle the "
        .. "provisioning step printed (lash sandbox create), or a template that renders to it.",
        refused { backend = f.name, attach_to = v })
    end
    assert.equal("attach_to must be a sandbox handle, a template such as '{{ deps.sandbox }}', or a "
      .. "function(ctx) returning one, got 42.", refused { backend = f.name, attach_to = 42 })
    assert.equal("owner must be a non-empty string, got ''.", refused { backend = f.name, attach_to = "x", owner = "" })
  end)

  it("refuses a backend that cannot hold tags", function()
    assert.equal("attach_to needs a backend that can hold tags (the owner and holder marks), and the "
      .. untagged.name .. " backend cannot. Use a backend that can, such as local or modal, or drop attach_to and "
      .. "owner.", refused { backend = untagged.name, attach_to = "sb" })
  end)

  it("accepts a handle, a template or a function, with the reuse ceiling", function()
    local cap = lash.sandbox_capability { backend = f.name, attach_to = "{{ deps.sandbox }}", owner = "me" }
    assert.equal("attached", cap.mode)
    assert.is_true(cap.claims)
    assert.equal(300, cap.ceiling)
    assert.matches("persists across runs", lash.render(cap:get_instructions()[1], { tools = {} }), 1, true)
    lash.sandbox_capability { backend = f.name, attach_to = function() return "x" end }
  end)
end)

describe("the handle, rendered per run", function()
  local f
  before_each(function() f = fakes.new {} end)

  it("attaches to what the template renders from the run's deps", function()
    local id = f.add(owned_by("me"))
    local cap = lash.sandbox_capability { backend = f.name, attach_to = "{{ deps.sandbox }}", owner = "me" }
    local agent = agent_of(cap, { { tool_calls = { { name = "run_command", args = { command = "pwd" } } } }, "done" })
    agent:run("go", { deps = { sandbox = id } })
    assert.equal(id, f.calls_of("exec")[1].id)
    assert.equal("{{ deps.sandbox }}", cap.opts.attach_to)
    assert.same({}, f.created)
  end)

  it("fails the run, creating nothing, when it renders to nothing", function()
    local cases = {
      { nil, "attach_to rendered to nothing (template 'Sandbox.attach_to' line 1: undefined name "
        .. "'deps.sandbox'), which is not a sandbox handle." },
      { "", "attach_to rendered to '', which is not a sandbox handle." },
      { "None", "attach_to rendered to 'None', which is not a sandbox handle." },
      { "nil", "attach_to rendered to 'nil', which is not a sandbox handle." },
    }
    for _, c in ipairs(cases) do
      local called = false
      local cap = lash.sandbox_capability { backend = f.name, attach_to = "{{ deps.sandbox }}", owner = "me" }
      local agent = lash.agent { model = function() called = true return "x" end, capabilities = { cap } }
      local err = run_failing(agent, "go", { deps = { sandbox = c[1] } })
      assert.equal("config", err.kind)
      assert.equal(c[2] .. " The step that provisions the sandbox produced nothing, or this step ran before it; "
        .. "check the upstream step and the handle it passes on. No sandbox was created in its place.", err.message)
      assert.is_false(called)
    end
    local cap = lash.sandbox_capability { backend = f.name, attach_to = function() return 42 end, owner = "me" }
    local err = run_failing(lash.agent { model = lash.script_model { "x" }, capabilities = { cap } })
    assert.matches("^attach_to rendered to a number, which is not a sandbox handle%.", err.message)
    assert.same({}, f.created)
    assert.same({}, f.calls)
  end)
end)

describe("identity", function()
  it("comes from the owner outside an orchestrator", function()
    assert.same({ owner = "me", holder = "me" }, identity.resolve { owner = "me", getenv = no_env })
    assert.same({ owner = "me", holder = "step-2" }, identity.resolve { owner = "me", holder = "step-2",
                                                                       getenv = no_env })
    local who, why = identity.resolve { getenv = no_env }
    assert.is_nil(who)
    assert.equal(identity.NO_OWNER, why)
  end)

  it("comes from Airflow's task context, without the try number", function()
    local env = { AIRFLOW_CTX_DAG_ID = "my_dag", AIRFLOW_CTX_DAG_RUN_ID = "manual__2026-01-01T00:00:00+00:00",
                  AIRFLOW_CTX_TASK_ID = "analyse", AIRFLOW_CTX_TRY_NUMBER = "2" }
    assert.same({ owner = "my_dag/manual__2026-01-01T00:00:00+00:00",
                  holder = "my_dag/manual__2026-01-01T00:00:00+00:00/analyse", orchestrator = "airflow" },
      identity.resolve { getenv = env_of(env) })
    env.AIRFLOW_CTX_MAP_INDEX = "3"
    assert.equal("my_dag/manual__2026-01-01T00:00:00+00:00/analyse[3]", identity.resolve { getenv = env_of(env) }.holder)
    env.AIRFLOW_CTX_MAP_INDEX = "-1"
    assert.equal("my_dag/manual__2026-01-01T00:00:00+00:00/analyse", identity.resolve { getenv = env_of(env) }.holder)
    local who = identity.resolve { owner = "shared-pool", getenv = env_of(env) }
    assert.equal("shared-pool", who.owner)
    assert.equal("my_dag/manual__2026-01-01T00:00:00+00:00/analyse", who.holder)
  end)

  it("needs all three Airflow variables", function()
    assert.is_nil(identity.airflow(env_of { AIRFLOW_CTX_DAG_ID = "d", AIRFLOW_CTX_TASK_ID = "t" }))
  end)
end)

describe("the claim", function()
  local f
  before_each(function() f = fakes.new {} end)

  local function attach_run(id, opts, steps, run_opts)
    opts = opts or {}
    opts.backend, opts.attach_to = f.name, id
    local cap = lash.sandbox_capability(opts)
    return agent_of(cap, steps or { "done" }), run_opts
  end

  it("marks the holder while the run works and clears it after, keeping every other tag", function()
    local id = f.add(owned_by("me", { team = "data" }))
    local during
    local agent = attach_run(id, { owner = "me" }, { function() during = f.boxes[id].tags return "done" end })
    with({ getenv = no_env }, function() agent:run("go") end)
    assert.same({ [TAGS.owner] = "me", [TAGS.holder] = "me", team = "data" }, during)
    assert.same({ [TAGS.owner] = "me", team = "data" }, f.boxes[id].tags)
    assert.same({}, f.created)
    assert.same({}, f.destroyed)
  end)

  it("takes the holder from the run, or from Airflow", function()
    local id = f.add(owned_by("me"))
    local during
    local agent = attach_run(id, { owner = "me" }, { function() during = f.boxes[id].tags[TAGS.holder] return "x" end })
    with({ getenv = no_env }, function() agent:run("go", { holder = "pipeline/step-2" }) end)
    assert.equal("pipeline/step-2", during)
    local id2 = f.add(owned_by("d/r"))
    agent = attach_run(id2, {}, { function() during = f.boxes[id2].tags[TAGS.holder] return "x" end })
    with({ getenv = env_of { AIRFLOW_CTX_DAG_ID = "d", AIRFLOW_CTX_DAG_RUN_ID = "r", AIRFLOW_CTX_TASK_ID = "t",
                             AIRFLOW_CTX_MAP_INDEX = "3" } }, function() agent:run("go") end)
    assert.equal("d/r/t[3]", during)
  end)

  it("needs an owner outside an orchestrator", function()
    local id = f.add(owned_by("me"))
    local agent = attach_run(id, {})
    local err
    with({ getenv = no_env }, function() err = run_failing(agent) end)
    assert.equal("config", err.kind)
    assert.equal(identity.NO_OWNER, err.message)
    assert.same({}, f.calls)
  end)

  it("refuses the wrong owner before the model spends anything, writing nothing", function()
    local id = f.add(owned_by("other_dag/run"))
    local called = false
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "dag/run" }
    local agent = lash.agent { model = function() called = true return "x" end, capabilities = { cap } }
    local err
    with({ getenv = no_env }, function() err = run_failing(agent) end)
    assert.equal("refused", err.kind)
    assert.is_true(err.terminal)
    assert.equal("Sandbox '" .. id .. "' is not owned by 'dag/run': it carries owner 'other_dag/run'. Attach with "
      .. "the owner the provisioning step stamped, or check that the handle is the one meant for this run.",
      err.message)
    assert.is_false(called)
    assert.same({}, f.calls_of("write_tags"))
    assert.same({}, f.calls_of("exec"))
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
  end)

  it("refuses a sandbox that carries no owner", function()
    local id = f.add {}
    local err
    with({ getenv = no_env }, function() err = run_failing(attach_run(id, { owner = "me" })) end)
    assert.equal("refused", err.kind)
    assert.matches("is not owned by 'me': it carries no owner.", err.message, 1, true)
  end)

  it("refuses a sandbox another holder holds", function()
    local id = f.add(owned_by("me", { [TAGS.holder] = "dag/other_task" }))
    local err
    with({ getenv = no_env }, function() err = run_failing(attach_run(id, { owner = "me" })) end)
    assert.equal("refused", err.kind)
    assert.equal("Sandbox '" .. id .. "' is already held by 'dag/other_task', and one run uses a sandbox at a time. "
      .. "Provision a sandbox per run that needs its own workspace, or run the steps in sequence.", err.message)
    assert.equal("dag/other_task", f.boxes[id].tags[TAGS.holder])
  end)

  it("lets the same holder re-enter (a retry of the same step), writing nothing", function()
    local id = f.add(owned_by("d/r", { [TAGS.holder] = "d/r/t" }))
    local agent = attach_run(id, {}, { { tool_calls = { { name = "run_command", args = { command = "x" } } } }, "ok" })
    with({ getenv = env_of { AIRFLOW_CTX_DAG_ID = "d", AIRFLOW_CTX_DAG_RUN_ID = "r", AIRFLOW_CTX_TASK_ID = "t",
                             AIRFLOW_CTX_TRY_NUMBER = "3" } }, function()
      assert.equal("ok", agent:run("go").output)
    end)
    assert.equal(1, #f.calls_of("exec"))
    assert.equal(1, #f.calls_of("write_tags"))  -- only the release
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
  end)

  it("turns a recoverable error while attaching into a terminal one", function()
    local id = f.add(owned_by("me"))
    f.inject("read_tags", f.sandbox_error("blip", "control plane blip"))
    local err
    with({ getenv = no_env }, function() err = run_failing(attach_run(id, { owner = "me" })) end)
    assert.equal("unavailable", err.kind)
    assert.equal("Could not attach to sandbox '" .. id .. "' on backend '" .. f.name .. "': control plane blip",
      err.message)
  end)

  it("clears its own mark when the claim fails after writing it, instead of leaving it behind", function()
    local id = f.add(owned_by("me"))
    f.inject("read_tags", function() return nil end, f.sandbox_error("blip", "read-back failed"))
    local err
    with({ getenv = no_env }, function() err = run_failing(attach_run(id, { owner = "me" })) end)
    assert.equal("Could not attach to sandbox '" .. id .. "' on backend '" .. f.name .. "': read-back failed",
      err.message)
    assert.equal(1, #f.calls_of("write_tags") - 1)
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
  end)

  it("fails the run when the attached sandbox stops, naming who decides its lifetime, never destroying", function()
    local id = f.add(owned_by("me"))
    f.inject("exec", f.terminal_error("unavailable", "expired", "it expired"))
    local agent = attach_run(id, { owner = "me" }, { { tool_calls = { { name = "run_command", args = { command = "x" } } } },
                                                   "x" })
    local err
    with({ getenv = no_env }, function() err = run_failing(agent) end)
    assert.equal("The " .. f.name .. " sandbox '" .. id .. "' that this run attached to is no longer available: it "
      .. "expired. The step that created it decides its lifetime, so nothing is provisioned in its place; run the "
      .. "pipeline again from the step that creates the sandbox, with a lifetime that covers every step.", err.message)
    assert.same({}, f.destroyed)
    assert.same({}, f.created)
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
  end)

  it("checks the claim with read, write, read back where the backend cannot compare-and-set", function()
    local id = f.add(owned_by("me"))
    f.inject("read_tags", function() return nil end, function()
      -- a rival's write lands between our write and our read-back
      f.boxes[id].tags[TAGS.holder] = "someone/faster"
    end)
    local err
    with({ getenv = no_env }, function() err = run_failing(attach_run(id, { owner = "me" })) end)
    assert.equal("refused", err.kind)
    assert.matches("was claimed by 'someone/faster' while 'me' was attaching to it", err.message, 1, true)
  end)

  it("lets exactly one of two racing runs win on a backend that claims atomically", function()
    local fc = fakes.new { cas = true }
    fc.yield = true
    local id = fc.add(owned_by("me"))
    local gate = lash.future()
    local function racer(holder)
      local cap = lash.sandbox_capability { backend = fc.name, attach_to = id, owner = "me" }
      local agent = lash.agent { model = function() gate:wait() return holder .. " done" end, capabilities = { cap } }
      return agent:start("go", { holder = holder })
    end
    with({ getenv = no_env }, function()
      local a, b = racer("A"), racer("B")
      while a:status() ~= "failed" and b:status() ~= "failed" do lash.sleep(0.001) end
      gate:set()
      local oka, ra = pcall(a.join, a)
      local okb, rb = pcall(b.join, b)
      assert.is_true(oka ~= okb, "exactly one run wins")
      local lost = oka and rb or ra
      assert.equal("refused", lost.kind)
    end)
    assert.is_nil(fc.boxes[id].tags[TAGS.holder])
  end)
end)

describe("release at run end", function()
  local f
  before_each(function() f = fakes.new {} end)

  local function run_with(id, steps, logged)
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me",
      log = function(level, msg) logged[#logged + 1] = level .. ": " .. msg end }
    return agent_of(cap, steps)
  end

  it("keeps trying 3 times 1 s apart, then logs the holder left behind; the run still succeeds", function()
    local id = f.add(owned_by("me"))
    local logged, ended = {}, nil
    local agent = run_with(id, { function()
      f.inject("read_tags", f.sandbox_error("blip", "blip 1"), f.sandbox_error("blip", "blip 2"),
        f.sandbox_error("blip", "blip 3"))
      ended = lash.now()
      return "done"
    end }, logged)
    assert.equal(3, sbcap.RELEASE_ATTEMPTS)
    assert.equal(1.0, sbcap.release_delay)
    with({ getenv = no_env, release_delay = 0.05 }, function()
      local res = agent:run("go")
      assert.equal("done", res.output)
    end)
    assert.is_true(lash.now() - ended >= 0.1, "two pauses between three attempts")
    assert.equal(5, #f.calls_of("read_tags"))
    local warnings = {}
    for _, l in ipairs(logged) do if l:match("^warning") then warnings[#warnings + 1] = l end end
    assert.same({ "warning: Failed to release sandbox " .. id .. " on backend " .. f.name .. " after 3 attempts; it "
      .. "stays marked as held by me, and only that holder, or the step that created the sandbox, can use it: "
      .. "blip 3" }, warnings)
    assert.equal("me", f.boxes[id].tags[TAGS.holder])
  end)

  it("retries a blip and leaves no claim", function()
    local id = f.add(owned_by("me"))
    local logged = {}
    local agent = run_with(id, { function()
      f.inject("read_tags", f.sandbox_error("blip", "blip 1"), f.sandbox_error("blip", "blip 2"))
      return "done"
    end }, logged)
    with({ getenv = no_env, release_delay = 0.01 }, function() agent:run("go") end)
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
    for _, l in ipairs(logged) do assert.is_nil(l:find("Failed to release", 1, true)) end
    assert.equal(3, #f.calls_of("read_tags") - 2)  -- attach read + read-back, then 3 release reads
  end)

  it("is quiet about a sandbox that ended during the run", function()
    local id = f.add(owned_by("me"))
    local logged = {}
    local agent = run_with(id, { function() f.boxes[id].alive = false return "done" end }, logged)
    with({ getenv = no_env }, function() agent:run("go") end)
    for _, l in ipairs(logged) do assert.is_nil(l:find("^warning")) end
    assert.matches("has ended; nothing to release", logged[#logged], 1, true)
  end)

  it("releases but never destroys when the run fails", function()
    local id = f.add(owned_by("me"))
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me" }
    local agent = lash.agent { model = function() error("model broke") end, capabilities = { cap } }
    with({ getenv = no_env }, function() run_failing(agent) end)
    assert.is_nil(f.boxes[id].tags[TAGS.holder])
    assert.is_true(f.boxes[id].alive)
    assert.same({}, f.destroyed)
  end)
end)

describe("the run_command note", function()
  local f
  local W = 1790000000
  before_each(function() f = fakes.new {} end)

  -- The run_command description the model sees at each step.
  local function descriptions(tags, steps_between)
    local wall, mono = W, 100
    local seen = {}
    local id = f.add(owned_by("me", tags))
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me", log = function() end }
    local agent = lash.agent {
      model = function(_, info)
        seen[#seen + 1] = info.tools
        if #seen == 1 then
          if steps_between then wall, mono = wall + steps_between, mono + steps_between end
          return { tool_calls = { { name = "run_command", args = { command = "x" } } } }
        end
        return "done"
      end,
      capabilities = { cap },
    }
    with({ getenv = no_env, clock = { wall = function() return wall end, mono = function() return mono end } },
      function() agent:run("go") end)
    return seen
  end

  local function note_of(tags)
    local d = descriptions(tags)[1][1].description
    assert.equal(fmt.RUN_COMMAND .. " ", d:sub(1, #fmt.RUN_COMMAND + 1))
    return d:sub(#fmt.RUN_COMMAND + 2)
  end

  local function stamp(policy)
    return lash.sandbox.encode_network(policy)
  end

  it("says who set the sandbox up, what it reaches and how long it had, for each network policy", function()
    local first = "This sandbox was set up by an earlier task, and your files stay in it after this run for a "
      .. "later task to collect. "
    local clock = " About 30 minutes of its lifetime remained when this run began."
    local exp = tostring(W + 1800)
    assert.equal(first .. "This sandbox has NO network access, including DNS, so installing packages or "
      .. "downloading anything will fail. Work with what the image already has." .. clock,
      note_of { [TAGS.expires_at] = exp, [TAGS.network] = stamp("off") })
    assert.equal(first .. "This sandbox has outbound network access." .. clock,
      note_of { [TAGS.expires_at] = exp, [TAGS.network] = stamp("on") })
    assert.equal(first .. "This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org. "
      .. "Anything else, and plain HTTP to any host, will fail." .. clock,
      note_of { [TAGS.expires_at] = exp, [TAGS.network] = stamp { allow_egress_to = { "pypi.org" } } })
    assert.equal(first .. "This sandbox reaches only these address ranges, on any port: 10.0.0.0/8. Anything "
      .. "else will fail; hostnames still resolve, but only those addresses answer." .. clock,
      note_of { [TAGS.expires_at] = exp, [TAGS.network] = stamp { allow_egress_to_cidrs = { "10.0.0.0/8" } } })
    assert.equal(first .. "This sandbox reaches only these hosts, over HTTPS on port 443 only: pypi.org, x.io; and "
      .. "these address ranges, on any port: 10.0.0.0/8. Anything else will fail. The hosts accept HTTPS only, so "
      .. "plain HTTP to them fails; the address ranges accept any port. Hostnames resolve, but only listed hosts "
      .. "and addresses answer." .. clock,
      note_of { [TAGS.expires_at] = exp, [TAGS.network] = stamp { allow_egress_to = { "pypi.org", "x.io" },
                                                                  allow_egress_to_cidrs = { "10.0.0.0/8" } } })
    assert.equal(first .. "Its network access is whatever the task that set it up allowed; test before relying "
      .. "on it." .. clock, note_of { [TAGS.expires_at] = exp })
    assert.equal(first .. "Its network access is whatever the task that set it up allowed; test before relying "
      .. "on it." .. clock, note_of { [TAGS.expires_at] = exp, [TAGS.network] = "not json" })
  end)

  it("is honest about the clock: 150 s, 75 s, 59 s, expired, unknown", function()
    local net = { [TAGS.network] = stamp("off") }
    local function clock(tag)
      return note_of { [TAGS.network] = net[TAGS.network], [TAGS.expires_at] = tag }
        :match("Work with what the image already has%. (.*)$")
    end
    assert.equal("About 2 minutes of its lifetime remained when this run began.", clock(tostring(W + 150)))
    assert.equal("About 1 minute of its lifetime remained when this run began.", clock(tostring(W + 75)))
    assert.equal("Under a minute of its lifetime remained when this run began, so finish up.", clock(tostring(W + 59)))
    assert.equal("Under a minute of its lifetime remained when this run began, so finish up.", clock("0"))
    assert.equal("How long it has left is not known.", clock(nil))
    assert.equal("How long it has left is not known.", clock("soon"))
  end)

  it("does not change when time passes within the run", function()
    local seen = descriptions({ [TAGS.expires_at] = tostring(W + 150) }, 600)
    assert.equal(2, #seen)
    assert.equal(seen[1][1].description, seen[2][1].description)
    assert.equal(seen[1][1], seen[2][1])
  end)

  it("is on run_command only", function()
    local tools = descriptions({ [TAGS.expires_at] = tostring(W + 150) })[1]
    for i = 2, 4 do assert.is_nil(tools[i].description:find("network", 1, true)) end
  end)
end)

describe("deadlines while attached", function()
  it("keep the ceiling the instructions state (300 s), then the lifetime left", function()
    local f = fakes.new {}
    local wall, mono = 1790000000, 10
    local id = f.add(owned_by("me", { [TAGS.expires_at] = tostring(wall + 1800) }))
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me" }
    local text = require("lash.capabilities.sandbox").instructions_of(cap)[1]
    assert.matches("(up to 300s)", text, 1, true)
    local function cmd(t) return { tool_calls = { { name = "run_command", args = { command = "x", timeout_seconds = t } } } } end
    local agent = agent_of(cap, { cmd(3000), function() mono = mono + 1700 return cmd(3000) end, "done" })
    with({ getenv = no_env, clock = { wall = function() return wall end, mono = function() return mono end } },
      function() agent:run("go") end)
    local got = {}
    for i, c in ipairs(f.calls_of("exec")) do got[i] = c.opts.timeout end
    assert.same({ 300, 100 }, got)
  end)

  it("are cut to the lifetime left, never below 1 s", function()
    local f = fakes.new {}
    local wall, mono = 1790000000, 10
    local id = f.add(owned_by("me", { [TAGS.expires_at] = tostring(wall + 30) }))
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me", max_command_timeout = 600 }
    local function cmd(t) return { tool_calls = { { name = "run_command", args = { command = "x", timeout_seconds = t } } } } end
    local agent = agent_of(cap, {
      cmd(300),
      function() mono = mono + 20 return cmd(300) end,
      function() return cmd(5) end,
      function() mono = mono + 15 return cmd(300) end,
      "done",
    })
    with({ getenv = no_env, clock = { wall = function() return wall end, mono = function() return mono end } },
      function() agent:run("go") end)
    local got = {}
    for i, c in ipairs(f.calls_of("exec")) do got[i] = c.opts.timeout end
    assert.same({ 30, 10, 5, 1 }, got)
  end)
end)

describe("approvals with an attached sandbox", function()
  it("a run that pauses for approval and resumes later finds the same files", function()
    local f = fakes.new {}
    local id = f.add(owned_by("me"))
    local publish = lash.tool {
      name = "publish", description = "Publish the report.", requires_approval = true,
      parameters = { type = "object", properties = {} },
      handler = function() return "published" end,
    }
    local cap = lash.sandbox_capability { backend = f.name, attach_to = id, owner = "me" }
    local agent = lash.agent {
      tools = { publish },
      capabilities = { cap },
      model = function(messages)
        local last = messages[#messages]
        for _, p in ipairs(last.parts) do
          if p.type == "tool_result" and p.name == "publish" then
            return { tool_calls = { { name = "read_file", args = { path = "/work/report.md" } } } }
          end
          if p.type == "tool_result" and p.name == "read_file" then return "report: " .. p.content end
        end
        return { tool_calls = { { name = "write_file", args = { path = "/work/report.md", content = "# Findings" } },
                                { name = "publish", args = {} } } }
      end,
    }
    with({ getenv = no_env }, function()
      local first = agent:run("write and publish")
      assert.equal("approval_required", first.stop_reason)
      assert.is_nil(f.boxes[id].tags[TAGS.holder])
      local second = agent:run(nil, { history = first.messages, approvals = { [first.pending[1].id] = true } })
      assert.equal("report: # Findings", second.output)
    end)
    assert.same({}, f.created)
    assert.same({}, f.destroyed)
  end)
end)

describe("attaching a whole agent (lash run --attach)", function()
  local f = fakes.new {}

  it("rewrites the one sandbox capability, even inside PrefixTools", function()
    local agent = lash.agent { model = "test", capabilities = {
      lash.prefix_tools { prefix = "box", capability = lash.sandbox_capability { backend = f.name,
                                                                                 default_command_timeout = 5 } } } }
    local a = assert(agents.attach_agent(agent, "sb-9", "me"))
    local inner = a.capabilities[1].inner
    assert.equal("sb-9", inner.opts.attach_to)
    assert.equal("me", inner.opts.owner)
    assert.equal(5, inner.opts.default_command_timeout)
    assert.is_nil(agent.capabilities[1].inner.opts.attach_to)
  end)

  it("switches the backend when asked (lash run --backend), checking the options again", function()
    local g = fakes.new {}
    local agent = lash.agent { model = "test", capabilities = { lash.sandbox_capability { backend = f.name } } }
    local a = assert(agents.attach_agent(agent, "sb-9", "me", g.name))
    assert.equal(g.name, a.capabilities[1].backend)
    local b = assert(agents.with_backend(agent, g.name))
    assert.equal("owned", b.capabilities[1].mode)
    assert.equal(g.name, b.capabilities[1].backend)
    local _, err = agents.with_backend(lash.agent { model = "test", capabilities = {
      lash.sandbox_capability { rootfs = "/" } } }, g.name)
    assert.matches("the " .. g.name .. " backend has no option rootfs", err, 1, true)
    _, err = agents.with_backend(lash.agent { model = "test" }, g.name)
    assert.equal("--backend needs an agent with a sandbox capability (Sandbox, LocalSandbox or ModalSandbox); this "
      .. "one has none", err)
  end)

  it("refuses agents with no sandbox or two; drops the spec's creation-only options", function()
    local _, err = agents.attach_agent(lash.agent { model = "test" }, "sb", "me")
    assert.matches("needs an agent with a sandbox capability", err, 1, true)
    _, err = agents.attach_agent(lash.agent { model = "test", capabilities = {
      lash.sandbox_capability { backend = f.name }, lash.sandbox_capability { backend = f.name } } }, "sb", "me")
    assert.matches("ambiguous", err, 1, true)
    -- one spec serves standalone and attached runs: what only creation
    -- uses is dropped (with a warning on the log), the rest kept
    local a = assert(agents.attach_agent(lash.agent { model = "test", capabilities = {
      lash.sandbox_capability { backend = f.name, sandbox_timeout = 900, workdir = "/w",
                                max_command_timeout = 120 } } }, "sb", "me"))
    local cap = a.capabilities[1]
    assert.equal("attached", cap.mode)
    assert.equal("sb", cap.opts.attach_to)
    assert.is_nil(cap.given.sandbox_timeout)
    assert.is_nil(cap.given.workdir)
    assert.equal(120, cap.opts.max_command_timeout)
    -- a capability that names attach_to itself is refused them, as in the reference
    err = select(2, pcall(lash.sandbox_capability, { backend = f.name, attach_to = "sb", sandbox_timeout = 900 }))
    assert.matches("sandbox_timeout only apply when creating a sandbox, but `attach_to` attaches", err, 1, true)
  end)
end)

---------------------------------------------------------------------------
-- The real local backend

local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }
local it_local = jail_ok and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end)
end

describe("on the local backend", function()
  local root

  setup(function()
    root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'"))
  end)

  teardown(function()
    os.execute("rm -rf '" .. root .. "'")
  end)

  it_local("two runs in turn find the same files; a wrong owner is refused; nothing is destroyed", function()
    local sb = lash.sandbox.create { state_root = root, owner = "pipeline-1", timeout = 600 }
    sb:detach()
    local cap = lash.sandbox_capability { attach_to = "{{ deps.sandbox }}", owner = "pipeline-1", state_root = root }
    local function step(text)
      return lash.agent {
        capabilities = { cap },
        model = lash.script_model {
          { tool_calls = { { name = "run_command", args = { command = "echo '" .. text .. "' >> /workspace/log.txt" } } } },
          function(_, info) return info.tools[1].description end,
        },
      }
    end
    local desc
    with({ getenv = no_env }, function()
      desc = step("first"):run("go", { deps = { sandbox = sb.id } }).output
      step("second"):run("go", { deps = { sandbox = sb.id } })
    end)
    assert.matches(fmt.RUN_COMMAND .. " This sandbox was set up by an earlier task", desc, 1, true)
    assert.matches("NO network access", desc, 1, true)
    assert.matches("About 10 minutes of its lifetime remained", desc, 1, true)
    local h = lash.sandbox.open(sb.id, { state_root = root })
    assert.equal("first\nsecond\n", h:read_file("/workspace/log.txt"))
    assert.is_nil(h:read_tags()[TAGS.holder])
    local wrong = lash.sandbox_capability { attach_to = sb.id, owner = "someone-else", state_root = root }
    local err
    with({ getenv = no_env }, function()
      err = run_failing(lash.agent { model = lash.script_model { "x" }, capabilities = { wrong } })
    end)
    assert.equal("refused", err.kind)
    assert.matches("is not owned by 'someone-else': it carries owner 'pipeline-1'", err.message, 1, true)
    assert.is_true(h:poll().running)
    h:destroy()
  end)

  it_local("racing claims: exactly one of several runs wins (atomic on the local backend)", function()
    local sb = lash.sandbox.create { state_root = root, owner = "o", timeout = 120 }
    local id = sb:detach()
    local gate = lash.future()
    local tasks = {}
    with({ getenv = no_env }, function()
      for i = 1, 4 do
        local cap = lash.sandbox_capability { attach_to = id, owner = "o", state_root = root }
        local agent = lash.agent { model = function() gate:wait() return "won" end, capabilities = { cap } }
        tasks[i] = agent:start("go", { holder = "run-" .. i })
      end
      local deadline = lash.now() + 30
      while lash.now() < deadline do
        local failed = 0
        for _, t in ipairs(tasks) do if t:status() == "failed" then failed = failed + 1 end end
        if failed == 3 then break end
        lash.sleep(0.005)
      end
      gate:set()
      local wins, refusals = 0, 0
      for _, t in ipairs(tasks) do
        local ok, r = pcall(t.join, t)
        if ok then wins = wins + 1 elseif r.kind == "refused" then refusals = refusals + 1 end
      end
      assert.equal(1, wins)
      assert.equal(3, refusals)
    end)
    local h = lash.sandbox.open(id, { state_root = root })
    assert.is_nil(h:read_tags()[TAGS.holder])
    h:destroy()
  end)
end)
