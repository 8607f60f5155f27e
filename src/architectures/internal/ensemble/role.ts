/**
 * The Ensemble's roles (solver, critic, judge) are sub-agents whose architecture is exactly one model call: the
 * agent's instructions as the system message, the prompt as the user message, `n` completions. One call per role
 * is what lets the Ensemble count a phase's cost before starting it, so `maxCalls` is never exceeded.
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
}): Architecture.Architecture<Model.Model> =>
  Architecture.make({
    name: "ensemble_role",
    program: (input) =>
      Effect.gen(function*() {
        const messages: Array<Model.Message> = []
        if (input.agent.instructions !== "") messages.push(Model.system(input.agent.instructions))
        messages.push(...input.history, Model.user(input.prompt))
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
