/**
 * Headers the Worker sets on a runtime request for the SandboxDO's own credential check. The
 * Worker deletes any a client sent; the object trusts them because only the Worker reaches it.
 */
export const PROXY_SESSION_KEY_HEADER = "X-Platform-Session-Key";
export const PROXY_USER_HEADER = "X-Platform-User";
