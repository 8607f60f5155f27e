/**
 * The rules `Architecture.define` and the runtime own for every architecture: a role that stops at a limit ends the
 * run (its partial output the run's only when the role answers for it), a deprecated option or placeholder is read
 * and said once per process, on stderr when `makeUnsafe` runs its own runtime.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const { int, optional, template, withDefault } = Architecture.option

/** Two roles in turn: a writer, then a checker whose stop must not become the answer. */
const TwoRoles = Architecture.define({
  name: "two_roles_test",
  title: "TwoRoles",
  description: "a writer, then a checker",
  options: {
    /** Turns of the checker. */
    checkerTurns: int(1).pipe(withDefault(5)),
    /** The writer answers for the run when it stops. */
    writerAnswers: optional(Schema.Boolean),
    /** The checker's prompt (`{task}`, `{output}`). */
    checkerPrompt: template(["task", "output"]).pipe(withDefault("Check {output} for {task}."))
  },
  deprecated: { turnsOfChecker: "checkerTurns", checkTurns: "checkerTurns" },
  program: (input, options) =>
    Effect.gen(function*() {
      const writer = Agent.make({ name: "writer", instructions: "" }) as unknown as Agent.Agent<never>
      const written = yield* Architecture.role(writer, input.prompt, { role: "writer", answers: options.writerAnswers === true })
      yield* Architecture.setOutput(written.output)
      const checker = Agent.make({ name: "checker", instructions: "", maxTurns: options.checkerTurns }) as unknown as Agent.Agent<never>
      const checked = yield* Architecture.role(checker, Architecture.fill(options.checkerPrompt, { task: input.prompt, output: written.output }), {
        role: "checker"
      })
      return { output: `${written.output} (${checked.output})` }
    })
})

/** The warnings logged while `effect` runs. */
const warnings = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel === "Warn") lines.push((Array.isArray(message) ? message : [message]).join(" "))
    })
    const result = yield* effect.pipe(Effect.provide(Logger.layer([logger])))
    return { result, lines }
  })

describe("Architecture.define and the runtime's rules", () => {
  it.effect("a role stopped at a limit ends the run: the best output so far, never a checker's half-written reply", () =>
    Effect.gen(function*() {
      // The checker asks for a tool it does not have, once: its turn limit of 1 stops it with that text written.
      const architecture = yield* TwoRoles.make({ checkerTurns: 1 })
      const agent = Agent.make({ name: "a", instructions: "", architecture })
      const result = yield* Agent.run(agent, "task").pipe(
        Effect.provide(ScriptedModel.layer(["the draft", { text: "Let me look", toolCalls: [{ name: "lookup", arguments: {} }] }]))
      )
      expect(result).toMatchObject({ output: "the draft", interrupted: true, interruptionReason: "checker:max_turns_exceeded" })
    }))

  it.effect("a role that answers for the run gives its partial output when it stops; one that does not leaves the run's", () =>
    Effect.gen(function*() {
      const stopped = { text: "half an answer", toolCalls: [{ name: "lookup", arguments: {} }] }
      for (const [writerAnswers, output] of [[true, "half an answer"], [false, ""]] as const) {
        const architecture = yield* TwoRoles.make({ writerAnswers })
        const agent = Agent.make({ name: "a", instructions: "", architecture })
        // The writer's first call is the budget's only one: it stops with what it wrote, asking for a tool.
        const result = yield* Agent.run(agent, "task", { budget: { maxCalls: 1 } }).pipe(Effect.provide(ScriptedModel.layer([stopped])))
        expect({ writerAnswers, result: { output: result.output, reason: result.interruptionReason } })
          .toEqual({ writerAnswers, result: { output, reason: "budget:max_calls" } })
      }
    }))

  it.effect("a deprecated option and a deprecated placeholder are read, and said once per process each", () =>
    Effect.gen(function*() {
      const { lines } = yield* warnings(Effect.gen(function*() {
        for (let i = 0; i < 3; i++) {
          const architecture = yield* TwoRoles.make({ turnsOfChecker: 2, checkerPrompt: "Check {output} for {prompt}." } as never)
          const agent = Agent.make({ name: "a", instructions: "", architecture })
          const result = yield* Agent.run(agent, "the task").pipe(Effect.provide(ScriptedModel.layer(["draft", "ok"])))
          expect(result.output).toBe("draft (ok)")
        }
      }))
      expect(lines).toEqual([
        "TwoRoles: the option turnsOfChecker is deprecated, use checkerTurns (valet 0.x reads both)",
        "TwoRoles: the placeholder {prompt} is deprecated, use {task} (valet 0.x fills both)"
      ])
      // The old placeholder is filled with the task.
      const architecture = yield* TwoRoles.make({ checkerPrompt: "Check {output} for {prompt}." })
      const script = ScriptedModel.layer(["draft", "ok"])
      const checked = yield* Effect.gen(function*() {
        yield* Agent.run(Agent.make({ name: "a", instructions: "", architecture }), "the task")
        return (yield* ScriptedModel.calls)[1]!.messages!.at(-1)!.content
      }).pipe(Effect.provide(script))
      expect(checked).toBe("Check draft for the task.")
    }))

  it("makeUnsafe says a deprecation on stderr, never on stdout (which may carry a protocol)", () => {
    const stdout: Array<string> = []
    const stderr: Array<string> = []
    const log = console.log
    const error = console.error
    console.log = (...args: Array<unknown>) => void stdout.push(args.join(" "))
    console.error = (...args: Array<unknown>) => void stderr.push(args.join(" "))
    try {
      TwoRoles.makeUnsafe({ checkTurns: 3 } as never)
    } finally {
      console.log = log
      console.error = error
    }
    expect(stdout).toEqual([])
    expect(stderr.join("\n")).toContain("TwoRoles: the option checkTurns is deprecated, use checkerTurns")
  })
})
