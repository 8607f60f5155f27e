/**
 * Tool calls that want to know which call they answer: a wrapper (a durable run's tools) registers its `call` here
 * with a version taking the call's id, and `Tool.execute` uses that one. A tool's own `call` is unchanged, so code
 * that calls it directly goes on working; only the runtime, which knows the id, passes it.
 */
import type * as Tool from "../Tool.js"

/** `call` → the same call taking the model's call id first. */
export const withCallId = new WeakMap<
  Tool.Tool<unknown>["call"],
  (toolCallId: string, argumentsText: string) => ReturnType<Tool.Tool<unknown>["call"]>
>()
