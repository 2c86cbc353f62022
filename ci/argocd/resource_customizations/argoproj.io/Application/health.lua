-- Argo CD health for child Applications (app-of-apps). Argo CD 1.8 stopped assessing Application
-- health, so without this the root app's sync waves never wait for a child to become Healthy.
-- It reports the health the child's own controller computed.
local health = { status = "Progressing", message = "" }
if obj.status ~= nil and obj.status.health ~= nil and obj.status.health.status ~= nil then
  health.status = obj.status.health.status
  health.message = obj.status.health.message or ""
end
return health
