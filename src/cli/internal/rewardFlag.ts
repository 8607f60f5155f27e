/**
 * `--reward <spec>` of `valet actor-loop` and `valet rollout`: the `Reward` built-ins written on a command line.
 * A spec is `[<weight>*]<kind>[:<argument>]`:
 * - `exit-code:<command>` (`Reward.exitCode`), `tests-pass:<command>` (`Reward.testsPass`): the command split on
 *   spaces, or a JSON array of strings (`tests-pass:["pytest","-q","tests dir"]`);
 * - `ast-grep:<language>:<pattern>` (`Reward.astGrep`, 1 when the pattern matches), `ast-grep-none:<language>:<pattern>`
 *   (1 when it matches nowhere);
 * - `exact-answer`, `normalized-answer` (against the task's `reference`);
 * - `judged:<rubric>` (`Reward.judged`, asked of the run's model).
 *
 * The flag repeats: several specs are `Reward.weighted` (weight 1 unless given: `0.8*tests-pass:pytest -q`).
 * A spec that does not parse is a `UsageError` naming the spec and what is wrong with it.
 */
import { Effect, Result, Schema } from "effect"
import type * as Model from "../../core/Model.js"
import * as Reward from "../../rollouts/Reward.js"
import { UsageError } from "./failure.js"

/** The kinds a spec may name, as they are spelt on the command line. */
export const rewardKinds = ["exit-code", "tests-pass", "ast-grep", "ast-grep-none", "exact-answer", "normalized-answer", "judged"] as const

const CommandArray = Schema.fromJsonString(Schema.NonEmptyArray(Schema.String))

const commandOf = (text: string): Result.Result<ReadonlyArray<string>, string> => {
  const trimmed = text.trim()
  if (trimmed.startsWith("[")) {
    return Result.mapError(Schema.decodeUnknownResult(CommandArray)(trimmed), () => "the command is not a JSON array of strings")
  }
  const words = trimmed.split(/\s+/).filter((word) => word !== "")
  return words.length === 0 ? Result.fail("the command is empty") : Result.succeed(words)
}

/** One spec as a reward and its weight; a failure says what is wrong (without the spec, which the caller adds). */
export const parseRewardSpec = (spec: string): Result.Result<Reward.WeightedReward<Model.Model>, string> => {
  const weighted = /^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*\*(.*)$/i.exec(spec)
  const weight = weighted === null ? 1 : Number(weighted[1])
  if (!Number.isFinite(weight)) return Result.fail(`the weight ${weighted![1]} is not a finite number`)
  const body = (weighted === null ? spec : weighted[2]!).trim()
  const colon = body.indexOf(":")
  const kind = colon === -1 ? body : body.slice(0, colon)
  const argument = colon === -1 ? undefined : body.slice(colon + 1)
  const needs = (what: string): Result.Result<never, string> => Result.fail(`${kind} needs ${what} after "${kind}:"`)
  const ok = (reward: Reward.Reward<Model.Model>) => Result.succeed({ reward, weight })
  switch (kind) {
    case "exit-code":
    case "tests-pass": {
      if (argument === undefined) return needs("a command")
      return Result.flatMap(commandOf(argument), (command) => ok(kind === "exit-code" ? Reward.exitCode(command) : Reward.testsPass(command)))
    }
    case "ast-grep":
    case "ast-grep-none": {
      const at = argument?.indexOf(":") ?? -1
      if (argument === undefined || at <= 0 || argument.slice(at + 1).trim() === "") return needs("<language>:<pattern>")
      return ok(Reward.astGrep({
        language: argument.slice(0, at).trim(),
        pattern: argument.slice(at + 1),
        ...(kind === "ast-grep-none" ? { matches: "none" as const } : {})
      }))
    }
    case "exact-answer":
    case "normalized-answer":
      if (argument !== undefined) return Result.fail(`${kind} takes no argument (it compares with the task's reference)`)
      return ok(kind === "exact-answer" ? Reward.exactAnswer() : Reward.normalizedAnswer())
    case "judged":
      if (argument === undefined || argument.trim() === "") return needs("a rubric")
      return ok(Reward.judged({ rubric: argument.trim() }))
    default:
      return Result.fail(`unknown reward kind "${kind}" (known: ${rewardKinds.join(", ")})`)
  }
}

/**
 * The reward of the `--reward` specs: none → undefined (records keep `reward: null`); one without a weight → that
 * reward; otherwise their weighted sum. A bad spec fails with `UsageError`: `--reward "tets-pass:pytest": unknown …`.
 */
export const rewardOfSpecs = (
  specs: ReadonlyArray<string>
): Effect.Effect<Reward.Reward<Model.Model> | undefined, UsageError> =>
  Effect.gen(function*() {
    const parts: Array<Reward.WeightedReward<Model.Model>> = []
    for (const spec of specs) {
      const parsed = parseRewardSpec(spec)
      if (Result.isFailure(parsed)) return yield* new UsageError({ message: `--reward ${JSON.stringify(spec)}: ${parsed.failure}` })
      parts.push(parsed.success)
    }
    if (parts.length === 0) return undefined
    if (parts.length === 1 && parts[0]!.weight === 1) return parts[0]!.reward
    return Reward.weighted(parts)
  })
