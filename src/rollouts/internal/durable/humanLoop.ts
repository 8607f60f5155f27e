/**
 * The `HumanLoop` of one durable run: its calls that need approval and its questions wait durably in the engine's
 * store (`approvals.ts`, `questions.ts`), and are decided and answered through `Durable.decide` / `Durable.answer`
 * from any process on it — not through this loop, whose own `decide` / `answer` say so.
 */
import { Effect, Option } from "effect"
import * as HumanLoop from "../../../core/HumanLoop.js"
import type { WorkflowContext } from "./activities.js"
import * as Approvals from "./approvals.js"
import type { Store } from "./humanLoopStore.js"
import * as Questions from "./questions.js"
import * as Waits from "./waits.js"

/** Polls `list` until it holds `count` items (the store is shared with other processes: nothing here wakes it). */
const awaitCount = <A>(list: Effect.Effect<ReadonlyArray<A>>, count: number): Effect.Effect<ReadonlyArray<A>> =>
  Effect.suspend(function loop(): Effect.Effect<ReadonlyArray<A>> {
    return Effect.flatMap(list, (items) => items.length >= count ? Effect.succeed(items) : Effect.andThen(Effect.sleep("100 millis"), loop))
  })

/**
 * The loop of run `runId` (started for `agent`), and the handoffs its execution's tools report to (`durableTools`).
 * Its lists read the store: a run's sub-agents are in its own run, so `sessionId` narrows nothing further.
 */
export const durableHumanLoop = (
  store: Store,
  runId: string,
  agent: string
): Effect.Effect<{ readonly loop: HumanLoop.Service; readonly handoffs: Waits.Handoffs }, never, WorkflowContext> =>
  Effect.map(Effect.context<WorkflowContext>(), (context) => {
    const execution = Waits.makeExecution()
    const run = { runId, agent }
    const elsewhere = (id: string, how: string) =>
      Effect.fail(new HumanLoop.NotWaiting({ toolCallId: id, message: `run ${JSON.stringify(runId)} is durable: ${how}` }))
    const pending = Effect.map(store.waiting(runId, "approval"), (rows) => rows.map(Approvals.requestOf))
    const questions = Effect.map(store.waiting(runId, "question"), (rows) => rows.map(Questions.requestOf))
    const loop: HumanLoop.Service = {
      wait: (request) =>
        Effect.map(Approvals.waitFor(store, execution, run, request, undefined), Option.getOrThrow).pipe(Effect.provideContext(context)),
      waitWithin: (request, _check, timeout) => Approvals.waitFor(store, execution, run, request, timeout).pipe(Effect.provideContext(context)),
      decide: (toolCallId) => elsewhere(toolCallId, "decide its calls with Durable.decide"),
      pending: () => pending,
      awaitPending: (count) => awaitCount(pending, count),
      ask: (request, check) =>
        Effect.map(Questions.ask(store, execution, run, request, check, undefined), Option.getOrThrow).pipe(Effect.provideContext(context)),
      askWithin: (request, check, timeout) => Questions.ask(store, execution, run, request, check, timeout).pipe(Effect.provideContext(context)),
      answer: (questionId) => elsewhere(questionId, "answer its questions with Durable.answer"),
      dismiss: (questionId) => elsewhere(questionId, "dismiss its questions with Durable.dismiss"),
      questions: () => questions,
      awaitQuestions: (count) => awaitCount(questions, count)
    }
    return { loop, handoffs: execution }
  })
