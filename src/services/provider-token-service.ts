import type { GitProvider } from "../config";
import { ApiError } from "../errors";
import { nowIso } from "./ids";
import { SecretBox } from "./secret-box";
import { accountOf } from "./user-service";

export const GIT_PROVIDERS = ["github", "gitlab", "bitbucket"] as const satisfies readonly GitProvider[];

/** What the API says of a stored token: never the token. */
export interface ProviderTokenInfo {
  provider: GitProvider;
  created_at: string;
  updated_at: string;
}

/** Binds a sealed token to its owner and provider. */
function context(userId: string, provider: GitProvider): string {
  return `provider-token:${userId}:${provider}`;
}

async function box(env: Env): Promise<SecretBox> {
  const sealer = await SecretBox.fromSecret(env.PROVIDER_TOKEN_KEY);
  if (sealer === null) {
    throw new ApiError(
      "PROVIDER_TOKENS_DISABLED",
      "Git provider tokens are disabled on this deployment: the operator must set the PROVIDER_TOKEN_KEY secret (16+ characters).",
    );
  }
  return sealer;
}

export async function putProviderToken(
  env: Env,
  userId: string,
  provider: GitProvider,
  token: string,
): Promise<ProviderTokenInfo> {
  const sealed = await (await box(env)).seal(token, context(userId, provider));
  const row = await accountOf(env, userId).putProviderToken(provider, sealed, nowIso());
  return { provider, created_at: row.created_at, updated_at: row.updated_at };
}

export async function listProviderTokens(env: Env, userId: string): Promise<ProviderTokenInfo[]> {
  const rows = await accountOf(env, userId).listProviderTokens();
  return rows.map((row) => ({ provider: row.provider as GitProvider, created_at: row.created_at, updated_at: row.updated_at }));
}

export async function deleteProviderToken(env: Env, userId: string, provider: GitProvider): Promise<void> {
  if (!(await accountOf(env, userId).deleteProviderToken(provider))) {
    throw new ApiError("PROVIDER_TOKEN_NOT_FOUND", `You have no ${provider} token stored.`);
  }
}

/**
 * The user's token for `provider` in plain text, for the one git command that needs it; null
 * when none is stored. A token that no longer decrypts (the key was rotated) counts as none.
 */
export async function readProviderToken(env: Env, userId: string, provider: GitProvider): Promise<string | null> {
  const row = await accountOf(env, userId).getProviderToken(provider);
  if (row === null) return null;
  const sealer = await SecretBox.fromSecret(env.PROVIDER_TOKEN_KEY);
  return sealer === null ? null : sealer.open(row.sealed, context(userId, provider));
}
