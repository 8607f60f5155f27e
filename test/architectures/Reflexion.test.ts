import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import {
  Agent,
  AgentError,
  AgentEvent,
  type Architecture,
  LessonStore,
  Model,
  ReAct,
  Reflexion,
  ScriptedModel,
  Tool
} from "../../src/index.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

const solver = (architecture: Architecture.Architecture<Model.Model>) =>
  Agent.make({ name: "solver", instructions: "Solve the puzzle.", architecture })

const task = "What has keys but opens no locks?"
const lesson = "Think about objects whose parts are named keys, not about locks."

describe("Reflexion", () => {
  it.effect("success on attempt 2: the lesson is in attempt 2's prompt and not in attempt 1's; five calls", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(solver(Reflexion.architecture), task, { sessionId: "rx", textDeltas: false }).pipe(
        Stream.runCollect
      )
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("A piano.")
      expect(result.modelCalls).toBe(5)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({
        bestAttempt: 2,
        bestScore: 0.9,
        thresholdMet: true,
        lessons: [lesson],
        lessonKey: Reflexion.lessonKeyFor("solver", task),
        attempts: [
          { attempt: 1, output: "A door.", score: 0.2, lesson },
          { attempt: 2, output: "A piano.", score: 0.9 }
        ]
      })
      const progress = events.flatMap((event) => (event._tag === "Progress" ? [[event.name, event.data] as const] : []))
      expect(progress).toEqual([
        ["reflexion.attempt_started", { attempt: 1, lessons: 0 }],
        ["reflexion.evaluated", { attempt: 1, score: 0.2, evaluation: "score: 0.2\nA door has a lock." }],
        ["reflexion.lesson_produced", { attempt: 1, lesson }],
        ["reflexion.attempt_started", { attempt: 2, lessons: 1 }],
        ["reflexion.evaluated", { attempt: 2, score: 0.9, evaluation: "Score=0.9, correct." }],
        ["reflexion.threshold_met", { attempt: 2, score: 0.9 }]
      ])
      const children = events.flatMap((event) => (event._tag === "SubRunStarted" ? [event.childSessionId] : []))
      expect(children).toEqual(["rx__attempt_1", "rx__evaluator_1", "rx__reflector_1", "rx__attempt_2", "rx__evaluator_2"])

      const calls = yield* ScriptedModel.calls
      // Attempt 1: the task alone. Attempt 2: a fresh context (no trace of attempt 1) with the lesson.
      expect(calls[0]!.messages).toEqual([Model.system("Solve the puzzle."), Model.user(task)])
      expect(calls[0]!.messages!.some((message) => Model.textOf(message.content).includes(lesson))).toBe(false)
      expect(calls[3]!.messages).toEqual([
        Model.system("Solve the puzzle."),
        Model.user(`${task}\n\nLessons from earlier attempts at this task:\n- ${lesson}`)
      ])
      expect(lastUser(calls[1]!)).toContain("Answer:\nA door.")
      expect(lastUser(calls[2]!)).toContain("Evaluation (score 0.2):\nscore: 0.2\nA door has a lock.")
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        "A door.",
        "score: 0.2\nA door has a lock.",
        `Lesson: ${lesson}`,
        "A piano.",
        "Score=0.9, correct."
      ]))
    ))

  it.effect("no attempt reaches the threshold in maxRounds: the best-scored attempt, max_attempts_reached, no lesson after the last", () =>
    Effect.gen(function*() {
      const architecture = yield* Reflexion.make({ maxRounds: 2 })
      const events = yield* Agent.stream(solver(architecture), task, { textDeltas: false }).pipe(
        Stream.runCollect
      )
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("A keyboard?")
      expect(result.modelCalls).toBe(5)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({ bestAttempt: 1, bestScore: 0.6, thresholdMet: false })
      const last = events.filter((event): event is AgentEvent.Of<"Progress"> => event._tag === "Progress").at(-1)!
      expect(last.name).toBe("reflexion.max_attempts_reached")
      expect(last.data).toEqual({ attempts: 2, best_attempt: 1, best_score: 0.6 })
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer(["A keyboard?", "score: 0.6", "Be more confident.", "A map.", "score: 0.3"]))
    ))

  it("parseEvaluation: labelled scores, scales, prose with a decimal; out of range or none → 0 with the reason", () => {
    expect(Reflexion.parseEvaluation("score: 0.9\nGood.")).toEqual({ score: 0.9 })
    expect(Reflexion.parseEvaluation("Score=0.4")).toEqual({ score: 0.4 })
    expect(Reflexion.parseEvaluation("I'd put this at 0.65 overall.")).toEqual({ score: 0.65 })
    expect(Reflexion.parseEvaluation("score: 8/10")).toEqual({ score: 0.8 })
    expect(Reflexion.parseEvaluation("Score: 7 out of 10")).toEqual({ score: 0.7 })
    expect(Reflexion.parseEvaluation("score: 1.7")).toEqual({
      score: 0,
      error: "the score 1.7 is outside [0, 1] and has no scale (write it as 0.7, 7/10 or 70%)"
    })
    expect(Reflexion.parseEvaluation("It has 3 problems.")).toEqual({ score: 0, error: 'no score found in: "It has 3 problems."' })
    expect(Reflexion.parseEvaluation("")).toEqual({ score: 0, error: 'no score found in: ""' })
  })

  it("parseLesson: the first line, without a label or quotes, cut to 500 characters", () => {
    expect(Reflexion.parseLesson("\n  Lesson: Check units.\nMore text.")).toBe("Check units.")
    expect(Reflexion.parseLesson("**Lesson 1:** \"Read the question twice.\"")).toBe("Read the question twice.")
    expect(Reflexion.parseLesson(" \n ")).toBeUndefined()
    expect(Reflexion.parseLesson("x".repeat(600))).toHaveLength(500)
    // A label followed by a long run of blanks is read in one pass (it was quadratic).
    expect(Reflexion.parseLesson(`lesson${" ".repeat(30_000)}x`)).toBe(`lesson${" ".repeat(493)}…`)
    expect(Reflexion.parseLesson(`Lesson 3 :${" ".repeat(30_000)}Check units.`)).toBe("Check units.")
  })

  it.effect("with a SQL LessonStore, a later run of the same task starts with the earlier run's lessons", () =>
    Effect.gen(function*() {
      const architecture = yield* Reflexion.make({ maxRounds: 2 })
      const first = yield* Agent.run(solver(architecture), task).pipe(
        Effect.provide(ScriptedModel.layer(["A lock.", "score: 0.1", "Locks are a red herring.", "A door.", "score: 0.2"]))
      )
      expect(first.metadata).toMatchObject({ lessons: ["Locks are a red herring."], thresholdMet: false })
      const second = yield* Effect.gen(function*() {
        const result = yield* Agent.run(solver(architecture), task)
        const calls = yield* ScriptedModel.calls
        expect(lastUser(calls[0]!)).toBe(`${task}\n\nLessons from earlier attempts at this task:\n- Locks are a red herring.`)
        return result
      }).pipe(Effect.provide(ScriptedModel.layer(["A piano.", "score: 0.95"])))
      expect(second.output).toBe("A piano.")
      // Another task has its own lessons.
      expect(yield* LessonStore.list(Reflexion.lessonKeyFor("solver", "another task"))).toEqual([])
      expect((yield* LessonStore.list(Reflexion.lessonKeyFor("solver", task))).map((l) => l.lesson)).toEqual([
        "Locks are a red herring."
      ])
    }).pipe(Effect.provide(LessonStore.layerSqlite({ filename: ":memory:" })), Effect.orDie))

  it.effect("a spent budget stops it cleanly: interrupted budget:max_calls with the best attempt so far", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(solver(Reflexion.architecture), task, { budget: { maxCalls: 2 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.output).toBe("A door.")
      expect(result.modelCalls).toBe(2)
    }).pipe(Effect.provide(ScriptedModel.layer(["A door.", "score: 0.2"]))))

  it.effect("a failing evaluator fails the run with its SubAgentFailed; so does a failing store", () =>
    Effect.gen(function*() {
      const evaluatorFails = yield* Effect.flip(Agent.run(solver(Reflexion.architecture), task).pipe(
        Effect.provide(ScriptedModel.layer(["A door."]))
      ))
      expect(evaluatorFails).toMatchObject({ _tag: "SubAgentFailed", role: "evaluator", error: { _tag: "ScriptExhausted" } })

      const broken = Layer.succeed(LessonStore.LessonStore, {
        list: () => Effect.succeed([]),
        add: () => Effect.fail(new LessonStore.LessonStoreError({ operation: "add", message: "disk full" }))
      })
      const error = yield* Effect.flip(
        Agent.run(solver(Reflexion.architecture), task).pipe(
          Effect.provide(ScriptedModel.layer(["A door.", "score: 0", "Try again."])),
          Effect.provide(broken)
        )
      )
      expect(error).toBeInstanceOf(AgentError.ArchitectureFailed)
      expect(error.message).toBe("the lesson store failed to add: disk full")
    }))

  it.effect("an attempt that stops early is evaluated like any other and learned from", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const agent = Agent.make({
        name: "solver",
        instructions: "",
        tools: [noop],
        architecture: yield* Reflexion.make({ base: yield* ReAct.make({ maxTurns: 1 }), maxRounds: 2 })
      })
      const result = yield* Agent.run(agent, task)
      expect(result.output).toBe("A piano.")
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({
        attempts: [
          { attempt: 1, output: "Thinking…", interrupted: "max_turns_exceeded", score: 0, lesson: "Answer, do not think aloud." },
          { attempt: 2, output: "A piano.", score: 0.9 }
        ]
      })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { text: "Thinking…", toolCalls: [{ name: "noop" }] },
        "score: 0",
        "Answer, do not think aloud.",
        "A piano.",
        "score: 0.9"
      ]))
    ))

  it.effect("interrupting the run stops the evaluator in flight at once", () =>
    Effect.gen(function*() {
      const calling = yield* Deferred.make<void>()
      let stopped = false
      const model = ScriptedModel.layer((_request, index) =>
        index === 0
          ? Effect.succeed("A door.")
          : Deferred.succeed(calling, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => { stopped = true }))
          )
      )
      const fiber = yield* Effect.forkChild(Agent.run(solver(Reflexion.architecture), task).pipe(Effect.provide(model)))
      yield* Deferred.await(calling)
      yield* Fiber.interrupt(fiber)
      expect(Exit.hasInterrupts(yield* Effect.exit(Fiber.join(fiber)))).toBe(true)
      expect(stopped).toBe(true)
    }))

  it.effect("invalid options fail with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const rounds = yield* Effect.flip(Reflexion.make({ maxRounds: 0 }))
      expect(rounds).toBeInstanceOf(AgentError.InvalidOptions)
      expect(rounds.module).toBe("Reflexion")
      expect(rounds.message).toContain("maxRounds")
      expect((yield* Effect.flip(Reflexion.make({ threshold: 1.5 }))).message).toContain("threshold")
      expect((yield* Effect.flip(Reflexion.make({ threshold: -0.1 }))).message).toContain("threshold")
      expect((yield* Effect.flip(Reflexion.make({ attemptPrompt: "{task} {lesson}" }))).message).toContain(
        "unknown placeholder {lesson}"
      )
    }))

  // Two rounds that never meet the threshold: attempt, evaluation, lesson, attempt, evaluation.
  const twoRounds = ["A door.", "score: 0.2", "Think of pianos.", "A lock.", "score: 0.1"]

  it.effect("maxAttempts, the deprecated name of maxRounds, still limits the rounds", () =>
    Effect.gen(function*() {
      const run = (architecture: Architecture.Architecture<Model.Model>) =>
        Agent.run(solver(architecture), task).pipe(Effect.provide(ScriptedModel.layer(twoRounds)))
      const old = yield* run(yield* Reflexion.make({ maxAttempts: 2 }))
      const current = yield* run(yield* Reflexion.make({ maxRounds: 2 }))
      expect(old).toMatchObject({ output: "A door.", modelCalls: 5, interrupted: false, metadata: { thresholdMet: false, bestAttempt: 1 } })
      expect(old.metadata).toEqual(current.metadata)
      // Both names given: the current one wins.
      expect((yield* run(yield* Reflexion.make({ maxAttempts: 1, maxRounds: 2 }))).modelCalls).toBe(5)
    }))

  it.effect("{task} names the task in every template; the old {prompt} still gets it", () =>
    Effect.gen(function*() {
      const prompts = (options: Pick<Reflexion.Options, "evaluatorPrompt" | "reflectorPrompt" | "attemptPrompt">) =>
        Effect.gen(function*() {
          yield* Agent.run(solver(yield* Reflexion.make({ maxRounds: 2, ...options })), task)
          return (yield* ScriptedModel.calls).map(lastUser)
        }).pipe(Effect.provide(ScriptedModel.layer(twoRounds)))
      const current = yield* prompts({
        evaluatorPrompt: "Grade {output} for {task}",
        reflectorPrompt: "Lesson for {task} from {output} ({score})",
        attemptPrompt: "{task} / {lessons}"
      })
      expect(current.slice(1)).toEqual([
        `Grade A door. for ${task}`,
        `Lesson for ${task} from A door. (0.2)`,
        `${task} / - Think of pianos.`,
        `Grade A lock. for ${task}`
      ])
      const old = yield* prompts({
        evaluatorPrompt: "Grade {output} for {prompt}",
        reflectorPrompt: "Lesson for {prompt} from {output} ({score})",
        attemptPrompt: "{prompt} / {lessons}"
      })
      expect(old).toEqual(current)
      expect(Reflexion.defaultEvaluatorPrompt).toContain("Task:\n{task}")
      expect(Reflexion.defaultAttemptPrompt.startsWith("{task}\n")).toBe(true)
    }))

  it.effect("an evaluator that stops at a limit ends the run evaluator:attempt_<n>, answering the first attempt when none is scored", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const evaluator = Agent.make({ name: "evaluator", instructions: "", tools: [noop], maxTurns: 1 })
      const result = yield* Agent.run(solver(yield* Reflexion.make({ evaluator })), task)
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "evaluator:attempt_1:max_turns_exceeded",
        // The attempt, not the evaluator's unfinished text.
        output: "A door.",
        metadata: { attempts: [], thresholdMet: false, lessonKey: Reflexion.lessonKeyFor("solver", task) }
      })
    }).pipe(Effect.provide(ScriptedModel.layer(["A door.", { text: "Let me check…", toolCalls: [{ name: "noop" }] }]))))

  it.effect("a reflector that stops at a limit ends the run reflector:attempt_<n> with the best attempt so far", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const reflector = Agent.make({ name: "reflector", instructions: "", tools: [noop], maxTurns: 1 })
      const result = yield* Agent.run(solver(yield* Reflexion.make({ reflector })), task)
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "reflector:attempt_1:max_turns_exceeded",
        output: "A door.",
        metadata: { attempts: [{ attempt: 1, output: "A door.", score: 0.2 }], bestAttempt: 1, bestScore: 0.2 }
      })
    }).pipe(Effect.provide(ScriptedModel.layer(["A door.", "score: 0.2", { text: "Hmm…", toolCalls: [{ name: "noop" }] }]))))
})
