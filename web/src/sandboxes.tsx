import { useEffect, useState } from "preact/hooks";
import { ApiError, api, type Page, type Sandbox } from "./api";
import { ErrorBanner, messageOf, StatusBadge, useAction, when } from "./ui";

export function SandboxList() {
  const [items, setItems] = useState<Sandbox[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useAction();
  const act = useAction();

  const fetchPage = (pageId: string | null) =>
    api<Page<Sandbox>>("GET", `/sandboxes/search?limit=20${pageId === null ? "" : `&page_id=${encodeURIComponent(pageId)}`}`);
  const reload = () =>
    load.run(async () => {
      const page = await fetchPage(null);
      setItems(page.items);
      setNext(page.next_page_id);
    });

  useEffect(() => {
    void reload();
    // Statuses move on their own (starting, idle pause): keep the list fresh.
    const timer = setInterval(() => void reload(), 3000);
    return () => clearInterval(timer);
  }, []);

  /** A limit reached is a state to explain, not a failure. */
  const perform = async (action: () => Promise<unknown>) => {
    setNotice(null);
    try {
      await act.run(async () => {
        try {
          await action();
        } catch (error) {
          if (error instanceof ApiError && error.code === "SANDBOX_LIMIT_REACHED") {
            setNotice(`${error.message} Pause or delete a running sandbox first.`);
            return;
          }
          throw error;
        }
      });
    } finally {
      await reload();
    }
  };

  return (
    <section aria-labelledby="sandboxes-heading">
      <h1 id="sandboxes-heading">Sandboxes</h1>
      {notice && (
        <div class="notice" role="status">
          {notice}
        </div>
      )}
      {act.error && <ErrorBanner message={act.error} onDismiss={act.clear} />}
      {load.error && <ErrorBanner message={load.error} />}
      {items.length === 0 && !load.busy && <p class="empty">No sandboxes. Starting a conversation starts one.</p>}
      <ul class="cards" aria-label="Sandboxes">
        {items.map((sandbox) => (
          <li key={sandbox.id} class="card" data-sandbox={sandbox.id}>
            <span class="card-title">
              <code>{sandbox.id.slice(0, 12)}</code> · {sandbox.sandbox_spec_id}
            </span>
            <span class="meta">
              <StatusBadge status={sandbox.status} label="Sandbox" />
              <time dateTime={sandbox.created_at}>{when(sandbox.created_at)}</time>
            </span>
            <span class="row wrap actions">
              <button
                type="button"
                aria-label={`Pause sandbox ${sandbox.id.slice(0, 12)}`}
                disabled={act.busy || sandbox.status !== "RUNNING"}
                onClick={() => perform(() => api("POST", `/sandboxes/${sandbox.id}/pause`))}
              >
                Pause
              </button>
              <button
                type="button"
                aria-label={`Resume sandbox ${sandbox.id.slice(0, 12)}`}
                disabled={act.busy || (sandbox.status !== "PAUSED" && sandbox.status !== "ERROR")}
                onClick={() => perform(() => api("POST", `/sandboxes/${sandbox.id}/resume`))}
              >
                Resume
              </button>
              <button
                type="button"
                class="danger"
                aria-label={`Delete sandbox ${sandbox.id.slice(0, 12)}`}
                disabled={act.busy}
                onClick={() => {
                  if (!confirm("Delete this sandbox and its workspace? This cannot be undone.")) return;
                  void perform(() => api("DELETE", `/sandboxes/${sandbox.id}`));
                }}
              >
                Delete
              </button>
            </span>
          </li>
        ))}
      </ul>
      {next !== null && (
        <button
          type="button"
          onClick={() =>
            load
              .run(async () => {
                const page = await fetchPage(next);
                setItems((current) => [...current, ...page.items]);
                setNext(page.next_page_id);
              })
              .catch((error: unknown) => setNotice(messageOf(error)))
          }
        >
          Load more
        </button>
      )}
    </section>
  );
}
