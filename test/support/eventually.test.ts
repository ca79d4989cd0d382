import { describe, expect, it } from "vitest";
import { eventually } from "./eventually.ts";

describe("eventually", () => {
  it("returns the first value of a probe that stops throwing", async () => {
    let calls = 0;
    const value = await eventually(
      () => {
        if (++calls < 3) throw new Error("not yet");
        return "done";
      },
      { intervalMs: 1 },
    );
    expect({ value, calls }).toEqual({ value: "done", calls: 3 });
  });

  it("retries a condition while it is false", async () => {
    let calls = 0;
    await expect(eventually(() => ++calls >= 3, { intervalMs: 1 })).resolves.toBe(true);
    expect(calls).toBe(3);
  });

  it("names what it waited for and keeps the last error, in the message and as the cause", async () => {
    let calls = 0;
    const error = await eventually(
      () => {
        throw new Error(`attempt ${++calls}`);
      },
      { timeoutMs: 30, intervalMs: 5, what: "the widget" },
    ).catch((e: unknown) => e as Error);
    expect(error.message).toMatch(/^eventually timed out after 30 ms waiting for the widget: attempt \d+$/);
    expect(error.message).toContain(`attempt ${calls}`);
    expect((error.cause as Error).message).toBe(`attempt ${calls}`);
  });

  it("says the condition stayed false", async () => {
    await expect(eventually(() => false, { timeoutMs: 10, intervalMs: 2 })).rejects.toThrow(
      "the condition is still false",
    );
  });

  it("ends at once with the error stopWhen returns", async () => {
    let calls = 0;
    const refused = new Error("refused");
    await expect(
      eventually(
        () => {
          calls++;
          throw new Error("not yet");
        },
        { intervalMs: 1, stopWhen: () => (calls >= 2 ? refused : undefined) },
      ),
    ).rejects.toBe(refused);
    expect(calls).toBe(2);
  });
});
