/**
 * `valet state dump <task_id>`: the saved state of a task, as the JSON it is stored as (snake case) or, with
 * `--render`, as the text the next prompt will carry.
 */
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Schema } from "effect"
import * as StateStore from "../../environment/StateStore.js"

/** The state of `taskId` from the store in context: its JSON, or its rendered text with `render`. */
export const dumpState = (
  taskId: string,
  render: boolean
): Effect.Effect<string, StateStore.StateStoreError, StateStore.StateStore> =>
  Effect.map(StateStore.load(taskId), (state) =>
    render
      ? StateStore.render(state) || "(empty state)"
      : JSON.stringify(Schema.encodeSync(StateStore.State)(state), null, 2))

const dump = Command.make(
  "dump",
  {
    taskId: Args.text({ name: "task_id" }),
    stateDb: Options.text("state-db").pipe(
      Options.withDescription("The SQLite file of task states."),
      Options.withDefault(StateStore.defaultFilename)
    ),
    render: Options.boolean("render").pipe(Options.withDescription("Print the state as the prompt shows it."))
  },
  ({ render, stateDb, taskId }) =>
    dumpState(taskId, render).pipe(
      Effect.flatMap(Console.log),
      Effect.provide(StateStore.layerSqlite({ filename: stateDb }))
    )
).pipe(Command.withDescription("Prints the saved state of a task (the empty state when none was saved)."))

/** `valet state …`: inspect the task states the actor loop keeps. */
export const stateCommand = Command.make("state").pipe(
  Command.withDescription("Inspect the working state the actor loop keeps per task."),
  Command.withSubcommands([dump])
)
