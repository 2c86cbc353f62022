-- Argo CD health for kubeflow.org/v1 PyTorchJob (training-operator v1).
-- A PyTorchJob runs to completion, so it reads like a batch Job: Healthy only once training has
-- succeeded, Progressing while it is being created, running or restarting replicas.
-- The operator keeps one condition per type and flips the others to "False" (Running goes False on
-- Succeeded/Failed, Running and Restarting replace each other), so we look at the "True" ones by
-- precedence instead of trusting the order of the list.
local health = { status = "Progressing", message = "Waiting for the training-operator to report status" }

local active = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.status == "True" and condition.type ~= nil then
      -- An empty message is true in Lua; fall back to the reason then too.
      local message = condition.message
      if message == "" then message = nil end
      active[condition.type] = message or condition.reason or condition.type
    end
  end
end

-- Highest precedence first: a final state wins over anything still marked True next to it.
local precedence = {
  { type = "Failed",     status = "Degraded" },
  { type = "Succeeded",  status = "Healthy" },
  { type = "Suspended",  status = "Suspended" },
  { type = "Restarting", status = "Progressing" },
  { type = "Running",    status = "Progressing" },
  { type = "Created",    status = "Progressing" },
}
for _, rule in ipairs(precedence) do
  if active[rule.type] ~= nil then
    health.status = rule.status
    health.message = active[rule.type]
    return health
  end
end
return health
