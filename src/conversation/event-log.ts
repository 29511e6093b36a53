import type { ConversationEvent, EventSource } from "./types";

export type EventSortOrder = "TIMESTAMP" | "TIMESTAMP_DESC";

export interface EventQuery {
  kind?: string | undefined;
  timestamp_gte?: string | undefined;
  timestamp_lt?: string | undefined;
}

/** A position in the cross-conversation event order: (timestamp, conversation id, sequence). */
export type EventCursor = [string, string, number];

type EventRow = { seq: number; event_json: string; llm_json: string | null };

/** An event with what the model is shown of it. */
export type HistoryEntry = { readonly event: ConversationEvent; readonly llm: unknown };

/** An event as stored: its sequence number and its API JSON. */
export type StoredEvent = { seq: number; event_json: string };

/** The sequence number of the last event; 0 when there is none. */
export function lastEventSeq(sql: SqlStorage): number {
  return sql.exec<{ last: number }>("SELECT COALESCE(MAX(seq), 0) AS last FROM events").one().last;
}

/** Up to `limit` events after sequence number `seq`, oldest first, as stored. */
export function eventsAfter(sql: SqlStorage, seq: number, limit: number): StoredEvent[] {
  return sql.exec<StoredEvent>("SELECT seq, event_json FROM events WHERE seq > ? ORDER BY seq LIMIT ?", seq, limit).toArray();
}

/**
 * A conversation's event log: append-only rows in its object's SQLite, ordered by a sequence
 * number. An event's id is `<conversation id>-<sequence>`, so any event can be found from its id.
 */
export class EventLog {
  private readonly parsed: HistoryEntry[] = [];
  private parsedUpTo = 0;

  constructor(
    private readonly sql: SqlStorage,
    private readonly conversationId: string,
    /** Told after every append (live streams pick the new rows up from the table). */
    private readonly onAppend: () => void = () => undefined,
  ) {}

  /** Appends an event; `llm` is what the model is shown for it, kept beside it, never in the API. */
  append(source: EventSource, kind: string, fields: Record<string, unknown>, llm?: unknown): ConversationEvent {
    const seq = lastEventSeq(this.sql) + 1;
    const event: ConversationEvent = {
      id: `${this.conversationId}-${seq}`,
      timestamp: new Date().toISOString(),
      source,
      kind,
      ...fields,
    };
    this.sql.exec(
      "INSERT INTO events (seq, id, timestamp, source, kind, event_json, llm_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
      seq,
      event.id,
      event.timestamp,
      source,
      kind,
      JSON.stringify(event),
      llm === undefined ? null : JSON.stringify(llm),
    );
    this.onAppend();
    return event;
  }

  /**
   * Every event with what the model sees of it, oldest first. Parsed rows are kept: each call
   * reads and parses only the rows appended since the last one (the log is append-only). Not
   * for use inside a transaction that may roll back. The entries are shared: do not change them.
   */
  history(): readonly HistoryEntry[] {
    const rows = this.sql
      .exec<EventRow>("SELECT seq, event_json, llm_json FROM events WHERE seq > ? ORDER BY seq", this.parsedUpTo)
      .toArray();
    for (const row of rows) {
      this.parsed.push({
        event: JSON.parse(row.event_json) as ConversationEvent,
        llm: row.llm_json === null ? undefined : (JSON.parse(row.llm_json) as unknown),
      });
      this.parsedUpTo = row.seq;
    }
    return this.parsed;
  }

  /** Deletes every event (the conversation is deleted). */
  clear(): void {
    this.sql.exec("DELETE FROM events");
    this.parsed.length = 0;
    this.parsedUpTo = 0;
  }

  all(): ConversationEvent[] {
    return this.sql
      .exec<StoredEvent>("SELECT seq, event_json FROM events ORDER BY seq")
      .toArray()
      .map((row) => JSON.parse(row.event_json) as ConversationEvent);
  }

  bySeq(seqs: number[]): ConversationEvent[] {
    if (seqs.length === 0) return [];
    return this.sql
      .exec<EventRow>(`SELECT seq, event_json, llm_json FROM events WHERE seq IN (${seqs.map(() => "?").join(", ")})`, ...seqs)
      .toArray()
      .map((row) => JSON.parse(row.event_json) as ConversationEvent);
  }

  private where(query: EventQuery): { clauses: string[]; bindings: (string | number)[] } {
    const clauses: string[] = [];
    const bindings: (string | number)[] = [];
    if (query.kind !== undefined) {
      clauses.push("kind = ?");
      bindings.push(query.kind);
    }
    if (query.timestamp_gte !== undefined) {
      clauses.push("timestamp >= ?");
      bindings.push(query.timestamp_gte);
    }
    if (query.timestamp_lt !== undefined) {
      clauses.push("timestamp < ?");
      bindings.push(query.timestamp_lt);
    }
    return { clauses, bindings };
  }

  /**
   * Up to `limit` events in the cross-conversation order strictly after (or, descending, before)
   * `after`; the caller merges the answers of several conversations.
   */
  search(query: EventQuery, order: EventSortOrder, limit: number, after: EventCursor | null): ConversationEvent[] {
    const { clauses, bindings } = this.where(query);
    const descending = order === "TIMESTAMP_DESC";
    if (after !== null) {
      const [timestamp, conversationId, seq] = after;
      const cmp = descending ? "<" : ">";
      if (conversationId === this.conversationId) {
        clauses.push(`(timestamp, seq) ${cmp} (?, ?)`);
        bindings.push(timestamp, seq);
      } else {
        // Ties on timestamp are ordered by conversation id, then sequence.
        const sameTimeAllowed = descending ? this.conversationId < conversationId : this.conversationId > conversationId;
        clauses.push(sameTimeAllowed ? `timestamp ${cmp}= ?` : `timestamp ${cmp} ?`);
        bindings.push(timestamp);
      }
    }
    const direction = descending ? "DESC" : "ASC";
    const where = clauses.length === 0 ? "" : `WHERE ${clauses.join(" AND ")}`;
    return this.sql
      .exec<EventRow>(
        `SELECT seq, event_json, llm_json FROM events ${where} ORDER BY timestamp ${direction}, seq ${direction} LIMIT ?`,
        ...bindings,
        limit,
      )
      .toArray()
      .map((row) => JSON.parse(row.event_json) as ConversationEvent);
  }

  count(query: EventQuery): number {
    const { clauses, bindings } = this.where(query);
    const where = clauses.length === 0 ? "" : `WHERE ${clauses.join(" AND ")}`;
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM events ${where}`, ...bindings).one().n;
  }
}

/** The sequence number in an event id, with its conversation; null for anything else. */
export function parseEventId(id: string): { conversationId: string; seq: number } | null {
  const match = /^([0-9a-f]{32})-([1-9][0-9]{0,15})$/.exec(id);
  if (!match) return null;
  return { conversationId: match[1] ?? "", seq: Number(match[2]) };
}
