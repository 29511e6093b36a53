import { describe, expect, it } from "vitest";
import { exactLength } from "../../container/runtime/archive.ts";

async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

/** What a consumer receives before the stream ends or fails. */
async function drain(stream: AsyncGenerator<Buffer>): Promise<{ received: string; error: string | null }> {
  let received = "";
  try {
    for await (const chunk of stream) received += chunk.toString();
    return { received, error: null };
  } catch (error) {
    return { received, error: String(error) };
  }
}

describe("exactLength", () => {
  it("passes a stream of the declared length through whole", async () => {
    expect(await drain(exactLength(chunks("abc", "de", "f"), 6, Promise.resolve()))).toEqual({ received: "abcdef", error: null });
    expect(await drain(exactLength(chunks("abcdef"), 6, Promise.resolve()))).toEqual({ received: "abcdef", error: null });
  });

  it("fails a stream longer than declared without sending more than the length less one byte", async () => {
    const { received, error } = await drain(exactLength(chunks("abc", "defg", "h"), 6, Promise.resolve()));
    expect(received).toBe("abcde");
    expect(error).toMatch(/outgrew its declared 6 bytes/);
  });

  it("fails a stream shorter than declared, so that its receiver never has a whole body", async () => {
    const { received, error } = await drain(exactLength(chunks("abc", "de"), 6, Promise.resolve()));
    expect(received).toBe("abcde");
    expect(error).toMatch(/has 5 bytes, not the declared 6/);
  });

  it("withholds the last byte when the producer fails", async () => {
    const { received, error } = await drain(exactLength(chunks("abc", "def"), 6, Promise.reject(new Error("tar exited 2"))));
    expect(received).toBe("abcde");
    expect(error).toMatch(/tar exited 2/);
  });
});
