/**
 * `valet state dump <task_id>`: the saved state of a task, as the JSON it is stored as (snake case) or, with
 * `--render`, as the text the next prompt will carry.
 */
import { Console, Effect, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
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
    taskId: Argument.String("task_id").pipe(Argument.withDescription("The task whose state to print.")),
    stateDb: Flag.String("state-db").pipe(
      Flag.withDescription(`The SQLite file of task states (default ${StateStore.defaultFilename}).`),
      Flag.withDefault(StateStore.defaultFilename)
    ),
    render: Flag.Boolean("render").pipe(Flag.withDescription("Print the state as the prompt shows it."), Flag.withDefault(false))
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
