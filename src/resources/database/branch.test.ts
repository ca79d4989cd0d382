import { describe, expect, it } from "vitest";
import { createFakeApi } from "../../../test/support/fake-api.ts";
import { specBranch } from "./branch.ts";

// spec.branch's find-or-create against a server that replays Idempotency-Keys (the fake, as our service): only live
// branches are found, the key names the Database that asks (its uid), and a replayed answer naming a branch that is
// gone is asked for again, never handed on.

async function setup() {
  const api = createFakeApi();
  const project = await api.createProject({ name: "shop", createDatabase: false });
  const branches = () => specBranch(api, project.id, () => {});
  await branches().ensure({ gitName: "main", role: "production" }, { metadata: { uid: "staging" } });
  const live = async (gitName: string) => (await api.listBranches(project.id, { gitName })).data.map((b) => b.id);
  return { api, branches, live };
}
const pr = { gitName: "feature/one", role: "preview" as const };

describe("spec.branch's branch", () => {
  it("a reopened pull request's new Database gets a new branch, not the soft-deleted one's answer", async () => {
    const { api, branches, live } = await setup();
    const first = (await branches().ensure(pr, { metadata: { uid: "pr-1-first" } }))!;
    await api.deleteBranch(first.id);
    const reopened = (await branches().ensure(pr, { metadata: { uid: "pr-1-again" } }))!;
    expect(reopened.id).not.toBe(first.id);
    expect(await live(pr.gitName)).toEqual([reopened.id]);
  });

  it("the same Database whose branch was soft-deleted meanwhile (by another Database of it) gets a live one", async () => {
    const { api, branches, live } = await setup();
    const owner = { metadata: { uid: "pr-1" } };
    const first = (await branches().ensure(pr, owner))!;
    await api.deleteBranch(first.id);
    // Its key replays the first answer: checked against the live branches and asked for again.
    const again = (await branches().ensure(pr, owner))!;
    expect(again.id).not.toBe(first.id);
    expect(await live(pr.gitName)).toEqual([again.id]);
    // Once more: both dead answers are passed over, and the live branch is found without a create.
    const creates = api.calls["createBranch"];
    expect((await branches().ensure(pr, owner))!.id).toBe(again.id);
    expect(api.calls["createBranch"]).toBe(creates);
  });

  it("two Databases of one pull request racing end on one branch", async () => {
    const { branches, live } = await setup();
    const [a, b] = await Promise.all([
      branches().ensure(pr, { metadata: { uid: "pr-1-api" } }),
      branches().ensure(pr, { metadata: { uid: "pr-1-web" } }),
    ]);
    expect(a!.id).toBe(b!.id);
    expect(await live(pr.gitName)).toEqual([a!.id]);
  });
});
