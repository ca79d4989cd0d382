-- Argo CD health of an mds.dev kind whose conditions say it all (its src/resources/<kind>/index.ts names
-- conditionsHealthScript). `npm run argocd-cm` copies it per kind; test/deploy/argocd-health.test.ts checks the copies.
-- Degraded:    Stalled is True for the current generation (checked first: the operator gave up until the user
--              changes something; the message is its reason and message), or a terminal problem that needs a
--              person: the service reports the database failed, the remote object is gone, the spec is invalid,
--              the service refuses the token or the request conflicts.
-- Progressing: Reconciling is True (kstatus: the operator is working toward the spec, e.g. rotating credentials
--              while Ready stays True), so Argo CD and Flux (kstatus) say the same.
-- Healthy:     Ready is True for the current generation (the operator has seen the latest spec).
-- Suspended:   reconciliation is paused with the mds.dev/paused annotation.
-- Progressing: everything else, including provisioning, restoring, waiting for a project, and no status yet.
local hs = { status = "Progressing", message = "Waiting for the operator to report status" }

-- Reasons for which retrying cannot help: a person has to fix the spec, the token or the remote side. The same list
-- as the controllers' stallingReasons (src/resources/index.ts), for statuses written before it set Stalled.
local terminal = {
  InvalidSpec = true,
  AdoptionRefused = true,
  AdoptionConflict = true,
  ReferenceNotAllowed = true,
  CredentialsInvalid = true,
  Conflict = true,
  RemoteFailure = true,
  RemoteNotFound = true,
  OutcomeUnknown = true,
  BranchRoleMismatch = true,
  NotSupported = true,
}

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

local function messageOf(condition, fallback)
  if condition ~= nil and condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return fallback
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end

-- A condition speaks for the current spec only if it was computed from it.
local function isCurrent(condition)
  local observed = condition.observedGeneration
  if observed == nil and obj.status ~= nil then
    observed = obj.status.observedGeneration
  end
  return generation == nil or observed == generation
end

local status = obj.status

-- Stalled (kstatus) before every other rule, deletion included: True means the operator will not get further
-- without a change by the user (spec, credentials Secret, reconcile request). A Stalled of an older generation
-- does not count: the operator has not looked at the new spec yet.
local stalled = nil
if status ~= nil then
  stalled = findCondition(status.conditions, "Stalled")
end
if stalled ~= nil and stalled.status == "True" and isCurrent(stalled) then
  hs.status = "Degraded"
  hs.message = tostring(stalled.reason) .. ": " .. messageOf(stalled, "see the resource's conditions")
  return hs
end

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Being deleted"
  return hs
end

if status == nil then
  return hs
end

local ready = findCondition(status.conditions, "Ready")
local synced = findCondition(status.conditions, "Synced")

-- Reconciling (kstatus) True: working toward the spec. Before Ready: a rotation keeps Ready True but is not done.
local reconciling = findCondition(status.conditions, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = messageOf(reconciling, "Reconciling: " .. tostring(reconciling.reason))
  return hs
end

-- Database: its own remote status. Project: its default database's.
local remoteStatus = status.remoteStatus
if remoteStatus == nil and status.defaultDatabase ~= nil then
  remoteStatus = status.defaultDatabase.status
end
if remoteStatus == "failure" then
  hs.status = "Degraded"
  hs.message = messageOf(ready, "The service reports the database in status failure")
  return hs
end
for _, condition in ipairs({ ready, synced }) do
  if condition ~= nil and condition.status == "False" and terminal[condition.reason] and isCurrent(condition) then
    hs.status = "Degraded"
    hs.message = condition.reason .. ": " .. messageOf(condition, "see the resource's conditions")
    return hs
  end
end

if ready ~= nil and ready.status == "True" and isCurrent(ready) then
  hs.status = "Healthy"
  hs.message = messageOf(ready, "Ready")
  return hs
end

if synced ~= nil and synced.reason == "ReconcilePaused" then
  hs.status = "Suspended"
  hs.message = messageOf(synced, "Reconciliation is paused")
  return hs
end

if ready ~= nil and not isCurrent(ready) then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end
if ready ~= nil then
  hs.message = messageOf(ready, "Not ready: " .. tostring(ready.reason))
  if synced ~= nil and synced.status == "False" and synced.message ~= nil and synced.message ~= "" then
    hs.message = hs.message .. " (" .. tostring(synced.reason) .. ": " .. synced.message .. ")"
  end
end
return hs
