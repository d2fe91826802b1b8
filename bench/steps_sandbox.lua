-- steps_sandbox.lua: the "lash with the sandbox capability" agent of
-- bench_steps.sh: the four sandbox tools over an owned local sandbox (a
-- bubblewrap jail per command), as a user's agent would have it.
local lash = require "lash"

return lash.agent { model = "openai:bench", instructions = "Run the commands you are asked to.",
                    capabilities = { lash.sandbox_capability { instructions = "" } } }
