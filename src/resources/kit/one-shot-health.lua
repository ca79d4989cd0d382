-- Argo CD health of an mds.dev one-shot kind (a DatabaseRestore, a DatabaseBackup: one operation whose final phases
-- never change). Messages name the operation after the kind ("Restore succeeded", "Backup pending").
-- Degraded:    first, Stalled True for the current generation (the operator needs a change by the user; the
--              message is its reason and message).
-- Healthy:     phase Succeeded, or Skipped (a restore whose idempotencyKey was already applied to the target).
-- Degraded:    phase Failed (including OutcomeUnknown: never repeated automatically; NotSupported: a service that
--              takes no backups on request), or an invalid spec.
-- Progressing: Pending, Running, and before any status exists.
local noun = string.gsub(obj.kind or "Operation", "^Database", "")
local hs = { status = "Progressing", message = "Waiting for the operator to pick up the " .. string.lower(noun) }

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
  hs.message = describe(noun .. " succeeded")
  return hs
end
if phase == "Skipped" then
  hs.status = "Healthy"
  hs.message = describe("Skipped: this idempotencyKey was already applied to the target")
  return hs
end
if phase == "Failed" then
  hs.status = "Degraded"
  hs.message = describe(noun .. " failed")
  return hs
end

-- An invalid spec is terminal: the spec is immutable, so the operation needs a new object.
local synced = findCondition(status.conditions, "Synced")
if synced ~= nil and synced.status == "False" and synced.reason == "InvalidSpec" then
  hs.status = "Degraded"
  hs.message = "InvalidSpec: " .. (synced.message or "the spec cannot be acted on")
  return hs
end

if phase == "Running" then
  hs.message = describe(noun .. " running")
elseif phase == "Pending" then
  hs.message = describe(noun .. " pending")
end
return hs
