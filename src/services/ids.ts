/** A new 32-hex-char id: a random UUID without dashes, as the contract writes ids. */
export function newHexId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

export function nowIso(): string {
  return new Date().toISOString();
}

export function toHex(bytes: ArrayBuffer | Uint8Array): string {
  return Array.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

export async function sha256Hex(text: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}

/** Compares two secrets by their digests, so that timing says nothing about length or prefix. */
export async function sameSecret(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([sha256Hex(a), sha256Hex(b)]);
  const encoder = new TextEncoder();
  return crypto.subtle.timingSafeEqual(encoder.encode(x), encoder.encode(y));
}
