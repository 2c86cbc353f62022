-- Argo CD health for batch.tensorstack.dev/v1beta1 PyTorchTrainingJob (T9k).
-- A PyTorchTrainingJob runs to completion, so it reads like a batch Job: Healthy only once it has
-- Succeeded, Progressing while it is pending, running, resuming or has a failed replica to restart.
-- T9k publishes no schema: the phases and condition types are those its manuals list. A rule
-- matches the job's status.phase or a condition of its type that is "True"; the first rule that
-- matches decides, and the condition's message (else the phase) explains it.
local health = { status = "Progressing", message = "Waiting for T9k's job controller to report status" }

local active = {}
local phase = nil
if obj.status ~= nil then
  phase = obj.status.phase
  if phase ~= nil then
    health.message = "The PyTorchTrainingJob is " .. phase
  else
    health.message = "T9k has not reported a phase yet"
  end
  if obj.status.conditions ~= nil then
    for _, condition in ipairs(obj.status.conditions) do
      if condition.status == "True" and condition.type ~= nil then
        -- An empty message is true in Lua; fall back to the reason then too.
        local message = condition.message
        if message == "" then message = nil end
        active[condition.type] = message or condition.reason or condition.type
      end
    end
  end
end

-- Highest precedence first: a final state wins over anything still marked True next to it.
local rules = {
  { phase = "Failed",    condition = "Failed",         status = "Degraded" },
  { phase = "Succeeded", condition = "Completed",      status = "Healthy" },
  -- Before Paused: a job being resumed is on its way back, whatever Paused still says.
  { phase = "Resuming",                                status = "Progressing" },
  { phase = "Paused",    condition = "Paused",         status = "Suspended" },
  -- The controller lost track of the pods (a node gone, say): they may come back.
  { phase = "Unknown",                                 status = "Progressing" },
  -- T9k restarts failed replicas within backoffLimit; past it, the job is Failed.
  {                      condition = "ReplicaFailure", status = "Progressing" },
  { phase = "Running",   condition = "Running",        status = "Progressing" },
  { phase = "Pending",   condition = "Initialized",    status = "Progressing" },
}
for _, rule in ipairs(rules) do
  local message = rule.condition ~= nil and active[rule.condition] or nil
  if message ~= nil or (phase ~= nil and rule.phase == phase) then
    health.status = rule.status
    health.message = message or health.message
    return health
  end
end
return health
