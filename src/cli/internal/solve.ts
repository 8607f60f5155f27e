import { Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { evaluateDataset, flags, noteDeprecatedFlags, realLayers, settingsOf, solveProblem } from "./evaluation.js"
import { requireAnswer, requireAnswers } from "./failure.js"
import { stdoutOutput } from "./output.js"

/** Whether `solve`'s argument names a dataset rather than being a problem. */
export const isDataset = (input: string): boolean => /\.jsonl?$/i.test(input.trim()) && !/\s/.test(input.trim())

/** `valet solve "<problem>"` or `valet solve problems.jsonl`. */
export const solveCommand = Command.make(
  "solve",
  {
    input: Argument.String("problem | problems.jsonl").pipe(
      Argument.withDescription("A problem in words, or a .jsonl dataset to solve every problem of.")
    ),
    ...flags
  },
  (values) =>
    Effect.gen(function*() {
      yield* noteDeprecatedFlags(values)
      const layers = realLayers(values)
      if (isDataset(values.input)) {
        const settings = settingsOf(values, values.input)
        const report = yield* evaluateDataset(values.input, settings, layers, stdoutOutput())
        yield* requireAnswers(values.input, report.results, settings.out)
      } else {
        yield* requireAnswer(yield* solveProblem(values.input, settingsOf(values, undefined), layers, stdoutOutput()))
      }
    })
).pipe(
  Command.withDescription(
    "Solves one problem with the Ensemble (or --architecture), printing its rounds, candidates, critiques and " +
      "judgements; given a .jsonl file, solves every problem in it like `valet eval`."
  )
)
