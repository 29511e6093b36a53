import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, apiKey } from "./api";
import { ConversationView } from "./conversation";
import { ConversationList, NewConversation } from "./conversations";
import { SandboxList } from "./sandboxes";
import { ErrorBanner } from "./ui";
import "./styles.css";

type Route = { page: "list" } | { page: "new" } | { page: "conversation"; id: string } | { page: "sandboxes" };

function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, "") || "/";
  const conversation = /^\/conversations\/([0-9a-f-]{32,36})$/.exec(path);
  if (conversation?.[1]) return { page: "conversation", id: conversation[1] };
  if (path === "/new") return { page: "new" };
  if (path === "/sandboxes") return { page: "sandboxes" };
  return { page: "list" };
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return route;
}

interface User {
  id: string;
  name?: string | null;
}

function SignIn({ onSignedIn, problem }: { onSignedIn: () => void; problem: string | null }) {
  const [key, setKey] = useState("");
  return (
    <main class="signin">
      <h1>Agent platform</h1>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          apiKey.set(key.trim());
          onSignedIn();
        }}
      >
        <label>
          API key
          <input
            type="password"
            autocomplete="off"
            value={key}
            onInput={(event) => setKey(event.currentTarget.value)}
            placeholder="ohk_…"
            required
          />
        </label>
        <button type="submit">Sign in</button>
      </form>
      {problem && <ErrorBanner message={problem} />}
      <p class="hint">The key stays in this browser tab's session and is sent only to this platform.</p>
    </main>
  );
}

function App() {
  const route = useRoute();
  const [user, setUser] = useState<User | null>(null);
  const [signIn, setSignIn] = useState<{ problem: string | null } | null>(null);
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    api<User>("GET", "/users/me")
      .then((me) => {
        setUser(me);
        setSignIn(null);
      })
      .catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 401) {
          const hadKey = apiKey.get() !== null;
          apiKey.clear();
          setSignIn({ problem: hadKey ? error.message : null });
        } else {
          setSignIn({ problem: error instanceof Error ? error.message : String(error) });
        }
      });
  }, [attempt]);

  if (signIn !== null && user === null) return <SignIn problem={signIn.problem} onSignedIn={() => setAttempt((n) => n + 1)} />;
  if (user === null) return <p class="loading">Loading…</p>;
  return (
    <>
      <header class="top">
        <a class="brand" href="#/">
          Agent platform
        </a>
        <nav aria-label="Main">
          <a href="#/" aria-current={route.page === "list" || route.page === "conversation" ? "page" : undefined}>
            Conversations
          </a>
          <a href="#/sandboxes" aria-current={route.page === "sandboxes" ? "page" : undefined}>
            Sandboxes
          </a>
          {apiKey.get() !== null && (
            <button
              type="button"
              class="link"
              onClick={() => {
                apiKey.clear();
                setUser(null);
                setSignIn({ problem: null });
              }}
            >
              Sign out
            </button>
          )}
        </nav>
      </header>
      <main>
        {route.page === "list" && <ConversationList />}
        {route.page === "new" && <NewConversation />}
        {route.page === "conversation" && <ConversationView id={route.id} key={route.id} />}
        {route.page === "sandboxes" && <SandboxList />}
      </main>
    </>
  );
}

const root = document.getElementById("app");
if (root !== null) render(<App />, root);
