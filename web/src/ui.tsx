import { useEffect, useState } from "preact/hooks";
import { ApiError } from "./api";

export function ErrorBanner({ message, onDismiss }: { message: string; onDismiss?: () => void }) {
  return (
    <div class="error" role="alert">
      <span>{message}</span>
      {onDismiss && (
        <button type="button" class="link" aria-label="Dismiss the error" onClick={onDismiss}>
          ×
        </button>
      )}
    </div>
  );
}

export function messageOf(error: unknown): string {
  if (error instanceof ApiError || error instanceof Error) return error.message;
  return String(error);
}

/** Runs an action, keeping its error (the API's detail) and whether it is under way. */
export function useAction(): {
  busy: boolean;
  error: string | null;
  clear: () => void;
  run: (action: () => Promise<unknown>) => Promise<boolean>;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  return {
    busy,
    error,
    clear: () => setError(null),
    run: async (action) => {
      setBusy(true);
      setError(null);
      try {
        await action();
        return true;
      } catch (caught) {
        setError(messageOf(caught));
        return false;
      } finally {
        setBusy(false);
      }
    },
  };
}

export function StatusBadge({ status, label }: { status: string; label: string }) {
  return (
    <span class={`badge badge-${status.toLowerCase()}`}>
      <span class="sr-only">{label}: </span>
      {status}
    </span>
  );
}

/** Re-renders every `ms` milliseconds while mounted. */
export function useTick(ms: number): void {
  const [, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((n) => n + 1), ms);
    return () => clearInterval(timer);
  }, [ms]);
}

export function when(iso: string): string {
  return new Date(iso).toLocaleString();
}

export function navigate(path: string): void {
  location.hash = path;
}
