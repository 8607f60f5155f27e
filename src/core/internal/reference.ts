/**
 * The reference answer of the problem in flight, for architectures that can use one (the Ensemble's judge is told
 * it). `Evaluate` sets it around each problem's run when it is asked to share references; an architecture's own
 * `reference` option takes precedence. A context reference rather than an option because one architecture value
 * serves a whole dataset, each problem with its own reference.
 */
import { Context, Effect } from "effect"

/** The reference of the problem being solved, if it is shared (read it with `yield* currentReference`). */
export const currentReference: Context.Reference<string | undefined> = Context.Reference<string | undefined>(
  "valet/Architecture/CurrentReference",
  { defaultValue: () => undefined }
)

/** Runs `effect` with `reference` as the current reference. */
export const withReference = (reference: string | undefined) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, currentReference, reference)
