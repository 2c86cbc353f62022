-- Argo CD health for trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2).
-- A TrainJob runs to completion, so it reads like a batch Job: Healthy only once training is
-- Complete, Progressing while it waits or runs. Trainer v2 sets only the condition types Suspended,
-- Complete and Failed (no Created or Running), so a job with none of them "True" is Progressing.
-- We look at the "True" ones by precedence instead of trusting the order of the list.
local health = { status = "Progressing", message = "Waiting for Kubeflow Trainer to report status" }

local active = {}
if obj.status ~= nil then
  health.message = "The TrainJob is neither Complete nor Failed yet"
end
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
  { type = "Failed",    status = "Degraded" },
  { type = "Complete",  status = "Healthy" },
  { type = "Suspended", status = "Suspended" },
}
for _, rule in ipairs(precedence) do
  if active[rule.type] ~= nil then
    health.status = rule.status
    health.message = active[rule.type]
    return health
  end
end
return health
