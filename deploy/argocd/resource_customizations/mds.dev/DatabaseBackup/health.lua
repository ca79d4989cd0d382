-- Argo CD health of an mds.dev DatabaseBackup (a one-shot backup; its final phases never change).
-- Degraded:    first, Stalled True for the current generation (the operator needs a change by the user; the
--              message is its reason and message: NotSupported against a service that does not take backups on
--              request, OutcomeUnknown when a request's answer was lost beyond replay).
-- Healthy:     phase Succeeded.
-- Degraded:    phase Failed, or an invalid spec.
-- Progressing: Pending, Running, and before any status exists.
local hs = { status = "Progressing", message = "Waiting for the operator to pick up the backup" }

local function findCondition(conditions, conditionType)
  if conditions == nil then
    return nil
  end
  for _, condition in ipairs(conditions) do
    if condition.type == conditionType then
      return condition
    end
  end
  return nil
end

local status = obj.status
if status == nil then
  return hs
end

-- Stalled (kstatus) before every other rule; one of an older generation does not count.
local stalled = findCondition(status.conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  local observed = stalled.observedGeneration
  if observed == nil then
    observed = status.observedGeneration
  end
  local generation = nil
  if obj.metadata ~= nil then
    generation = obj.metadata.generation
  end
  if generation == nil or observed == generation then
    hs.status = "Degraded"
    hs.message = tostring(stalled.reason) .. ": " .. ((stalled.message ~= nil and stalled.message ~= "") and stalled.message or "see the resource's conditions")
    return hs
  end
end

local function describe(fallback)
  local text = fallback
  if status.message ~= nil and status.message ~= "" then
    text = status.message
  end
  if status.reason ~= nil and status.reason ~= "" then
    text = status.reason .. ": " .. text
  end
  return text
end

local phase = status.phase
if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = describe("Backup completed")
  return hs
end
if phase == "Failed" then
  hs.status = "Degraded"
  hs.message = describe("Backup failed")
  return hs
end

-- An invalid spec is terminal: the spec is immutable, so the backup needs a new object.
local synced = findCondition(status.conditions, "Synced")
if synced ~= nil and synced.status == "False" and synced.reason == "InvalidSpec" then
  hs.status = "Degraded"
  hs.message = "InvalidSpec: " .. (synced.message or "the spec cannot be acted on")
  return hs
end

if phase == "Running" then
  hs.message = describe("Backup running")
elseif phase == "Pending" then
  hs.message = describe("Backup pending")
end
return hs
