/**
 * A new architecture written with valet's public names only: "Best-of-N with a verifier". N drafters answer the task
 * concurrently, a verifier scores each draft, and the best one is the answer; when no draft reaches `acceptScore`, one
 * more round of drafts sees the verifier's notes. One declaration — `Architecture.define` — gives `make` /
 * `makeUnsafe` with checked options, deprecated option names, and what registries read; the runtime ends the run when a
 * role stops at a limit (a budget, a turn limit), so the program does not repeat that rule.
 * Run alone: `npx tsx examples/custom-architecture.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, Architecture } from "../src/index.js"
import { demoModel } from "./support/model.js"

const { agent, int, optional, template, unit, withDefault, concurrency } = Architecture.option

/** The verifier's reply: a score and what is wrong. */
const Verdict = Schema.Struct({ score: Schema.Number, notes: Schema.String })

/** Best-of-N with a verifier, declared once. */
export const BestOfN = Architecture.define({
  name: "best_of_n",
  title: "BestOfN",
  description: "N drafts at once, a verifier scores each, the best one answers",
  options: {
    /** Drafts per round (≥ 1, default 3). */
    n: int(1).pipe(withDefault(3)),
    /** Rounds at most (≥ 1, default 2). */
    maxRounds: int(1).pipe(withDefault(2)),
    /** A draft scored at least this is accepted (in [0, 1], default 0.8). */
    acceptScore: unit.pipe(withDefault(0.8)),
    /** Drafts and verifications at once (default "unbounded"). */
    concurrency: concurrency.pipe(withDefault("unbounded")),
    /** Scores each draft; default: a plain agent on the run's model. */
    verifier: optional(agent),
    /** The verifier's prompt (`{task}`, `{draft}`). */
    verifierPrompt: template(["task", "draft"]).pipe(withDefault(
      "Score this answer to the task from 0 to 1 and say what is wrong. Reply as JSON {\"score\": …, \"notes\": \"…\"}.\n\nTask: {task}\n\nAnswer: {draft}"
    ))
  },
  agentOptions: ["verifier"],
  // valet 0.x called it `drafts`: still read, said once.
  deprecated: { drafts: "n" },
  program: (input, options) =>
    Effect.gen(function*() {
      const verifier = options.verifier ?? Architecture.plainAgent("verifier")
      let best = { draft: "", score: -1, notes: "" }
      let task = input.prompt
      for (let round = 1; round <= options.maxRounds; round++) {
        yield* Architecture.progress("best_of_n.round_started", { round })
        // Each draft is the running agent itself (its instructions, tools and model) as a role of its own.
        const drafter = Architecture.withArchitecture(input.agent, Architecture.make({
          name: "draft",
          program: (draftInput) =>
            Effect.map(Architecture.generate({ messages: Architecture.conversation(draftInput) }), (response) => ({ output: response.choices[0]?.text ?? "" }))
        }))
        const scored = yield* Effect.forEach(
          Array.from({ length: options.n }, (_, i) => i + 1),
          (i) =>
            Effect.gen(function*() {
              const draft = yield* Architecture.role(drafter, task, { role: "drafter", index: `${round}_${i}` })
              const check = yield* Architecture.role(verifier, Architecture.fill(options.verifierPrompt, { task: input.prompt, draft: draft.output }), {
                role: "verifier",
                index: `${round}_${i}`
              })
              const verdict = Architecture.parse.json(Verdict, check.output)
              return { draft: draft.output, score: verdict._tag === "Success" ? verdict.success.score : 0, notes: check.output }
            }),
          { concurrency: options.concurrency }
        )
        for (const candidate of scored) if (candidate.score > best.score) best = candidate
        yield* Architecture.setOutput(best.draft)
        yield* Architecture.progress("best_of_n.scored", { round, scores: scored.map((candidate) => candidate.score) })
        if (best.score >= options.acceptScore) return { output: best.draft, metadata: { rounds: round, score: best.score } }
        task = `${input.prompt}\n\nA reviewer said of the best answer so far: ${best.notes}`
      }
      return { output: best.draft, metadata: { rounds: options.maxRounds, score: best.score } }
    })
})

export const prompt = "Name a prime number between 20 and 30."

/** What the models would answer, for runs without a server: each draft, then its verdict. */
export const script = [
  "21", "{\"score\": 0, \"notes\": \"21 = 3 × 7\"}",
  "23", "{\"score\": 1, \"notes\": \"23 is prime\"}",
  "25", "{\"score\": 0, \"notes\": \"25 = 5 × 5\"}"
]

const solver = Agent.make({
  name: "solver",
  instructions: "Answer with the number only.",
  // One at a time, so the scripted replies come in order.
  architecture: BestOfN.makeUnsafe({ n: 3, concurrency: 1, verifierPrompt: "Task: {task}\nAnswer: {draft}\nReply as JSON {\"score\", \"notes\"}." })
})

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# A custom architecture (Best-of-N) — ${note}`)
  yield* Agent.stream(solver, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) => event._tag === "Progress" || (event._tag === "RunCompleted" && AgentEvent.isRoot(event))),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
