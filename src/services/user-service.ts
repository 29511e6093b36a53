import { LOCAL_USER_ID } from "../config";
import type { UserProfile } from "../durable-objects/account-do";
import { ApiError } from "../errors";
import { newHexId, nowIso } from "./ids";

export type User = UserProfile;

export function accountOf(env: Env, userId: string) {
  return env.ACCOUNT.getByName(userId);
}

export async function createUser(env: Env, input: { name: string; email: string | null }): Promise<User> {
  const profile: User = { id: newHexId(), name: input.name, email: input.email, created_at: nowIso() };
  return accountOf(env, profile.id).initProfile(profile);
}

/** The user, or a 404 when no such user was created. The local user is created on first read. */
export async function getUser(env: Env, userId: string): Promise<User> {
  const profile = await accountOf(env, userId).getProfile();
  if (profile === null && userId === LOCAL_USER_ID) return ensureLocalUser(env);
  if (profile === null) throw new ApiError("USER_NOT_FOUND", "No user with this id.");
  return profile;
}

/** The single user of local mode. */
function ensureLocalUser(env: Env): Promise<User> {
  return accountOf(env, LOCAL_USER_ID).initProfile({
    id: LOCAL_USER_ID,
    name: "Local user",
    email: null,
    created_at: nowIso(),
  });
}
