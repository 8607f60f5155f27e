import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Model from "../../src/core/Model.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as ToolVote from "../../src/architectures/ToolVote.js"
import { normalizeAnswer } from "../../src/core/internal/parse.js"
import { adjustWhenSleeping } from "../support/clock.js"
import { marker, processesWith, testIsolation } from "../support/processes.js"

const workRoot = mkdtempSync(join(tmpdir(), "valet-toolvote-test-"))
afterAll(() => {
  // Every attempt's workspace is gone.
  expect(readdirSync(workRoot)).toEqual(["kept"])
  rmSync(workRoot, { recursive: true, force: true })
})
const sandbox = Sandbox.layerProcess({ workRoot, graceMs: 200, isolation: testIsolation })

const continuation = "\n\nContinue. If you need python again, emit a new tool JSON object."
const userMessages = (request: Model.Request): Array<string> =>
  (request.messages ?? []).filter((message) => message.role === "user").map((message) => Model.textOf(message.content))
const lastUser = (request: Model.Request): string => userMessages(request).at(-1) ?? ""
const python = (code: string): string => JSON.stringify({ tool: "python", code })

const longCode = `print('x')\n${"#".repeat(50_000)}`

const agentWith = (options: ToolVote.Options) =>
  Effect.map(ToolVote.make(options), (architecture) => Agent.make({ name: "voter", instructions: "", architecture }))

const streamed = (agent: Agent.Agent<Model.Model | Sandbox.Sandbox>, prompt: string) =>
  Effect.gen(function*() {
    const events = yield* Agent.stream(agent, prompt, { sessionId: "tv", textDeltas: false }).pipe(
      Stream.runCollect
    )
    return { events, result: (events.at(-1) as AgentEvent.Of<"RunCompleted">).result }
  })

const progress = (events: ReadonlyArray<AgentEvent.AgentEvent>, name: string) =>
  events.flatMap((event) => (event._tag === "Progress" && event.name === name ? [event] : []))

/** The attempt (from 1) making the model call in flight, from its session id. */
const attemptOfCall = Effect.map(Model.currentCallContext, (context) =>
  Number(/__attempt_(\d+)$/.exec(context?.sessionId ?? "")?.[1] ?? 0))

describe("ToolVote with real python3 through the Sandbox", () => {
  it.live("runs the model's program and answers with its FINAL line", () =>
    Effect.gen(function*() {
      const { events, result } = yield* streamed(yield* agentWith({ attempts: 1 }), "What is 6 times 7?")
      expect(result.output).toBe("42")
      expect(result.modelCalls).toBe(2)
      expect(result.interrupted).toBe(false)
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.messages![0]!.content).toContain(`{"tool": "python", "code": "<Python source>"}`)
      expect(calls[0]!.messages![0]!.content).toContain("stopped after 6 seconds")
      expect(lastUser(calls[0]!)).toBe("What is 6 times 7?")
      expect(lastUser(calls[1]!)).toBe(`PYTHON_OUTPUT:\n42${continuation}`)
      expect(calls[1]!.messages![2]).toEqual(Model.assistant(python("print(6*7)")))
      const ran = progress(events, "tool_vote.python_ran")
      expect(ran).toHaveLength(1)
      expect(ran[0]!.sessionId).toBe("tv__attempt_1")
      expect(ran[0]!.data).toMatchObject({ turn: 1, ran: true, exitCode: 0, timedOut: false })
      expect(result.metadata).toMatchObject({
        accepted: true,
        answer: "42",
        votes: [{ answer: "42", key: "42", votes: 1, attempts: [1] }],
        attempts: [{ attempt: 1, sessionId: "tv__attempt_1", status: "answered", turns: 2, pythonRuns: 1 }]
      })
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer([python("print(6*7)"), "The program says 42.\nFINAL: 42"])), Effect.provide(sandbox)))

  it.live("no output gets a warning to use print(); stderr and a failing exit come back; a timeout is an error line", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(yield* agentWith({ attempts: 1, pythonTimeout: "1 second" }), "p")
      expect(result.output).toBe("done")
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[1]!)).toBe(`PYTHON_OUTPUT:\n[WARNING] The program printed nothing. Use print() to show the values you need.${continuation}`)
      expect(lastUser(calls[2]!)).toMatch(/^PYTHON_OUTPUT:\nbefore\nTraceback[\s\S]*ZeroDivisionError: division by zero\n\nContinue\./)
      expect(lastUser(calls[3]!)).toBe(
        `PYTHON_OUTPUT:\nstarted\nERROR: the program timed out after 1 seconds and was stopped.${continuation}`
      )
      expect(calls[0]!.messages![0]!.content).toContain("stopped after 1 seconds")
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        python("x = 6 * 7"),
        python("print('before')\n1/0"),
        python("print('started', flush=True)\nwhile True: pass"),
        "FINAL: done"
      ])),
      Effect.provide(sandbox)
    ), 20_000)

  it.live("code over 50,000 characters is an error result and is not run; the attempt goes on", () =>
    Effect.gen(function*() {
      const { events, result } = yield* streamed(yield* agentWith({ attempts: 1 }), "p")
      expect(result.output).toBe("1")
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[1]!)).toBe(
        `PYTHON_OUTPUT:\nERROR: the code is ${longCode.length} characters long; the limit is 50000. Write a shorter program.${continuation}`
      )
      expect(progress(events, "tool_vote.python_ran")[0]!.data).toMatchObject({ ran: false, error: "code_too_long" })
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([python(longCode), "FINAL: 1"])),
      Effect.provide(sandbox)
    ))

  it.live("early stop after 4 equal answers interrupts the other attempts and kills their python processes", () =>
    Effect.gen(function*() {
      const mark = marker()
      const loserMark = (attempt: number) => `${mark}-loser-${attempt}`
      // Attempts 5..8 start a long program; attempts 1..4 answer 7 once all four programs are running.
      const script = () =>
        Effect.gen(function*() {
          const attempt = yield* attemptOfCall
          if (attempt >= 5) return python(`import time\n# ${loserMark(attempt)}\ntime.sleep(60)`)
          while ([5, 6, 7, 8].some((loser) => processesWith(loserMark(loser)).length === 0)) yield* Effect.sleep("20 millis")
          return `FINAL: ${["7", "7.0", " 7 ", "$7$"][attempt - 1]}`
        })
      const { events, result } = yield* streamed(yield* agentWith({ attempts: 8, earlyStop: 4 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(script))
      )
      // The losers' programs would sleep for a minute, past the test's own timeout: they were killed, not waited for.
      for (const loser of [5, 6, 7, 8]) expect(processesWith(loserMark(loser))).toEqual([])
      // The four winners answer at the same moment: whichever vote was counted first gives the answer's form.
      expect(["7", "7.0", "$7$"]).toContain(result.output)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({ accepted: true, earlyStop: true, timedOut: false, votes: [{ key: "7", votes: 4 }] })
      const attempts = result.metadata.attempts as ReadonlyArray<{ attempt: number; status: string }>
      expect(attempts.map((a) => a.status)).toEqual([
        "answered",
        "answered",
        "answered",
        "answered",
        "cancelled",
        "cancelled",
        "cancelled",
        "cancelled"
      ])
      expect(progress(events, "tool_vote.early_stop")[0]!.data).toMatchObject({ key: "7", votes: 4 })
      expect(progress(events, "tool_vote.decided")[0]!.data).toMatchObject({ answer: result.output, key: "7", votes: 4, earlyStop: true, attemptsFinished: 4 })
      expect(progress(events, "tool_vote.attempt_started")).toHaveLength(8)
      expect(progress(events, "tool_vote.python_ran")).toHaveLength(0)
    }).pipe(Effect.provide(sandbox)), 60_000)

  it.live("interrupting the run kills every attempt's program", () =>
    Effect.gen(function*() {
      const mark = marker()
      const agent = yield* agentWith({ attempts: 3 })
      const fiber = yield* Agent.run(agent, "p").pipe(
        Effect.provide(ScriptedModel.layer(() => python(`import time\n# ${mark}\ntime.sleep(60)`))),
        Effect.forkChild
      )
      while (processesWith(mark).length < 3) yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(fiber)
      expect(processesWith(mark)).toEqual([])
    }).pipe(Effect.provide(sandbox)), 30_000)
})

describe("ToolVote protocol and votes", () => {
  it("reads replies by the protocol: FINAL first (last occurrence), then the JSON between the first { and the last }", () => {
    expect(ToolVote.parseTurn("FINAL: 3\nthinking more\nFINAL: 4")).toEqual({ _tag: "Final", answer: "4" })
    expect(ToolVote.parseTurn("final:   \nFINAL: 5")).toEqual({ _tag: "Final", answer: "5" })
    expect(ToolVote.parseTurn(`Let me compute.\n{"tool": "python", "code": "print({1: 2})"}\nthanks`)).toEqual({
      _tag: "Python",
      code: "print({1: 2})"
    })
    expect(ToolVote.parseTurn(`{"tool": "bash", "code": "rm -rf /"}`)).toEqual({
      _tag: "Rejected",
      reason: `the tool "bash" is not available; only "python" is`
    })
    expect(ToolVote.parseTurn(`{"tool": "python", "code": "  "}`)._tag).toBe("Rejected")
    expect(ToolVote.parseTurn(`{"tool": "python", "code": 12}`)._tag).toBe("Rejected")
    expect(ToolVote.parseTurn(`{"tool": python}`)._tag).toBe("Rejected")
    expect(ToolVote.parseTurn("I am not sure yet.")).toEqual({ _tag: "Neither" })
  })

  it("normalizes answers for voting: 42.0, ' 42 ', $42$ and \\boxed{42} are all 42", () => {
    expect(new Set(["42", "42.0", " 42 ", "$42$", "\\boxed{42}", "$\\boxed{42}$"].map(normalizeAnswer))).toEqual(new Set(["42"]))
  })

  it.effect("equal answers in different forms count as one; a bash request is refused without running anything", () =>
    Effect.gen(function*() {
      const commands: Array<ReadonlyArray<string>> = []
      const { result } = yield* streamed(yield* agentWith({ attempts: 4, concurrency: 1, earlyStop: 5 }), "p").pipe(
        Effect.provide(Sandbox.layerTest((call) => {
          commands.push(call.command)
          return {}
        }))
      )
      expect(result.metadata).toMatchObject({ earlyStop: false, votes: [{ key: "42", votes: 4, attempts: [1, 2, 3, 4] }] })
      expect(result.output).toBe("42.0")
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[2]!)).toBe(
        `ERROR: the tool "bash" is not available; only "python" is. To run Python reply with only {"tool": "python", "code": "..."}; to finish reply with FINAL: <answer>.`
      )
      expect(lastUser(calls[3]!)).toBe(`Reply with only {"tool": "python", "code": "..."} to run Python, or with a line FINAL: <answer> to finish.`)
      expect(commands).toEqual([])
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        "FINAL: 42.0",
        `{"tool": "bash", "code": "ls"}`,
        "I think it is forty-two.",
        "FINAL: \\boxed{42}",
        "FINAL:  42 ",
        "FINAL: $42$"
      ]))
    ))

  it.effect("the winner has the most votes; a tie goes to the answer that reached the count first", () =>
    Effect.gen(function*() {
      // One attempt at a time, so the votes arrive in script order: A, B, B, A — B reached 2 votes first.
      const tie = yield* Agent.run(yield* agentWith({ attempts: 4, concurrency: 1, earlyStop: 3 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(["FINAL: A", "FINAL: B", "FINAL: B", "FINAL: A"]))
      )
      expect(tie.output).toBe("B")
      expect(tie.metadata.votes).toEqual([
        { answer: "B", key: "B", votes: 2, attempts: [2, 3] },
        { answer: "A", key: "A", votes: 2, attempts: [1, 4] }
      ])
      const most = yield* Agent.run(yield* agentWith({ attempts: 4, concurrency: 1 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(["FINAL: C", "FINAL: A", "FINAL: A", "FINAL: B"]))
      )
      expect(most.output).toBe("A")
    }).pipe(Effect.provide(Sandbox.layerTest())))

  it.effect("maxConcurrency, the deprecated name of concurrency, still runs the attempts one at a time", () =>
    Effect.gen(function*() {
      // As with concurrency: 1, the votes arrive in script order: A, B, B, A — B reached 2 votes first.
      const tie = yield* Agent.run(yield* agentWith({ attempts: 4, maxConcurrency: 1, earlyStop: 3 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(["FINAL: A", "FINAL: B", "FINAL: B", "FINAL: A"]))
      )
      expect(tie.output).toBe("B")
      expect(tie.metadata.votes).toEqual([
        { answer: "B", key: "B", votes: 2, attempts: [2, 3] },
        { answer: "A", key: "A", votes: 2, attempts: [1, 4] }
      ])
    }).pipe(Effect.provide(Sandbox.layerTest())))

  it("is declared once: its name, no agent options, its deprecated option names", () => {
    expect(ToolVote.definition).toMatchObject({
      name: "tool_vote",
      title: "ToolVote",
      agentOptions: [],
      deprecated: { maxConcurrency: "concurrency" }
    })
    expect(ToolVote.name).toBe("tool_vote")
    expect(Object.keys(ToolVote.definition.options.fields)).toContain("concurrency")
    expect(Object.keys(ToolVote.definition.options.fields)).not.toContain("maxConcurrency")
  })

  it.effect("a custom normalizer decides what counts as the same answer", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({ attempts: 3, concurrency: 1, normalize: (answer) => answer.trim().toLowerCase() })
      const result = yield* Agent.run(agent, "p").pipe(Effect.provide(ScriptedModel.layer(["FINAL: Paris", "FINAL: paris", "FINAL: Rome"])))
      expect(result.output).toBe("Paris")
      expect(result.metadata.votes).toMatchObject([{ key: "paris", votes: 2 }, { key: "rome", votes: 1 }])
    }).pipe(Effect.provide(Sandbox.layerTest())))

  it.effect("timeBudget is a hard deadline: the attempts still running are interrupted, the votes so far decide", () =>
    Effect.gen(function*() {
      const agent = yield* agentWith({ attempts: 3, timeBudget: "1 minute" })
      const fiber = yield* Agent.run(agent, "p").pipe(
        Effect.provide(ScriptedModel.layer(() =>
          Effect.map(attemptOfCall, (attempt): ScriptedModel.Turn => (attempt === 2 ? "FINAL: 9" : { text: "FINAL: 1", delay: "1 hour" }))
        )),
        Effect.forkChild
      )
      yield* adjustWhenSleeping("1 minute")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ output: "9", interrupted: true, interruptionReason: "time_budget" })
      expect(result.metadata).toMatchObject({ timedOut: true, votes: [{ key: "9", votes: 1 }] })
      const attempts = result.metadata.attempts as ReadonlyArray<{ status: string }>
      expect(attempts.map((a) => a.status)).toEqual(["cancelled", "answered", "cancelled"])
    }).pipe(Effect.provide(Sandbox.layerTest())))

  it.effect("attempts that run out of turns have no answer; all failing attempts fail the run", () =>
    Effect.gen(function*() {
      const none = yield* Agent.run(yield* agentWith({ attempts: 2, maxTurns: 2, concurrency: 1 }), "p").pipe(
        Effect.provide(ScriptedModel.layer(["hmm", "still thinking", "FINAL: 3"]))
      )
      // Attempt 1: two turns, no answer; attempt 2 answers on its first turn.
      expect(none.output).toBe("3")
      expect(none.metadata).toMatchObject({
        attempts: [{ status: "no_answer", reason: "max_turns_exceeded", turns: 2 }, { status: "answered", turns: 1 }]
      })
      const failed = yield* Effect.flip(
        Agent.run(yield* agentWith({ attempts: 2 }), "p").pipe(Effect.provide(ScriptedModel.layer([])))
      )
      expect(failed._tag).toBe("SubAgentFailed")
    }).pipe(Effect.provide(Sandbox.layerTest())))

  it.effect("invalid options fail with InvalidOptions, one line naming the field", () =>
    Effect.gen(function*() {
      const bad: ReadonlyArray<readonly [unknown, string]> = [
        [{ attempts: 0 }, "ToolVote: attempts must be an integer >= 1, got 0"],
        [{ pythonTimeout: -1 }, "ToolVote: pythonTimeout must be a positive duration, got -1"],
        [{ timeBudget: 0 }, "ToolVote: timeBudget must be a positive duration, got 0"],
        [{ timeBudget: "soon" }, `ToolVote: timeBudget must be a duration (milliseconds, "5 seconds", a Duration), got "soon"`],
        [{ concurrency: 0 }, "ToolVote: concurrency must be an integer >= 1, got 0"],
        [{ systemPrompt: "{nope}" }, `ToolVote: systemPrompt has unknown placeholder {nope}; this template may use {timeout_seconds}, got "{nope}"`],
        [{ attempt: 3 }, "ToolVote: attempt is not a known option"]
      ]
      for (const [options, message] of bad) {
        const error = yield* Effect.flip(ToolVote.make(options as ToolVote.Options))
        expect(error).toMatchObject({ _tag: "InvalidOptions", module: "ToolVote", message })
      }
    }))

  it.effect("an option given as undefined takes its default; makeUnsafe builds a module-level value or throws", () =>
    Effect.gen(function*() {
      const settings: { attempts?: number | undefined; timeBudget?: number | undefined } = {}
      const architecture = yield* ToolVote.make({ attempts: 1, maxTurns: settings.attempts, timeBudget: settings.timeBudget })
      const result = yield* Agent.run(Agent.make({ name: "voter", instructions: "", architecture }), "p")
      expect(result.output).toBe("5")
      expect(ToolVote.makeUnsafe({ attempts: 2 }).name).toBe("tool_vote")
      expect(() => ToolVote.makeUnsafe({ earlyStop: 0 })).toThrow("ToolVote: earlyStop must be an integer >= 1, got 0")
    }).pipe(Effect.provide(ScriptedModel.layer(["FINAL: 5"])), Effect.provide(Sandbox.layerTest())))
})
