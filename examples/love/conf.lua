-- conf.lua: the window and the LÖVE modules the lash NPC example uses.
function love.conf(t)
  t.identity = "lash_npc"
  t.version = "11.4"
  t.window.title = "lash NPC: an agent inside LÖVE"
  t.window.width = 800
  t.window.height = 600
  t.window.vsync = 0          -- main.lua paces frames at 60 Hz itself
  -- no sound card, no joystick under Xvfb in CI; the game needs neither
  t.modules.audio = false
  t.modules.sound = false
  t.modules.joystick = false
  t.modules.physics = false
  t.modules.video = false
end
