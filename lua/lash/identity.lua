--- Who a run is, for attaching to a sandbox an earlier step provisioned.
--
-- Two identities matter. The **owner** is stamped on the sandbox by the
-- step that creates it (`lash sandbox create --owner O`); a run attaches
-- only when it presents that owner. The **holder** is the run itself,
-- written on the sandbox while it works there, so that one run at a time
-- uses it; a retry of the same step is the same holder and re-enters.
--
-- Where they come from, first match wins:
--   owner:  the `owner` option (or `lash run --owner`); under Airflow, the
--           DAG run: `<dag_id>/<run_id>`.
--   holder: `holder =` on the run (`agent:run(prompt, {holder = ...})`,
--           `lash run --holder`); under Airflow, the task instance:
--           `<dag_id>/<run_id>/<task_id>`, plus `[<map_index>]` for a
--           mapped task (never the try number, so a retry of the same step
--           re-enters its own sandbox); else the owner.
-- Airflow is recognised by AIRFLOW_CTX_DAG_ID, AIRFLOW_CTX_DAG_RUN_ID and
-- AIRFLOW_CTX_TASK_ID, which Airflow exports to every task (a
-- BashOperator's command sees them); the map index is read from
-- AIRFLOW_CTX_MAP_INDEX, which a mapped BashOperator passes on itself
-- (`env={"AIRFLOW_CTX_MAP_INDEX": "{{ ti.map_index }}"}, append_env=True`).
-- @module lash.identity
local M = {}

local function nonempty(s)
  return type(s) == "string" and s ~= "" and s or nil
end

--- The Airflow task instance this process runs as, or nil outside
-- Airflow: `{dag_id=, run_id=, task_id=, map_index=}` (map_index nil or an
-- integer >= 0).
-- @tparam[opt=os.getenv] function getenv
function M.airflow(getenv)
  getenv = getenv or os.getenv
  local dag, run, task = nonempty(getenv("AIRFLOW_CTX_DAG_ID")), nonempty(getenv("AIRFLOW_CTX_DAG_RUN_ID")),
    nonempty(getenv("AIRFLOW_CTX_TASK_ID"))
  if not (dag and run and task) then return nil end
  local idx = math.tointeger(tonumber(getenv("AIRFLOW_CTX_MAP_INDEX") or ""))
  if idx and idx < 0 then idx = nil end
  return { dag_id = dag, run_id = run, task_id = task, map_index = idx }
end

--- The owner a DAG run stamps: `<dag_id>/<run_id>` (the pair, because two
-- DAGs on the same schedule share run ids).
function M.dag_run_owner(af)
  return af.dag_id .. "/" .. af.run_id
end

--- The holder a task instance writes: `<dag_id>/<run_id>/<task_id>`, plus
-- `[<map_index>]` when mapped.
function M.task_holder(af)
  local h = af.dag_id .. "/" .. af.run_id .. "/" .. af.task_id
  if af.map_index then h = h .. "[" .. af.map_index .. "]" end
  return h
end

M.NO_OWNER = "attach_to needs an owner: the one the provisioning step stamped on the sandbox. Under Airflow "
  .. "it is the DAG run (<dag_id>/<run_id>) unless you set one; outside an orchestrator pass it: "
  .. "`lash run SPEC --attach H --owner O`, or owner = \"O\" on the capability, matching "
  .. "`lash sandbox create --owner O`."

--- Resolve the run's identity.
-- @tparam table o `owner` (the option, or nil), `holder` (from the run,
--   or nil), `getenv` (default os.getenv)
-- @treturn[1] table `{owner=, holder=, orchestrator="airflow"|nil}`
-- @treturn[2] nil
-- @treturn[2] string why not (no owner could be found)
function M.resolve(o)
  o = o or {}
  local af = M.airflow(o.getenv)
  local owner = nonempty(o.owner) or (af and M.dag_run_owner(af))
  if not owner then return nil, M.NO_OWNER end
  local holder = nonempty(o.holder) or (af and M.task_holder(af)) or owner
  return { owner = owner, holder = holder, orchestrator = af and "airflow" or nil }
end

return M
