/**
 * Tools an architecture adds to a run inside its program (DeepAgent's file tools and `execute`) are not the
 * agent's: whoever runs the agent changes the agent's own tools before the architecture starts (a durable run makes
 * each call an activity of its workflow) and never sees these. `AddedTools` is the one way they get the same
 * treatment: the runner puts a function in context, the architecture passes what it adds through `prepare`. Outside
 * such a runner the function answers the tools as they are.
 */
import { Context, Effect } from "effect"
import type * as Tool from "../Tool.js"

/** What a runner does to the tools an architecture adds: the same to each of them as to the agent's own. */
export interface Prepare {
  <R>(tools: ReadonlyArray<Tool.Tool<R>>): Effect.Effect<ReadonlyArray<Tool.Tool<R>>>
}

/** The runner's `Prepare` in context; by default the tools as they are. */
export const AddedTools = Context.Reference<Prepare>("valet/Architecture/AddedTools", {
  defaultValue: () => Effect.succeed
})

/** The tools an architecture adds to the current run, prepared as the runner in context does its agent's tools. */
export const prepare = <R>(tools: ReadonlyArray<Tool.Tool<R>>): Effect.Effect<ReadonlyArray<Tool.Tool<R>>> =>
  Effect.flatMap(Effect.service(AddedTools), (prepare) => prepare(tools))
