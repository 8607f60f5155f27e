/**
 * The Ensemble's roles (solver, critic, judge) are sub-agents whose architecture is exactly one model call: the
 * agent's instructions as the system message, the prompt as the user message, `n` completions. One call per role
 * is what lets the Ensemble count a phase's cost before starting it, so `maxCalls` is never exceeded.
 *
 * Solvers differ only in their instructions and share the prompt (the problem), so theirs go last instead
 * (`instructionsLast`): after the prompt, in the same user message. Their requests then start alike and a server's
 * prefix cache serves the problem to every solver after the first (with different system messages first, nothing
 * is shared; `bench/prefix.ts`). One user message, not a system message after it: chat templates want the system
 * message first or not at all.
 */
import { Effect } from "effect"
import * as Architecture from "../../../core/Architecture.js"
import * as Model from "../../../core/Model.js"
import type { RequestOptions } from "../sampling.js"

/** An architecture that makes one call with `n` completions; `metadata.completions` holds every choice's text. */
export const oneCall = (options: {
  readonly step: string
  readonly n: number
  readonly request: RequestOptions | undefined
  /** The agent's instructions after the prompt, in the user message, instead of a system message before it. */
  readonly instructionsLast?: boolean
}): Architecture.Architecture<Model.Model> =>
  Architecture.make({
    name: "ensemble_role",
    program: (input) =>
      Effect.gen(function*() {
        const messages: Array<Model.Message> = []
        const instructions = input.agent.instructions
        if (options.instructionsLast === true) {
          messages.push(...input.history, Model.user(instructions === "" ? input.prompt : `${input.prompt}\n\n${instructions}`))
        } else {
          if (instructions !== "") messages.push(Model.system(instructions))
          messages.push(...input.history, Model.user(input.prompt))
        }
        const response = yield* Architecture.generate(
          { ...options.request, messages, ...(options.n > 1 ? { n: options.n } : {}) },
          { step: options.step }
        )
        const completions = response.choices.map((choice) => choice.text)
        const output = completions[0] ?? ""
        return { output, metadata: { completions } }
      })
  })

/** The completions a `oneCall` run answered (its output alone when the metadata lacks them). */
export const completionsOf = (metadata: Readonly<Record<string, unknown>>, output: string): ReadonlyArray<string> => {
  const completions = metadata.completions
  return Array.isArray(completions) && completions.every((text) => typeof text === "string")
    ? completions as ReadonlyArray<string>
    : [output]
}
