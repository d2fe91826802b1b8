-- plugin/lash.lua: the :Lash commands (the work is in lua/lash_nvim).
if vim.g.loaded_lash then return end
vim.g.loaded_lash = true

vim.api.nvim_create_user_command("Lash", function(o)
  require("lash_nvim").run(o.args)
end, { nargs = "+", desc = "Run the lash agent on the current buffer with this prompt" })

vim.api.nvim_create_user_command("LashCancel", function()
  require("lash_nvim").cancel()
end, { nargs = 0, desc = "Cancel the lash run in flight" })
