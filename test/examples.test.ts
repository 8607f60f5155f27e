import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as ReactCalculator from "../examples/react-calculator.js"
import * as RecordReplay from "../examples/record-replay.js"
import * as SubAgents from "../examples/sub-agents.js"

/** Runs an example's program and collects what it prints. */
const printed = <E, R>(program: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const original = console.log
    console.log = (...args: Array<unknown>) => void lines.push(args.map(String).join(" "))
    yield* program.pipe(Effect.ensuring(Effect.sync(() => { console.log = original })))
    return lines
  })

describe("examples", () => {
  it.live("react-calculator streams a ReAct run to its answer", () =>
    Effect.gen(function*() {
      const lines = yield* printed(ReactCalculator.main)
      expect(lines[0]).toMatch(/^# ReAct calculator — .*using ScriptedModel/)
      expect(lines.at(-1)).toMatch(/run completed after 2 model calls.*both are 42\.$/)
    }).pipe(Effect.provide(Logger.remove(Logger.defaultLogger))))

  it.live("sub-agents prints the session tree", () =>
    Effect.gen(function*() {
      const lines = yield* printed(SubAgents.main)
      const tree = lines.at(-1)!.split("\n")
      expect(tree[0]).toBe("session tree:")
      expect(tree[2]).toMatch(/__researcher: 4 events$/)
      expect(tree[3]).toMatch(/__writer: 4 events$/)
    }))

  it.live("record-replay replays without a model and reports a miss", () =>
    Effect.gen(function*() {
      const lines = yield* printed(RecordReplay.main)
      expect(lines).toContain("identical output and usage: true")
      expect(lines.at(-1)).toMatch(/^a prompt that was never recorded: ReplayMiss: /)
    }))
})
