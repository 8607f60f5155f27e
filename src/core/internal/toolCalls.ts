/**
 * Tool calls that want to know which call they answer: a wrapper (a durable run's tools) registers its `call` here
 * with a version taking the call's id, and `Tool.execute` uses that one. A tool's own `call` is unchanged, so code
 * that calls it directly goes on working; only the runtime, which knows the id, passes it. (Typed without `Tool`,
 * which imports this file.)
 */
import type { Effect } from "effect"
import type { Part } from "./modelSchema.js"

/** `call` → the same call taking the model's call id first. */
export const withCallId = new WeakMap<
  (argumentsText: string) => Effect.Effect<unknown, never, never>,
  (toolCallId: string, argumentsText: string) => Effect.Effect<{ readonly content: string; readonly isError: boolean }, never, never>
>()

/**
 * A `ToolReturned` event → the parts its result carried (images, files, audio). The event describes them without
 * their bytes (`attachments`); a thread turn's transcript, made from the events, keeps the parts themselves so the
 * next turn's model sees what this one saw. Keyed by the emitted event object.
 */
export const returnedParts = new WeakMap<object, ReadonlyArray<Part>>()
