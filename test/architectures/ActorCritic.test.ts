import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import { ActorCritic, Agent, AgentError, AgentEvent, type Architecture, Model, ScriptedModel, Tool } from "../../src/index.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

const critique = (score: number, issues: ReadonlyArray<string> = [], summary = "") =>
  JSON.stringify({ issues, score, summary })

const actor = Agent.make({ name: "actor", instructions: "You write haiku." })
const critic = Agent.make({ name: "critic", instructions: "You judge haiku." })

const team = (architecture: Architecture.Architecture<Model.Model>) =>
  Agent.make({ name: "team", instructions: "", architecture })

describe("ActorCritic", () => {
  it.effect("the critic approves at once: the round-0 answer and one actor call", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic })
      const result = yield* Agent.run(team(architecture), "A haiku about rain.")
      expect(result.output).toBe("soft rain on the roof")
      expect(result.modelCalls).toBe(2)
      expect(result.metadata).toMatchObject({ rounds: 1, approved: true, scores: [0.95], outputs: ["soft rain on the roof"] })
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.messages).toEqual([Model.system("You write haiku."), Model.user("A haiku about rain.")])
      expect(calls[1]!.messages![0]).toEqual(Model.system("You judge haiku."))
      expect(lastUser(calls[1]!)).toContain("Task:\nA haiku about rain.\n\nAnswer:\nsoft rain on the roof")
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["soft rain on the roof", critique(0.95)]))))

  it.effect("scores 0.4 then 0.95: the revised answer; the revision prompt carries the issues and summary", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic })
      const events = yield* Agent.stream(team(architecture), "A haiku about rain.", { sessionId: "ac", textDeltas: false })
        .pipe(Stream.runCollect)
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("rain taps, the roof hums")
      expect(result.modelCalls).toBe(4)
      expect(result.interrupted).toBe(false)
      const progress = events.flatMap((event) => (event._tag === "Progress" ? [event.name] : []))
      expect(progress).toEqual([
        "actor_critic.actor_started",
        "actor_critic.actor_completed",
        "actor_critic.critic_started",
        "actor_critic.critique",
        "actor_critic.actor_started",
        "actor_critic.actor_completed",
        "actor_critic.critic_started",
        "actor_critic.critique",
        "actor_critic.approved"
      ])
      // Child sessions in order: actor_0, critic_1, actor_1, critic_2.
      const children = events.flatMap((event) => (event._tag === "SubRunStarted" ? [event.childSessionId] : []))
      expect(children).toEqual(["ac__actor_0", "ac__critic_1", "ac__actor_1", "ac__critic_2"])
      const calls = yield* ScriptedModel.calls
      const revision = lastUser(calls[2]!)
      expect(revision).toContain("Your answer:\nrain")
      expect(revision).toContain("Issues:\n- too short\n- no season word")
      expect(revision).toContain("Reviewer's summary: Needs more.")
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        "rain",
        critique(0.4, ["too short", "no season word"], "Needs more."),
        "rain taps, the roof hums",
        "```json\n" + critique(0.95) + "\n```"
      ]))
    ))

  it.effect("maxRounds: 2 with scores 0.3 and 0.4: the round-1 answer, not interrupted, max_rounds_reached", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic, maxRounds: 2 })
      const events = yield* Agent.stream(team(architecture), "task", { textDeltas: false }).pipe(
        Stream.runCollect
      )
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("round 1")
      expect(result.interrupted).toBe(false)
      expect(result.modelCalls).toBe(4)
      expect(result.metadata).toMatchObject({ rounds: 2, approved: false, scores: [0.3, 0.4] })
      const last = events.filter((event): event is AgentEvent.Of<"Progress"> => event._tag === "Progress").at(-1)!
      expect(last.name).toBe("actor_critic.max_rounds_reached")
      expect(last.data).toEqual({ rounds: 2, score: 0.4 })
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["round 0", critique(0.3), "round 1", critique(0.4)]))))

  it.effect("approval is at the threshold, inclusive", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic, approvalThreshold: 0.5 })
      const result = yield* Agent.run(team(architecture), "task")
      expect(result.metadata).toMatchObject({ approved: true, scores: [0.5] })
    }).pipe(Effect.provide(ScriptedModel.layer(["answer", "score: 0.5"]))))

  it("parseCritique: JSON, fenced JSON, scores out of range, the score pattern, no number, empty", () => {
    expect(ActorCritic.parseCritique('{"issues": ["a", "b"], "score": 0.7, "summary": "ok"}')).toEqual({
      score: 0.7,
      issues: ["a", "b"],
      summary: "ok",
      parsed: "json"
    })
    expect(ActorCritic.parseCritique('Here you go:\n```json\n{"issues": [], "score": 0.9, "summary": "fine"}\n```')).toEqual({
      score: 0.9,
      issues: [],
      summary: "fine",
      parsed: "json"
    })
    // Out of [0, 1]: never clamped (1.5 would approve anything), a score of 0 and the reason.
    expect(ActorCritic.parseCritique('{"issues": [], "score": 1.5, "summary": ""}'))
      .toMatchObject({ score: 0, parsed: "json", error: "the score 1.5 is outside [0, 1]" })
    expect(ActorCritic.parseCritique('{"issues": [], "score": -2}')).toMatchObject({ score: 0, error: "the score -2 is outside [0, 1]" })
    expect(ActorCritic.parseCritique('{"issues": ["x"]}')).toMatchObject({ score: 0, issues: ["x"], error: "the score is missing" })
    expect(ActorCritic.parseCritique('{"issues": [], "score": "8/10"}')).toMatchObject({ score: 0.8, parsed: "json" })
    // Tolerant of how models write the fields.
    expect(ActorCritic.parseCritique('{"issues": [{"issue": "vague", "severity": "high"}, 3], "score": "0.25", "summary": null}'))
      .toEqual({ score: 0.25, issues: ["vague", "3"], summary: "", parsed: "json" })
    expect(ActorCritic.parseCritique("I find some issues. score: 0.42")).toEqual({
      score: 0.42,
      issues: ["I find some issues. score: 0.42"],
      summary: "I find some issues. score: 0.42",
      parsed: "score_pattern"
    })
    expect(ActorCritic.parseCritique("Score: 12")).toMatchObject({ score: 0, parsed: "none", error: expect.stringContaining("has no scale") })
    expect(ActorCritic.parseCritique("Score: 12 out of 16")).toMatchObject({ score: 0.75, parsed: "score_pattern" })
    expect(ActorCritic.parseCritique("The metaphor is weak.")).toEqual({
      score: 0,
      issues: ["The metaphor is weak."],
      summary: "The metaphor is weak.",
      parsed: "none",
      error: 'no score found in: "The metaphor is weak."'
    })
    expect(ActorCritic.parseCritique("  ")).toEqual({ score: 0, issues: [], summary: "", parsed: "none", error: 'no score found in: ""' })
  })

  it.effect("actor and critic on two different models, each called the right number of times", () =>
    Effect.gen(function*() {
      const actorModel = yield* Layer.build(ScriptedModel.layer(["draft", "better draft"]))
      const criticModel = yield* Layer.build(ScriptedModel.layer([critique(0.2, ["weak"]), critique(0.92)]))
      const architecture = yield* ActorCritic.make({
        actor: Agent.make({ name: "actor", instructions: "", model: Layer.succeedContext(actorModel) }),
        critic: Agent.make({ name: "critic", instructions: "", model: Layer.succeedContext(criticModel) })
      })
      const result = yield* Agent.run(Agent.make({ name: "team", instructions: "", architecture }), "task")
      expect(result.output).toBe("better draft")
      expect(result.modelCalls).toBe(4)
      expect(yield* Context.get(actorModel, ScriptedModel.ScriptedModel).calls).toHaveLength(2)
      expect(yield* Context.get(criticModel, ScriptedModel.ScriptedModel).calls).toHaveLength(2)
      yield* Context.get(actorModel, ScriptedModel.ScriptedModel).assertConsumed
      yield* Context.get(criticModel, ScriptedModel.ScriptedModel).assertConsumed
    }))

  it.effect("a spent budget stops it cleanly: interrupted budget:max_calls with the best answer so far", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic })
      const result = yield* Agent.run(team(architecture), "task", { budget: { maxCalls: 3 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.output).toBe("v2")
      expect(result.modelCalls).toBe(3)
    }).pipe(Effect.provide(ScriptedModel.layer(["v1", critique(0.1), "v2"]))))

  it.effect("a failing critic or actor fails the run with its SubAgentFailed; a spent budget still ends it interrupted", () =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic })
      const criticFails = yield* Effect.flip(Agent.run(team(architecture), "task").pipe(
        Effect.provide(ScriptedModel.layer(["v1", critique(0.1), "v2"]))
      ))
      expect(criticFails).toMatchObject({ _tag: "SubAgentFailed", role: "critic", error: { _tag: "ScriptExhausted" } })
      expect((criticFails as { sessionId: string }).sessionId).toMatch(/__critic_2$/)
      const actorFails = yield* Effect.flip(Agent.run(team(architecture), "task").pipe(
        Effect.provide(ScriptedModel.layer(["v1", critique(0.1)]))
      ))
      expect(actorFails).toMatchObject({ _tag: "SubAgentFailed", role: "actor", error: { _tag: "ScriptExhausted" } })
      // A limit is not a failure: the run keeps its best answer.
      const capped = yield* Agent.run(team(architecture), "task", { budget: { maxCalls: 3 } }).pipe(
        Effect.provide(ScriptedModel.layer(["v1", critique(0.1), "v2", critique(0.2)]))
      )
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "v2" })
    }))

  it.effect("interrupting the run stops the critic in flight at once", () =>
    Effect.gen(function*() {
      const calling = yield* Deferred.make<void>()
      let stopped = false
      const model = ScriptedModel.layer((_request, index) =>
        index === 0
          ? Effect.succeed("answer")
          : Deferred.succeed(calling, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => { stopped = true }))
          )
      )
      const architecture = yield* ActorCritic.make({ actor, critic })
      const fiber = yield* Effect.forkChild(Agent.run(team(architecture), "task").pipe(Effect.provide(model)))
      yield* Deferred.await(calling)
      yield* Fiber.interrupt(fiber)
      const exit = yield* Effect.exit(Fiber.join(fiber))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      expect(stopped).toBe(true)
    }))

  it.effect("invalid options fail with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const rounds = yield* Effect.flip(ActorCritic.make({ actor, critic, maxRounds: 0 }))
      expect(rounds).toBeInstanceOf(AgentError.InvalidOptions)
      expect(rounds.module).toBe("ActorCritic")
      expect(rounds.message).toContain("maxRounds")
      const threshold = yield* Effect.flip(ActorCritic.make({ actor, critic, approvalThreshold: 1.2 }))
      expect(threshold.message).toContain("approvalThreshold")
      const missing = yield* Effect.flip(ActorCritic.make({ actor } as unknown as ActorCritic.Options))
      expect(missing.message).toContain("critic")
      const notAnAgent = yield* Effect.flip(
        ActorCritic.make({ actor, critic: { name: "x" } } as unknown as ActorCritic.Options)
      )
      expect(notAnAgent.message).toBe('ActorCritic: critic must be an agent made with Agent.make, got {"name":"x"}')
      const template = yield* Effect.flip(ActorCritic.make({ actor, critic, actorPrompt: "{issues}" }))
      expect(template.message).toContain("ActorCritic: actorPrompt has unknown placeholder {issues}")
    }))

  // The templates each role got, for a run that revises once: [critic round 1, actor round 1, critic round 2].
  const prompts = (options: Omit<ActorCritic.Options, "actor" | "critic">) =>
    Effect.gen(function*() {
      const architecture = yield* ActorCritic.make({ actor, critic, ...options })
      yield* Agent.run(team(architecture), "A haiku about rain.")
      return (yield* ScriptedModel.calls).slice(1).map(lastUser)
    }).pipe(Effect.provide(ScriptedModel.layer(["rain", critique(0.4, ["short"], "More."), "rain taps", critique(0.95)])))

  it.effect("criticPrompt and actorPrompt are the roles' templates; {task} is the task", () =>
    Effect.gen(function*() {
      const [review, revision, second] = yield* prompts({
        criticPrompt: "Judge {output} for {task}",
        actorPrompt: "Redo {output} for {task}: {issues_bulleted} ({score}, {critique})"
      })
      expect(review).toBe("Judge rain for A haiku about rain.")
      expect(revision).toBe("Redo rain for A haiku about rain.: - short (0.4, More.)")
      expect(second).toBe("Judge rain taps for A haiku about rain.")
      // The defaults name the task {task} too.
      expect(ActorCritic.defaultCriticPrompt).toContain("Task:\n{task}")
      expect(ActorCritic.defaultActorPrompt).toContain("Task:\n{task}")
    }))

  it.effect("critiquePrompt, the deprecated name of criticPrompt, still sets the critic's template", () =>
    Effect.gen(function*() {
      const template = "Judge {output} for {task}"
      expect(yield* prompts({ critiquePrompt: template })).toEqual(yield* prompts({ criticPrompt: template }))
      expect((yield* prompts({ critiquePrompt: template }))[0]).toBe("Judge rain for A haiku about rain.")
    }))

  it.effect("refinePrompt, the deprecated name of actorPrompt, still sets the actor's revision template", () =>
    Effect.gen(function*() {
      const template = "Redo {output}: {issues_bulleted}"
      expect(yield* prompts({ refinePrompt: template })).toEqual(yield* prompts({ actorPrompt: template }))
      expect((yield* prompts({ refinePrompt: template }))[1]).toBe("Redo rain: - short")
    }))

  it.effect("a template with the old {prompt} placeholder still gets the task", () =>
    Effect.gen(function*() {
      const [review, revision] = yield* prompts({ criticPrompt: "Judge {output} for {prompt}", actorPrompt: "Redo {output} for {prompt}" })
      expect(review).toBe("Judge rain for A haiku about rain.")
      expect(revision).toBe("Redo rain for A haiku about rain.")
    }))

  it.effect("a critic that stops at a limit ends the run interrupted critic:round_<r>, with the best answer and the rounds so far", () =>
    Effect.gen(function*() {
      const noop = Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })
      const busyCritic = Agent.make({ name: "critic", instructions: "", tools: [noop], maxTurns: 1 })
      const architecture = yield* ActorCritic.make({ actor, critic: busyCritic })
      const result = yield* Agent.run(team(architecture), "task")
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "critic:round_2:max_turns_exceeded",
        output: "v2",
        metadata: { rounds: 1, approved: false, scores: [0.1], outputs: ["v1", "v2"] }
      })
    }).pipe(Effect.provide(ScriptedModel.layer(["v1", critique(0.1), "v2", { text: "Looking…", toolCalls: [{ name: "noop" }] }]))))
})
