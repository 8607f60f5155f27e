/**
 * A tool call that needs a person's approval (`HumanLoop`): asked, waited for (with the tool's timeout), decided.
 * The runtime emits what this answers and runs (or rejects) the call; this file knows nothing of runs.
 */
import { Duration, Effect, Option } from "effect"
import * as HumanLoop from "./humanLoop.js"
import type * as Tool from "../Tool.js"

/** How a call that waited was decided, and how long it waited. */
export interface Decided extends HumanLoop.Resolution {
  readonly waitedMs: number
}

/** What the model reads for a rejected call. */
export const rejection = (reason: string | undefined): string => `ERROR: rejected: ${reason ?? "no reason given"}`

/** The call ids waiting for a decision, per run (its state object): one call at a time per id. */
const waitingIds = new WeakMap<object, Set<string>>()

/** Claims `toolCallId` for a call of `run` about to wait: `false` when another call of the run waits under it. */
export const claim = (run: object, toolCallId: string): boolean => {
  let ids = waitingIds.get(run)
  if (ids === undefined) waitingIds.set(run, ids = new Set())
  if (ids.has(toolCallId)) return false
  ids.add(toolCallId)
  return true
}

/** The call waiting under `toolCallId` ended (decided, timed out, interrupted). */
export const release = (run: object, toolCallId: string): void => void waitingIds.get(run)?.delete(toolCallId)

/**
 * Waits for the decision on `request`: from the `HumanLoop` in context, within the tool's timeout. Without a
 * `HumanLoop`, rejected at once (nobody could approve it, and a call that waits for nobody would wait forever).
 */
export const decide = (
  request: HumanLoop.ApprovalRequest,
  approval: Tool.Approval<unknown>,
  now: () => number
): Effect.Effect<Decided> =>
  Effect.flatMap(Effect.serviceOption(HumanLoop.HumanLoop), (loop) => {
    const rejected = (reason: string): Decided => ({
      approved: false,
      reason,
      arguments: request.arguments,
      edited: false,
      waitedMs: now() - request.requestedAt
    })
    if (Option.isNone(loop)) return Effect.succeed(rejected("nobody can approve this call here (no HumanLoop in context)"))
    const timeout = approval.timeout
    const { wait, waitWithin } = loop.value
    const decided = timeout === undefined
      ? Effect.map(wait(request, approval.check), Option.some)
      : waitWithin !== undefined
      ? waitWithin(request, approval.check, timeout)
      : Effect.timeoutOption(wait(request, approval.check), timeout)
    return Effect.map(decided, (resolution) =>
      Option.isSome(resolution)
        ? { ...resolution.value, waitedMs: now() - request.requestedAt }
        : rejected(`no decision within ${Duration.format(timeout!)}`))
  })
