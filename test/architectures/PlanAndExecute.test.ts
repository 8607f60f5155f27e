import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Ref, Result, Schema, Stream } from "effect"
import { Agent, AgentError, AgentEvent, type Architecture, Model, PlanAndExecute, ScriptedModel, Tool } from "../../src/index.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

const agentWith = (architecture: Architecture.Architecture<Model.Model>, tools: ReadonlyArray<Tool.Tool> = []) =>
  Agent.make({ name: "planner-agent", instructions: "You are thorough.", architecture, tools })

const completed = (events: ReadonlyArray<AgentEvent.AgentEvent>) => (events.at(-1) as AgentEvent.Of<"RunCompleted">).result

const progressNames = (events: ReadonlyArray<AgentEvent.AgentEvent>) =>
  events.flatMap((event) => (event._tag === "Progress" && event.sessionId === "pe" ? [event.name] : []))

describe("PlanAndExecute", () => {
  it.effect("a three-step plan: five calls, each step sees the earlier results, the synthesizer's text is the output", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(agentWith(PlanAndExecute.architecture), "Plan a picnic.", {
        sessionId: "pe",
        textDeltas: false
      }).pipe(Stream.runCollect)
      const result = completed(events)
      expect(result.output).toBe("Picnic on Saturday at the lake with sandwiches.")
      expect(result.modelCalls).toBe(5)
      expect(result.interrupted).toBe(false)
      expect(progressNames(events)).toEqual([
        "plan_and_execute.created",
        "plan_and_execute.step_started",
        "plan_and_execute.step_completed",
        "plan_and_execute.step_started",
        "plan_and_execute.step_completed",
        "plan_and_execute.step_started",
        "plan_and_execute.step_completed",
        "plan_and_execute.completed"
      ])
      const created = events.find((event) => event._tag === "Progress" && event.name === "plan_and_execute.created") as AgentEvent.Of<"Progress">
      expect(created.data).toMatchObject({ num_steps: 3, parsed: "json", levels: [["1"], ["2"], ["3"]] })
      const children = events.flatMap((event) => (event._tag === "SubRunStarted" ? [event.childSessionId] : []))
      expect(children).toEqual(["pe__planner", "pe__step_1", "pe__step_2", "pe__step_3", "pe__synthesizer"])

      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[0]!)).toContain("at most 8 steps")
      // The executor is the running agent: its instructions come first.
      expect(calls[1]!.messages![0]).toEqual(Model.system("You are thorough."))
      expect(lastUser(calls[1]!)).toContain("Results you can build on:\n(none yet)")
      expect(lastUser(calls[1]!)).toContain("Do step 1 now: pick a day")
      const third = lastUser(calls[3]!)
      expect(third).toContain("Step 1: pick a day\nSaturday")
      expect(third).toContain("Step 2: pick a place\nthe lake")
      expect(third).toContain("Plan:\n1. pick a day\n2. pick a place\n3. pick food")
      expect(lastUser(calls[4]!)).toContain("Step 3: pick food\nsandwiches")
      expect(result.metadata).toMatchObject({
        replans: 0,
        steps: [
          { k: 1, id: "1", output: "Saturday", failed: false },
          { k: 2, id: "2", output: "the lake", failed: false },
          { k: 3, id: "3", output: "sandwiches", failed: false }
        ]
      })
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        '```json\n["pick a day", "pick a place", {"description": "pick food"}]\n```',
        "Saturday",
        "the lake",
        "sandwiches",
        "Picnic on Saturday at the lake with sandwiches."
      ]))
    ))

  it.effect("an empty plan ends with an output saying the planner produced no steps", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "Do nothing.")
      expect(result.output).toBe(PlanAndExecute.emptyPlanOutput)
      expect(result.output).toContain("produced no steps")
      expect(result.modelCalls).toBe(1)
      expect(result.interrupted).toBe(false)
    }).pipe(Effect.provide(ScriptedModel.layer(["[]"]))))

  it.effect("five steps with maxSteps: 2: four calls", () =>
    Effect.gen(function*() {
      const architecture = yield* PlanAndExecute.make({ maxSteps: 2 })
      const result = yield* Agent.run(agentWith(architecture), "task")
      expect(result.modelCalls).toBe(4)
      expect(result.output).toBe("done: a, b")
      expect(result.metadata).toMatchObject({ plan: [{ id: "1", description: "a" }, { id: "2", description: "b" }] })
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[0]!)).toContain("at most 2 steps")
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(['["a", "b", "c", "d", "e"]', "A", "B", "done: a, b"]))))

  it("parsePlan: JSON strings and objects, fences, a wrapper, lines with bullets and numbering, cuts, ids", () => {
    const steps = (text: string, maxSteps = 8) =>
      Result.getOrThrow(PlanAndExecute.parsePlan(text, maxSteps)).steps.map((step) => step.description)
    expect(steps('["a", "b"]')).toEqual(["a", "b"])
    expect(steps('Plan:\n```json\n[{"description": "a"}, "b", {"description": "  "}]\n```')).toEqual(["a", "b"])
    expect(steps('{"steps": ["x", "y"]}')).toEqual(["x", "y"])
    expect(steps("Here is my plan:\n1. Gather facts\n2) Draft\n- Review")).toEqual(["Gather facts", "Draft", "Review"])
    expect(steps("Gather facts\nDraft\n\nReview")).toEqual(["Gather facts", "Draft", "Review"])
    expect(steps('["a", "b", "c"]', 2)).toEqual(["a", "b"])
    expect(steps("")).toEqual([])
    const lines = Result.getOrThrow(PlanAndExecute.parsePlan("- a\n- b", 8))
    expect(lines.parsed).toBe("lines")
    expect(lines.withDependencies).toBe(false)
    const graph = Result.getOrThrow(
      PlanAndExecute.parsePlan('[{"id": "a", "description": "A"}, {"id": 2, "description": "B", "depends_on": ["a", "zzz"]}]', 8)
    )
    expect(graph.withDependencies).toBe(true)
    expect(graph.steps).toEqual([
      { id: "a", description: "A", dependsOn: [] },
      { id: "2", description: "B", dependsOn: ["a"] }
    ])
    expect(graph.droppedDependencies).toEqual([{ step: "2", dependsOn: "zzz" }])
    const duplicate = PlanAndExecute.parsePlan('[{"id": "a", "description": "A"}, {"id": "a", "description": "B"}]', 8)
    expect(Result.isFailure(duplicate) && duplicate.failure).toBe('the plan has two steps with the id "a"')
    expect(PlanAndExecute.isStepFailure("  step failed: no network")).toBe(true)
    expect(PlanAndExecute.isStepFailure("All good. STEP FAILED: is not at the start")).toBe(false)
  })

  it.effect("a DAG, not levels: a step starts when its own dependencies are done, while a slower unrelated step still runs", () =>
    Effect.gen(function*() {
      const cStarted = yield* Deferred.make<void>()
      const plan = JSON.stringify([
        { id: "a", description: "a slow survey", depends_on: [] },
        { id: "b", description: "a quick lookup", depends_on: [] },
        { id: "c", description: "use the lookup", depends_on: ["b"] }
      ])
      const model = ScriptedModel.layer((request) => {
        const prompt = lastUser(request)
        if (prompt.startsWith("Break the task")) return Effect.succeed(plan)
        // `a` finishes only once `c` has started: with level barriers `c` would wait for `a`, and this would hang.
        if (prompt.includes("Do step a now")) return Effect.as(Deferred.await(cStarted), "survey done")
        if (prompt.includes("Do step b now")) return Effect.succeed("lookup done")
        if (prompt.includes("Do step c now")) return Effect.as(Deferred.succeed(cStarted, undefined), "used the lookup")
        return Effect.succeed("All done.")
      })
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "Do it.", { sessionId: "dag" }).pipe(Effect.provide(model))
      expect(result.output).toBe("All done.")
      // Results in plan order, whatever order they finished in.
      expect((result.metadata as { steps: ReadonlyArray<{ id: string }> }).steps.map((step) => step.id)).toEqual(["a", "b", "c"])
    }))

  it.effect("independent steps run concurrently (a two-party barrier), the dependent one after both with both results", () =>
    Effect.gen(function*() {
      const arrived = yield* Ref.make(0)
      const bothStarted = yield* Deferred.make<void>()
      const plan = JSON.stringify([
        { id: "a", description: "research apples", depends_on: [] },
        { id: "b", description: "research pears", depends_on: [] },
        { id: "c", description: "compare them", depends_on: ["a", "b"] }
      ])
      const model = ScriptedModel.layer((request) => {
        const prompt = lastUser(request)
        if (prompt.startsWith("Break the task")) return Effect.succeed(plan)
        if (prompt.includes("Do step a now") || prompt.includes("Do step b now")) {
          // Each waits until both have started: run one after the other, the first would wait forever.
          return Effect.gen(function*() {
            if ((yield* Ref.updateAndGet(arrived, (n) => n + 1)) === 2) yield* Deferred.succeed(bothStarted, undefined)
            yield* Deferred.await(bothStarted)
            return prompt.includes("Do step a now") ? "apples are crisp" : "pears are soft"
          })
        }
        if (prompt.includes("Do step c now")) return Effect.succeed("crisp beats soft")
        return Effect.succeed("Apples, because they are crisp.")
      })
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "Apples or pears?", { sessionId: "pe" }).pipe(
        Effect.provide(model)
      )
      expect(result.output).toBe("Apples, because they are crisp.")
      expect(result.modelCalls).toBe(5)
      expect(result.metadata).toMatchObject({
        steps: [
          { k: 1, id: "a", output: "apples are crisp" },
          { k: 2, id: "b", output: "pears are soft" },
          { k: 3, id: "c", output: "crisp beats soft" }
        ]
      })
    }))

  it.effect("a dependent step sees the results it builds on, directly or not, and nothing else", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "task")
      expect(result.output).toBe("final")
      const calls = yield* ScriptedModel.calls
      const stepD = lastUser(calls.find((call) => lastUser(call).includes("Do step d now"))!)
      expect(stepD).toContain("Step a: A\nresult a")
      expect(stepD).toContain("Step c: C\nresult c")
      expect(stepD).not.toContain("result b")
    }).pipe(
      Effect.provide(ScriptedModel.layer((request) => {
        const prompt = lastUser(request)
        if (prompt.startsWith("Break the task")) {
          return JSON.stringify([
            { id: "a", description: "A" },
            { id: "b", description: "B", depends_on: [] },
            { id: "c", description: "C", depends_on: ["a"] },
            { id: "d", description: "D", depends_on: ["c"] }
          ])
        }
        const step = /Do step (\w) now/.exec(prompt)
        return step !== null ? `result ${step[1]}` : "final"
      }))
    ))

  it.effect("a dependency cycle fails the run with ArchitectureFailed naming the cycle, before any step runs", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(agentWith(PlanAndExecute.architecture), "task"))
      expect(error).toBeInstanceOf(AgentError.ArchitectureFailed)
      expect(error.message).toBe("the plan has a dependency cycle: x → z → y → x (each step depends on the next)")
      expect(yield* ScriptedModel.calls).toHaveLength(1)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        JSON.stringify([
          { id: "w", description: "W" },
          { id: "x", description: "X", depends_on: ["z", "w"] },
          { id: "y", description: "Y", depends_on: ["x"] },
          { id: "z", description: "Z", depends_on: ["y"] }
        ])
      ]))
    ))

  it.effect("a step marked STEP FAILED with maxReplans: 1: one new plan for the remaining work, then the answer", () =>
    Effect.gen(function*() {
      const architecture = yield* PlanAndExecute.make({ maxReplans: 1 })
      const events = yield* Agent.stream(agentWith(architecture), "Report on sales.", { sessionId: "pe", textDeltas: false })
        .pipe(Stream.runCollect)
      const result = completed(events)
      expect(result.output).toBe("Sales grew 5% (from the cached copy).")
      expect(result.modelCalls).toBe(7)
      expect(progressNames(events)).toContain("plan_and_execute.replanned")
      const children = events.flatMap((event) => (event._tag === "SubRunStarted" ? [event.childSessionId] : []))
      expect(children).toEqual([
        "pe__planner",
        "pe__step_1",
        "pe__step_2",
        "pe__replanner_1",
        // Step 3 of the first plan never started (the replan replaced it): its number stays unused.
        "pe__step_4",
        "pe__step_5",
        "pe__synthesizer"
      ])
      const calls = yield* ScriptedModel.calls
      const replan = lastUser(calls[3]!)
      expect(replan).toContain("Done:\nStep 1: open the report\nopened")
      expect(replan).toContain("Failed:\nStep 2 (failed): fetch the data\nSTEP FAILED: the server is down")
      // A step of the new plan sees what the first plan got done.
      expect(lastUser(calls[4]!)).toContain("Step 1: open the report\nopened")
      expect(lastUser(calls[4]!)).toContain("Plan:\n1. load the cached copy\n2. summarise")
      expect(result.metadata).toMatchObject({
        replans: 1,
        plans: [
          [{ description: "open the report" }, { description: "fetch the data" }, { description: "summarise" }],
          [{ description: "load the cached copy" }, { description: "summarise" }]
        ],
        plan: [{ description: "load the cached copy" }, { description: "summarise" }]
      })
      const steps = (result.metadata as { steps: ReadonlyArray<PlanAndExecute.StepResult> }).steps
      expect(steps.map((step) => [step.k, step.plan, step.failed])).toEqual([[1, 0, false], [2, 0, true], [4, 1, false], [5, 1, false]])
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        '["open the report", "fetch the data", "summarise"]',
        "opened",
        "STEP FAILED: the server is down",
        '["load the cached copy", "summarise"]',
        "loaded",
        "sales grew 5%",
        "Sales grew 5% (from the cached copy)."
      ]))
    ))

  it.effect("without replans a failed step is passed along and the plan goes on", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "task")
      expect(result.output).toBe("partial answer")
      expect(result.modelCalls).toBe(4)
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[2]!)).toContain("Step 1 (failed): a\nSTEP FAILED: no access")
      expect(result.metadata).toMatchObject({ replans: 0, steps: [{ failed: true }, { failed: false }] })
    }).pipe(Effect.provide(ScriptedModel.layer(['["a", "b"]', "STEP FAILED: no access", "b done", "partial answer"]))))

  it.effect("the default executor uses the running agent's tools", () =>
    Effect.gen(function*() {
      const weather = Tool.make({
        name: "weather",
        description: "The forecast for a day",
        parameters: Schema.Struct({ day: Schema.String }),
        handler: ({ day }) => Effect.succeed(`${day}: sunny`)
      })
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture, [weather]), "Picnic?")
      expect(result.output).toBe("Go on Saturday.")
      expect(result.modelCalls).toBe(4)
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.tools).toBeUndefined()
      expect(calls[1]!.tools?.map((tool) => tool.name)).toEqual(["weather"])
      expect(calls[2]!.messages!.at(-1)).toMatchObject({ role: "tool", content: "saturday: sunny" })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        '["check the forecast"]',
        { toolCalls: [{ name: "weather", arguments: { day: "saturday" } }] },
        "Saturday is sunny.",
        "Go on Saturday."
      ]))
    ))

  it.effect("a spent budget stops it cleanly: interrupted budget:max_calls, the results so far as the output", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "task", { budget: { maxCalls: 3 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.modelCalls).toBe(3)
      expect(result.output).toBe("Step 1: a\nA done\n\nStep 2: b\nB done")
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(['["a", "b", "c"]', "A done", "B done"]))))

  it.effect("a failing executor fails the run with the step's SubAgentFailed (one rule for every architecture)", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(agentWith(PlanAndExecute.architecture), "task"))
      expect(error).toMatchObject({ _tag: "SubAgentFailed", role: "step", error: { _tag: "ScriptExhausted" } })
      expect((error as { sessionId: string }).sessionId).toMatch(/__step_2$/)
    }).pipe(Effect.provide(ScriptedModel.layer(['["a", "b"]', "A done"]))))

  it.effect("interrupting the run stops every step of a parallel level at once", () =>
    Effect.gen(function*() {
      const waiting = yield* Ref.make(0)
      const bothWaiting = yield* Deferred.make<void>()
      const stopped = yield* Ref.make(0)
      const model = ScriptedModel.layer((request) =>
        lastUser(request).startsWith("Break the task")
          ? Effect.succeed('[{"id": "a", "description": "A", "depends_on": []}, {"id": "b", "description": "B", "depends_on": []}]')
          : Effect.gen(function*() {
            if ((yield* Ref.updateAndGet(waiting, (n) => n + 1)) === 2) yield* Deferred.succeed(bothWaiting, undefined)
            return yield* Effect.never
          }).pipe(Effect.onInterrupt(() => Ref.update(stopped, (n) => n + 1)))
      )
      const fiber = yield* Effect.forkChild(Agent.run(agentWith(PlanAndExecute.architecture), "task").pipe(Effect.provide(model)))
      yield* Deferred.await(bothWaiting)
      yield* Fiber.interrupt(fiber)
      const exit = yield* Effect.exit(Fiber.join(fiber))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      expect(yield* Ref.get(stopped)).toBe(2)
    }))

  it.effect("concurrency bounds the steps in flight (default 4); maxConcurrency, its deprecated name, does the same", () =>
    Effect.gen(function*() {
      // Three independent steps whose executor calls yield a few times while they count themselves in flight.
      const mostInFlight = (options: Pick<PlanAndExecute.Options, "concurrency" | "maxConcurrency">) =>
        Effect.gen(function*() {
          let inFlight = 0
          let most = 0
          const model = ScriptedModel.layer((request) => {
            const prompt = lastUser(request)
            if (prompt.startsWith("Break the task")) {
              return Effect.succeed(JSON.stringify(["a", "b", "c"].map((id) => ({ id, description: id, depends_on: [] }))))
            }
            if (!prompt.includes("Do step")) return Effect.succeed("all done")
            return Effect.gen(function*() {
              most = Math.max(most, ++inFlight)
              for (let i = 0; i < 5; i++) yield* Effect.yieldNow
              inFlight--
              return "done"
            })
          })
          const result = yield* Agent.run(agentWith(yield* PlanAndExecute.make(options)), "task").pipe(Effect.provide(model))
          expect(result.output).toBe("all done")
          return most
        })
      expect(yield* mostInFlight({})).toBe(3)
      expect(yield* mostInFlight({ concurrency: 2 })).toBe(2)
      expect(yield* mostInFlight({ maxConcurrency: 2 })).toBe(2)
      expect(yield* mostInFlight({ concurrency: 1 })).toBe(1)
      expect(yield* mostInFlight({ concurrency: "unbounded" })).toBe(3)
    }))

  it.effect("templates use {task}; {prompt}, the old placeholder, is still filled with the task", () =>
    Effect.gen(function*() {
      for (const plannerPrompt of ["Plan {task} in {max_steps} steps.", "Plan {prompt} in {max_steps} steps."]) {
        yield* Effect.gen(function*() {
          const architecture = yield* PlanAndExecute.make({ plannerPrompt, synthesizerPrompt: "Answer {task} from:\n{results}" })
          const result = yield* Agent.run(agentWith(architecture), "a picnic")
          expect(result.output).toBe("Saturday it is.")
          const calls = yield* ScriptedModel.calls
          expect(lastUser(calls[0]!)).toBe("Plan a picnic in 8 steps.")
          expect(lastUser(calls[2]!)).toBe("Answer a picnic from:\nStep 1: pick a day\nSaturday")
        }).pipe(Effect.provide(ScriptedModel.layer(['["pick a day"]', "Saturday", "Saturday it is."])))
      }
    }))

  it.effect("a planner, replanner or synthesizer stopped at its turn limit ends the run under its own label", () =>
    Effect.gen(function*() {
      const lookup = Tool.make({ name: "lookup", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("x") })
      const stuck = (replies: ScriptedModel.Script) =>
        Agent.make({ name: "role", instructions: "", tools: [lookup], maxTurns: 1, model: Layer.orDie(ScriptedModel.layer(replies)) })
      const asksTool = (text: string) => ({ text, toolCalls: [{ name: "lookup", arguments: {} }] })

      const planner = yield* Agent.run(agentWith(yield* PlanAndExecute.make({ planner: stuck([asksTool("Thinking")]) })), "task")
      expect(planner).toMatchObject({ interrupted: true, interruptionReason: "planner:max_turns_exceeded", output: "Thinking" })
      expect(planner.metadata).toMatchObject({ plans: [], steps: [], replans: 0 })

      const replanner = yield* Agent.run(
        agentWith(yield* PlanAndExecute.make({ maxReplans: 1, planner: stuck(['["a", "b"]', asksTool("Replanning")]) })),
        "task"
      )
      expect(replanner).toMatchObject({
        interrupted: true,
        interruptionReason: "replanner:1:max_turns_exceeded",
        output: "Step 1 (failed): a\nSTEP FAILED: no access"
      })
      expect(replanner.metadata).toMatchObject({ replans: 1, steps: [{ k: 1, failed: true }] })

      // The synthesizer writes the answer: stopped, its partial answer is the run's.
      const synthesizer = yield* Agent.run(
        agentWith(yield* PlanAndExecute.make({ synthesizer: stuck([asksTool("Saturday, probably")]) })),
        "task"
      )
      expect(synthesizer).toMatchObject({ interrupted: true, interruptionReason: "synthesizer:max_turns_exceeded", output: "Saturday, probably" })
      expect(synthesizer.metadata).toMatchObject({ steps: [{ output: "A done" }] })
    }).pipe(Effect.provide(ScriptedModel.layer((request) => {
      const prompt = lastUser(request)
      if (prompt.startsWith("Break the task")) return '["a"]'
      return prompt.includes("Do step 1 now: a") && prompt.includes("Plan:\n1. a\n2. b") ? "STEP FAILED: no access" : "A done"
    }))))

  it.effect("a budget spent before the synthesizer answers: the steps' results are the output, not its empty answer", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agentWith(PlanAndExecute.architecture), "task", { budget: { maxCalls: 3 } })
      expect(result).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", modelCalls: 3 })
      expect(result.output).toBe("Step 1: a\nA done\n\nStep 2: b\nB done")
      expect(result.metadata).toMatchObject({ replans: 0, steps: [{ k: 1, output: "A done" }, { k: 2, output: "B done" }] })
    }).pipe(Effect.provide(ScriptedModel.layer(['["a", "b"]', "A done", "B done"]))))

  it.effect("invalid options fail with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const steps = yield* Effect.flip(PlanAndExecute.make({ maxSteps: 0 }))
      expect(steps).toBeInstanceOf(AgentError.InvalidOptions)
      expect(steps.module).toBe("PlanAndExecute")
      expect(steps.message).toContain("maxSteps")
      expect((yield* Effect.flip(PlanAndExecute.make({ maxReplans: -1 }))).message).toContain("maxReplans")
      expect((yield* Effect.flip(PlanAndExecute.make({ concurrency: 1.5 }))).message).toContain("concurrency")
      expect((yield* Effect.flip(PlanAndExecute.make({ executorPrompt: "{steps}" }))).message).toContain("unknown placeholder {steps}")
    }))
})
