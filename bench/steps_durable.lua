-- steps_durable.lua: the agent of bench_durable.sh: the sandbox capability
-- over an owned local sandbox that starts from a prepared workspace
-- ($LASH_BENCH_FROM_SNAPSHOT: 10,000 files), run plain or with --durable.
local lash = require "lash"

return lash.agent { model = "openai:bench", instructions = "Run the commands you are asked to.",
                    capabilities = { lash.sandbox_capability {
                      instructions = "", from_snapshot = os.getenv("LASH_BENCH_FROM_SNAPSHOT") } } }
