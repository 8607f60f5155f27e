import { Effect, Option } from "effect"
import { Argument, Command } from "effect/cli"
import { durableFlag } from "./durable.js"
import { evaluateDataset, flags, noteDeprecatedFlags, realLayers, settingsOf } from "./evaluation.js"
import { requireAnswers } from "./failure.js"
import { stdoutOutput } from "./output.js"

/** `valet eval problems.jsonl --architecture ensemble|tool_vote|self_refine --out results.jsonl`. */
export const evalCommand = Command.make(
  "eval",
  {
    dataset: Argument.File("problems.jsonl", { mustExist: true }).pipe(
      Argument.withDescription("The dataset: one {id, problem, reference} object a line.")
    ),
    ...flags,
    durable: durableFlag
  },
  (values) => {
    const settings = { ...settingsOf(values, values.dataset), durable: Option.getOrUndefined(values.durable) }
    return noteDeprecatedFlags(values).pipe(
      Effect.andThen(evaluateDataset(values.dataset, settings, realLayers(values), stdoutOutput())),
      Effect.flatMap((report) => requireAnswers(values.dataset, report.results, settings.out))
    )
  }
).pipe(
  Command.withDescription(
    "Runs an architecture over a JSONL dataset of {id, problem, reference} lines: one result line per problem in " +
      "--out (re-running resumes), progress, and a summary table (accuracy, calls per problem, correct per 100 calls). " +
      "With --durable every problem is a workflow whose stored model calls survive a killed process."
  )
)
