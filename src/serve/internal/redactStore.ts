/**
 * The thread store as a server uses it: a `ThreadStoreError` keeps its operation, thread and message index, but its
 * message — the driver's text: SQL, a file path, a database host, a constraint's name — goes to the server's log,
 * not to the client. Clients learn that the store failed and where; the operator reads why.
 */
import { Effect } from "effect"
import * as Threads from "../../core/Threads.js"

const redact = (error: Threads.ThreadStoreError): Effect.Effect<never, Threads.ThreadStoreError> =>
  Effect.andThen(
    Effect.logError("thread store failed", { operation: error.operation, threadId: error.threadId, index: error.index, cause: error.message }),
    Effect.fail(
      new Threads.ThreadStoreError({
        operation: error.operation,
        ...(error.threadId !== undefined ? { threadId: error.threadId } : {}),
        ...(error.index !== undefined ? { index: error.index } : {}),
        message: `Threads.${error.operation}: the thread store failed (the server's log has the cause)`
      })
    )
  )

const isStoreError = (error: unknown): error is Threads.ThreadStoreError =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "ThreadStoreError"

/**
 * `service` with every operation's `ThreadStoreError` redacted. Every function-valued member is wrapped, so an
 * operation a store gains later is covered without being listed here.
 */
export const redacted = (service: Threads.Service): Threads.Service => {
  const wrapped: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(service)) {
    wrapped[key] = typeof value === "function"
      ? (...args: ReadonlyArray<unknown>) => {
        const result: unknown = (value as (...args: ReadonlyArray<unknown>) => unknown)(...args)
        return Effect.isEffect(result)
          ? Effect.catchIf(result as Effect.Effect<unknown, unknown, never>, isStoreError, redact)
          : result
      }
      : value
  }
  return wrapped as unknown as Threads.Service
}
