/**
 * Reflexion: attempt, get scored, and on a low score write a one-sentence lesson that the next attempt — which
 * starts from a fresh context — is shown. Lessons go to a `LessonStore` (here in memory; `layerSqlite` keeps them
 * for later runs of the same task). Run alone: `npx tsx examples/reflexion.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, LessonStore, Reflexion } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "What has keys but cannot open a single lock?"

/** What a model would answer, for runs without a server: attempt, low score, lesson, attempt, high score. */
export const script = [
  "A locksmith's apprentice.",
  "score: 0.1\nThe riddle plays on the word 'keys'; an apprentice does open locks.",
  "Lesson: read riddle words in their other meanings before answering literally.",
  "A piano — its keys open nothing.",
  "score: 0.95\nCorrect, and the pun is explained."
]

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Reflexion — ${note}`)
  const solver = Agent.make({
    name: "riddler",
    instructions: "Answer riddles in one short sentence.",
    architecture: yield* Reflexion.make({ maxRounds: 3, threshold: 0.8 })
  })
  yield* Agent.stream(solver, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) => event._tag === "Progress" || (event._tag === "RunCompleted" && !event.sessionId.includes("__"))),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
  const lessons = yield* LessonStore.list(Reflexion.lessonKeyFor(solver.name, prompt))
  yield* Console.log(`lessons stored for this task: ${JSON.stringify(lessons.map((lesson) => lesson.lesson))}`)
}).pipe(Effect.provide(LessonStore.layerMemory))

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
