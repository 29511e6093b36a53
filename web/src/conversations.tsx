import { useEffect, useState } from "preact/hooks";
import { api, type Conversation, type Page, query, type SandboxSpec, type StartTask } from "./api";
import { ErrorBanner, navigate, StatusBadge, useAction, when } from "./ui";

const SORTS = [
  ["CREATED_AT_DESC", "Newest first"],
  ["CREATED_AT", "Oldest first"],
  ["UPDATED_AT_DESC", "Recently updated"],
  ["TITLE", "Title A–Z"],
] as const;

export function ConversationList() {
  const [title, setTitle] = useState("");
  const [sort, setSort] = useState<string>("CREATED_AT_DESC");
  const [items, setItems] = useState<Conversation[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loaded, setLoaded] = useState(false);
  const load = useAction();

  const fetchPage = (pageId: string | null) =>
    api<Page<Conversation>>(
      "GET",
      `/app-conversations/search${query({ title__contains: title.trim(), sort_order: sort, limit: 20, page_id: pageId })}`,
    );

  useEffect(() => {
    const timer = setTimeout(() => {
      void load.run(async () => {
        const page = await fetchPage(null);
        setItems(page.items);
        setNext(page.next_page_id);
        setLoaded(true);
      });
    }, 200);
    return () => clearTimeout(timer);
  }, [title, sort]);

  return (
    <section aria-labelledby="conversations-heading">
      <div class="row between">
        <h1 id="conversations-heading">Conversations</h1>
        <a class="button" href="#/new">
          New conversation
        </a>
      </div>
      <div class="row filters">
        <input
          type="search"
          aria-label="Search by title"
          placeholder="Search by title"
          value={title}
          onInput={(event) => setTitle(event.currentTarget.value)}
        />
        <select aria-label="Sort conversations" value={sort} onChange={(event) => setSort(event.currentTarget.value)}>
          {SORTS.map(([value, label]) => (
            <option value={value} key={value}>
              {label}
            </option>
          ))}
        </select>
      </div>
      {load.error && <ErrorBanner message={load.error} />}
      {loaded && items.length === 0 && <p class="empty">No conversations yet. Start one to put an agent to work.</p>}
      <ul class="cards" aria-label="Conversations">
        {items.map((conversation) => (
          <li key={conversation.id}>
            <a class="card" href={`#/conversations/${conversation.id}`}>
              <span class="card-title">{conversation.title}</span>
              <span class="meta">
                <StatusBadge status={conversation.execution_status} label="Agent" />
                <StatusBadge status={conversation.sandbox_status} label="Sandbox" />
                <span>{conversation.selected_repository ?? "no repository"}</span>
                <time dateTime={conversation.created_at}>{when(conversation.created_at)}</time>
              </span>
            </a>
          </li>
        ))}
      </ul>
      {next !== null && (
        <button
          type="button"
          disabled={load.busy}
          onClick={() =>
            load.run(async () => {
              const page = await fetchPage(next);
              setItems((current) => [...current, ...page.items]);
              setNext(page.next_page_id);
            })
          }
        >
          {load.busy ? "Loading…" : "Load more"}
        </button>
      )}
    </section>
  );
}

const STEPS: [string, string][] = [
  ["WORKING", "Accepted"],
  ["WAITING_FOR_SANDBOX", "Waiting for the sandbox"],
  ["PREPARING_REPOSITORY", "Preparing the repository"],
  ["RUNNING_SETUP_SCRIPT", "Running the setup script"],
  ["SETTING_UP_GIT_HOOKS", "Setting up git hooks"],
  ["STARTING_CONVERSATION", "Starting the conversation"],
  ["READY", "Ready"],
];

function StartProgress({ task }: { task: StartTask }) {
  const reached = STEPS.findIndex(([status]) => status === task.status);
  return (
    <ol class="steps" aria-label="Start progress">
      {STEPS.map(([status, label], index) => {
        const state =
          task.status === "ERROR"
            ? "pending"
            : index < reached || task.status === "READY"
              ? "done"
              : index === reached
                ? "current"
                : "pending";
        return (
          <li key={status} class={`step step-${state}`} aria-current={state === "current" ? "step" : undefined}>
            {label}
          </li>
        );
      })}
      {task.status === "ERROR" && <li class="step step-error">Failed</li>}
    </ol>
  );
}

export function NewConversation() {
  const [prompt, setPrompt] = useState("");
  const [repository, setRepository] = useState("");
  const [branch, setBranch] = useState("");
  const [spec, setSpec] = useState("");
  const [model, setModel] = useState("");
  const [specs, setSpecs] = useState<SandboxSpec[]>([]);
  const [task, setTask] = useState<StartTask | null>(null);
  const start = useAction();

  useEffect(() => {
    api<Page<SandboxSpec>>("GET", "/sandbox-specs/search?limit=100")
      .then((page) => setSpecs(page.items))
      .catch(() => setSpecs([]));
  }, []);

  const submit = () =>
    start.run(async () => {
      const body: Record<string, unknown> = {
        initial_message: { content: [{ type: "text", text: prompt }], run: true },
      };
      if (repository.trim() !== "") body.selected_repository = repository.trim();
      if (branch.trim() !== "") body.selected_branch = branch.trim();
      if (model.trim() !== "") body.llm_model = model.trim();
      let sandboxId: string | undefined;
      if (spec !== "") {
        const sandbox = await api<{ id: string }>("POST", "/sandboxes", { sandbox_spec_id: spec });
        sandboxId = sandbox.id;
        body.sandbox_id = sandboxId;
      }
      let current = await api<StartTask>("POST", "/app-conversations", body);
      setTask(current);
      while (current.status !== "READY" && current.status !== "ERROR") {
        await new Promise((resolve) => setTimeout(resolve, 400));
        const [latest] = await api<(StartTask | null)[]>("GET", `/app-conversations/start-tasks?ids=${current.id}`);
        if (latest) current = latest;
        setTask(current);
      }
      if (current.status === "ERROR") throw new Error(current.detail ?? "The start failed.");
      if (current.app_conversation_id) navigate(`/conversations/${current.app_conversation_id}`);
    });

  return (
    <section aria-labelledby="new-heading">
      <h1 id="new-heading">New conversation</h1>
      <form
        class="stack"
        onSubmit={(event) => {
          event.preventDefault();
          void submit();
        }}
      >
        <label>
          What should the agent do?
          <textarea
            rows={5}
            required
            value={prompt}
            onInput={(event) => setPrompt(event.currentTarget.value)}
            placeholder="Fix the failing test in src/calc.py"
          />
        </label>
        <div class="grid2">
          <label>
            Repository
            <input
              value={repository}
              onInput={(event) => setRepository(event.currentTarget.value)}
              placeholder="owner/repo (optional)"
            />
          </label>
          <label>
            Branch
            <input value={branch} onInput={(event) => setBranch(event.currentTarget.value)} placeholder="default branch" />
          </label>
          <label>
            Sandbox spec
            <select value={spec} onChange={(event) => setSpec(event.currentTarget.value)}>
              <option value="">Default</option>
              {specs.map((item) => (
                <option key={item.id} value={item.id}>
                  {item.id}
                </option>
              ))}
            </select>
          </label>
          <label>
            Model
            <input value={model} onInput={(event) => setModel(event.currentTarget.value)} placeholder="deployment default" />
          </label>
        </div>
        <button type="submit" disabled={start.busy}>
          {start.busy ? "Starting…" : "Start"}
        </button>
      </form>
      {task && <StartProgress task={task} />}
      {start.error && <ErrorBanner message={start.error} />}
    </section>
  );
}
