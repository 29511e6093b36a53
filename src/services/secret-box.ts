import { base64UrlToBytes, bytesToBase64Url } from "./base64url";

/**
 * Encryption at rest for secrets a user hands us (git provider tokens). AES-256-GCM with a key
 * derived by HKDF-SHA-256 from the deployment's `PROVIDER_TOKEN_KEY` secret; the additional
 * data binds each ciphertext to its owner and purpose, so a stored value moved to another row
 * does not decrypt. Format: `v1.<iv>.<ciphertext>`, both base64url.
 */
const VERSION = "v1";
const SALT = new TextEncoder().encode("agent-platform/secret-box/v1");

async function deriveKey(secret: string): Promise<CryptoKey> {
  const material = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: SALT, info: new TextEncoder().encode("provider-tokens") },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
}

export class SecretBox {
  private constructor(private readonly key: CryptoKey) {}

  /** A box for the deployment's secret, or null when the secret is unset or too short to trust. */
  static async fromSecret(secret: string | undefined): Promise<SecretBox | null> {
    if (secret === undefined || secret.length < 16) return null;
    return new SecretBox(await deriveKey(secret));
  }

  async seal(plaintext: string, context: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const sealed = await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(context) },
      this.key,
      new TextEncoder().encode(plaintext),
    );
    return `${VERSION}.${bytesToBase64Url(iv)}.${bytesToBase64Url(new Uint8Array(sealed))}`;
  }

  /** The plaintext, or null when the value was sealed with another key or for another context. */
  async open(sealed: string, context: string): Promise<string | null> {
    const [version, iv, data] = sealed.split(".");
    if (version !== VERSION || iv === undefined || data === undefined) return null;
    try {
      const plain = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: base64UrlToBytes(iv), additionalData: new TextEncoder().encode(context) },
        this.key,
        base64UrlToBytes(data),
      );
      return new TextDecoder().decode(plain);
    } catch {
      return null;
    }
  }
}
