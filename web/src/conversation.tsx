import { useEffect, useRef, useState } from "preact/hooks";
import { type AgentEvent, api, type Conversation, eventSocketUrl } from "./api";
import { ErrorBanner, navigate, StatusBadge, useAction } from "./ui";

const seqOf = (event: AgentEvent): number | null => {
  const match = /-(\d+)$/.exec(event.id);
  return match?.[1] && /^[0-9a-f]{32}-\d+$/.test(event.id) ? Number(match[1]) : null;
};

/** The conversation's events from its socket: history first, then live; it reconnects from the last one. */
function useEvents(id: string, onState: (value: Partial<Conversation>) => void) {
  const [events, setEvents] = useState<AgentEvent[]>([]);
  const [problem, setProblem] = useState<string | null>(null);
  const [connected, setConnected] = useState(false);
  const last = useRef<number | null>(null);
  const stateListener = useRef(onState);
  stateListener.current = onState;

  useEffect(() => {
    let socket: WebSocket | null = null;
    let stopped = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const connect = () => {
      socket = new WebSocket(eventSocketUrl(id, last.current));
      socket.onopen = () => setConnected(true);
      socket.onmessage = (message) => {
        const frame = JSON.parse(String(message.data)) as AgentEvent & { code?: string; detail?: unknown };
        if (frame.kind === undefined && frame.code !== undefined) {
          setProblem(typeof frame.detail === "string" ? frame.detail : frame.code);
          return;
        }
        if (frame.kind === "ConversationStateUpdateEvent" && frame.key === "full_state") {
          stateListener.current(frame.value as Partial<Conversation>);
          return;
        }
        const seq = seqOf(frame);
        if (seq === null || (last.current !== null && seq <= last.current)) return;
        last.current = seq;
        setEvents((current) => [...current, frame]);
        if (frame.kind === "ConversationStateUpdateEvent" && frame.key === "execution_status") {
          stateListener.current({ execution_status: String(frame.value) });
        }
      };
      socket.onclose = (event) => {
        setConnected(false);
        if (stopped) return;
        if (event.code === 4001 || event.code === 4004) return;
        retry = setTimeout(connect, 1000);
      };
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      socket?.close();
    };
  }, [id]);
  return { events, problem, connected };
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: { type?: string; text?: string }) => (part.type === "text" ? (part.text ?? "") : "[image]"))
      .join("\n");
  }
  return "";
}

/** A line diff (longest common subsequence), enough for the edits of one file. */
export function lineDiff(before: string, after: string): { sign: " " | "-" | "+"; line: string }[] {
  const a = before.split("\n");
  const b = after.split("\n");
  const removed = a.map((line) => ({ sign: "-" as const, line }));
  const added = b.map((line) => ({ sign: "+" as const, line }));
  if (a.length * b.length > 4_000_000) return [...removed, ...added];
  // common[i * width + j]: the longest common subsequence of a[i..] and b[j..].
  const width = b.length + 1;
  const common = new Uint32Array((a.length + 1) * width);
  const at = (i: number, j: number) => common[i * width + j] ?? 0;
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i * width + j] = a[i] === b[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    }
  }
  const out: { sign: " " | "-" | "+"; line: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ sign: " ", line: a[i] ?? "" });
      i++;
      j++;
    } else if (at(i + 1, j) >= at(i, j + 1)) out.push({ sign: "-", line: a[i++] ?? "" });
    else out.push({ sign: "+", line: b[j++] ?? "" });
  }
  while (i < a.length) out.push({ sign: "-", line: a[i++] ?? "" });
  while (j < b.length) out.push({ sign: "+", line: b[j++] ?? "" });
  return out;
}

function Diff({ before, after, path }: { before: string; after: string; path: string }) {
  const lines = lineDiff(before, after);
  // Only the changed lines and two lines of context around them.
  const keep = lines.map((_, index) => lines.slice(Math.max(0, index - 2), index + 3).some((near) => near.sign !== " "));
  return (
    <figure class="diff-wrap" aria-label={`Changes to ${path}`}>
      <pre class="diff">
        {lines.map((entry, index) =>
          keep[index] ? (
            <div key={index} class={entry.sign === "+" ? "add" : entry.sign === "-" ? "del" : ""}>
              {entry.sign} {entry.line}
            </div>
          ) : null,
        )}
      </pre>
    </figure>
  );
}

function Action({ event }: { event: AgentEvent }) {
  const action = (event.action ?? {}) as Record<string, unknown>;
  const tool = String(event.tool_name);
  return (
    <div class="event action">
      <div class="label">Action · {tool}</div>
      {typeof event.thought === "string" && event.thought !== "" && <p class="thought">{event.thought}</p>}
      {tool === "terminal" && <pre class="terminal">$ {String(action.command ?? "")}</pre>}
      {tool === "file_editor" && (
        <p>
          <code>{String(action.command)}</code> <code>{String(action.path)}</code>
        </p>
      )}
      {tool === "think" && <p class="thought">{String(action.thought ?? "")}</p>}
      {tool === "finish" && <p>{String(action.message ?? "")}</p>}
      {tool === "task_tracker" && <p>{String(action.command ?? "")}</p>}
    </div>
  );
}

function Observation({ event }: { event: AgentEvent }) {
  const observation = (event.observation ?? {}) as Record<string, unknown>;
  const tool = String(event.tool_name);
  if (tool === "terminal" || observation.kind === "SetupScriptObservation") {
    const exit = observation.exit_code;
    return (
      <div class="event observation">
        <div class="label">
          Output{observation.kind === "SetupScriptObservation" ? " · setup script" : ""}
          {exit !== undefined && exit !== null && ` · exit ${String(exit)}`}
        </div>
        <pre class="terminal">{String(observation.output ?? "")}</pre>
      </div>
    );
  }
  if (tool === "file_editor" && typeof observation.new_content === "string") {
    return (
      <div class="event observation">
        <div class="label">Edit · {String(observation.path)}</div>
        <Diff before={String(observation.old_content ?? "")} after={observation.new_content} path={String(observation.path)} />
      </div>
    );
  }
  const text = observation.content ?? observation.message ?? "";
  return (
    <div class="event observation">
      <div class="label">Result · {tool}</div>
      {text !== "" && <pre class="plain">{String(text)}</pre>}
    </div>
  );
}

function EventItem({ event }: { event: AgentEvent }) {
  switch (event.kind) {
    case "MessageEvent": {
      const message = event.llm_message as { role: string; content: unknown };
      return (
        <div class={`event message message-${event.source}`}>
          <div class="label">{event.source === "user" ? "You" : "Agent"}</div>
          <p class="text">{textOf(message.content)}</p>
        </div>
      );
    }
    case "ActionEvent":
      return <Action event={event} />;
    case "ObservationEvent":
      return <Observation event={event} />;
    case "AgentErrorEvent":
      return (
        <div class="event agent-error">
          <div class="label">Tool error · {String(event.tool_name)}</div>
          <pre class="plain">{String(event.error)}</pre>
        </div>
      );
    case "ConversationErrorEvent":
      return (
        <div class="event conversation-error" role="status">
          <div class="label">{String(event.code)}</div>
          <p>{String(event.detail)}</p>
        </div>
      );
    case "ConversationStateUpdateEvent":
      return <div class="event state">Agent {String(event.value)}</div>;
    case "PauseEvent":
      return <div class="event state">Paused</div>;
    case "SystemPromptEvent":
      return (
        <details class="event system">
          <summary>System prompt</summary>
          <pre class="plain">{String(event.system_prompt)}</pre>
        </details>
      );
    default:
      return <div class="event state">{event.kind}</div>;
  }
}

export function ConversationView({ id }: { id: string }) {
  const [conversation, setConversation] = useState<Conversation | null>(null);
  const [message, setMessage] = useState("");
  const [renaming, setRenaming] = useState<string | null>(null);
  const load = useAction();
  const act = useAction();
  const refresh = () => api<Conversation>("GET", `/app-conversations/${id}`).then(setConversation);
  const { events, problem, connected } = useEvents(id, (value) => {
    setConversation((current) => (current === null ? current : { ...current, ...value }));
    // The metrics and the sandbox's status come with the conversation.
    void refresh().catch(() => undefined);
  });

  useEffect(() => {
    void load.run(refresh);
  }, [id]);

  const log = useRef<HTMLOListElement>(null);
  useEffect(() => {
    log.current?.lastElementChild?.scrollIntoView({ block: "nearest" });
  }, [events.length]);

  if (conversation === null) {
    return load.error ? <ErrorBanner message={load.error} /> : <p class="loading">Loading…</p>;
  }
  const usage = conversation.metrics.accumulated_token_usage;
  const running = conversation.execution_status === "running";
  return (
    <section class="conversation" aria-labelledby="conversation-title">
      <div class="row between wrap">
        {renaming === null ? (
          <h1 id="conversation-title">{conversation.title}</h1>
        ) : (
          <form
            class="row"
            onSubmit={(event) => {
              event.preventDefault();
              void act.run(async () => {
                setConversation(await api<Conversation>("PATCH", `/app-conversations/${id}`, { title: renaming }));
                setRenaming(null);
              });
            }}
          >
            <input aria-label="New title" value={renaming} onInput={(event) => setRenaming(event.currentTarget.value)} />
            <button type="submit">Save</button>
            <button type="button" class="secondary" onClick={() => setRenaming(null)}>
              Cancel
            </button>
          </form>
        )}
        <div class="row wrap actions">
          {renaming === null && (
            <button type="button" class="secondary" onClick={() => setRenaming(conversation.title)}>
              Rename
            </button>
          )}
          {running ? (
            <button
              type="button"
              disabled={act.busy}
              onClick={() => act.run(() => api("POST", `/app-conversations/${id}/pause`))}
            >
              Pause agent
            </button>
          ) : (
            <button type="button" disabled={act.busy} onClick={() => act.run(() => api("POST", `/app-conversations/${id}/run`))}>
              Run agent
            </button>
          )}
          <button
            type="button"
            class="danger"
            disabled={act.busy}
            onClick={() => {
              if (!confirm(`Delete "${conversation.title}" and its sandbox? This cannot be undone.`)) return;
              void act.run(async () => {
                await api("DELETE", `/app-conversations/${id}`);
                navigate("/");
              });
            }}
          >
            Delete
          </button>
        </div>
      </div>
      <dl class="facts">
        <div>
          <dt>Agent</dt>
          <dd>
            <StatusBadge status={conversation.execution_status} label="Agent" />
          </dd>
        </div>
        <div>
          <dt>Sandbox</dt>
          <dd>
            <StatusBadge status={conversation.sandbox_status} label="Sandbox" />{" "}
            <code>{conversation.sandbox_id.slice(0, 8)}</code>
          </dd>
        </div>
        <div>
          <dt>Repository</dt>
          <dd>{conversation.selected_repository ?? "none"}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd id="token-usage">
            {usage.prompt_tokens} in · {usage.completion_tokens} out
          </dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>${conversation.metrics.accumulated_cost.toFixed(4)}</dd>
        </div>
        <div>
          <dt>Live</dt>
          <dd>{connected ? "connected" : "reconnecting…"}</dd>
        </div>
      </dl>
      {act.error && <ErrorBanner message={act.error} onDismiss={act.clear} />}
      {problem && <ErrorBanner message={problem} />}
      <ol class="events" aria-label="Events" ref={log}>
        {events.map((event) => (
          <li key={event.id} data-kind={event.kind}>
            <EventItem event={event} />
          </li>
        ))}
      </ol>
      <form
        class="composer"
        onSubmit={(event) => {
          event.preventDefault();
          const text = message.trim();
          if (text === "") return;
          void act
            .run(() => api("POST", `/app-conversations/${id}/send-message`, { content: [{ type: "text", text }], run: true }))
            .then((sent) => {
              if (sent) setMessage("");
            });
        }}
      >
        <textarea
          aria-label="Message to the agent"
          rows={2}
          value={message}
          onInput={(event) => setMessage(event.currentTarget.value)}
          placeholder="Tell the agent what to do next"
        />
        <button type="submit" disabled={act.busy}>
          Send
        </button>
      </form>
    </section>
  );
}
