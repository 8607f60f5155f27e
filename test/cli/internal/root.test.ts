import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { CliOutput, Command } from "effect/cli"
import { valet, version } from "../../../src/cli/internal/root.js"

/** Runs `valet` on `args`, keeping what it would present (help, version, invalid invocations) instead of printing it. */
const present = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const events: Array<CliOutput.Presenter.Event> = []
    const exit = yield* Command.runWith(valet, { version })(args).pipe(
      Effect.provide(CliOutput.layerPresenter({ present: (event) => Effect.sync(() => void events.push(event)) })),
      Effect.provide(NodeServices.layer),
      Effect.exit
    )
    return { events, exit }
  })

const formatter = CliOutput.defaultFormatter({ colors: false })

/** Each command, the words its help must say, and its flags. */
const commands: ReadonlyArray<readonly [path: ReadonlyArray<string>, says: string, flags: ReadonlyArray<string>]> = [
  [[], "Effect-native agent framework", []],
  [["journal"], "Inspect the JSONL cassettes", []],
  [["journal", "show"], "Lists the model calls recorded in a cassette", []],
  [["solve"], "Solves one problem with the Ensemble", [
    "--architecture", "--out", "--max-calls", "--max-rounds", "--call-concurrency", "--n", "--attempts", "--early-stop",
    "--concurrency", "--share-reference", "--base-url", "--model", "--api-key", "--config"
  ]],
  [["eval"], "Runs an architecture over a JSONL dataset", ["--architecture", "--out", "--max-calls", "--share-reference"]],
  [["actor-loop"], "Runs an RL actor-loop episode (one step, or up to --max-steps; --group n rollouts) per task of a JSONL file", [
    "--actor-name", "--config", "--concurrency", "--state-db", "--trajectories", "--work-root", "--keep-workspaces",
    "--timeout-ms", "--chat", "--max-steps", "--group"
  ]],
  [["state"], "Inspect the working state the actor loop keeps per task", []],
  [["state", "dump"], "Prints the saved state of a task", ["--state-db", "--render"]],
  [["run"], "Runs an agent on a prompt and prints its answer", [
    "--architecture", "--stream", "--instructions", "--record", "--base-url", "--model", "--api-key", "--config", "--actor-name",
    "--approve"
  ]],
  [["runs"], "What waits for a person in a run", []],
  [["runs", "pending"], "Lists what waits for a person in a run", ["--url", "--token", "--store"]],
  [["runs", "decide"], "Decides a tool call waiting for a person", ["--approve", "--reject", "--reason", "--url", "--token", "--store"]],
  [["runs", "answer"], "Answers a question a run waits on", ["--json", "--url", "--token", "--store"]],
  [["replay"], "Runs the agent again from a cassette", ["--architecture", "--stream", "--instructions"]],
  [["health"], "Lists each actor of the vLLM pool", ["--config"]],
  [["trajectories"], "Work with the recorded RL trajectories", []],
  [["trajectories", "export"], "Exports the trajectories as training data", [
    "--format", "--trajectories", "--out", "--parquet", "--min-reward", "--system", "--task"
  ]]
]

describe("valet --help", () => {
  for (const [path, says, flags] of commands) {
    it.effect(`valet ${[...path, "--help"].join(" ")} shows the command's help and runs nothing`, () =>
      Effect.gen(function*() {
        const { events, exit } = yield* present([...path, "--help"])
        expect(Exit.isSuccess(exit)).toBe(true)
        expect(events).toHaveLength(1)
        const event = events[0]!
        expect(event._tag).toBe("Help")
        if (event._tag !== "Help") return
        const text = formatter.formatHelpDoc(event.helpDoc)
        expect(text).toContain(says)
        for (const flag of flags) expect(text).toContain(flag)
      }))
  }

  it.effect("valet --help lists every command", () =>
    Effect.gen(function*() {
      const { events } = yield* present(["--help"])
      const help = events[0]!
      if (help._tag !== "Help") throw new Error("expected help")
      const names = (help.helpDoc.subcommands ?? []).flatMap((group) => group.commands.map((command) => command.name))
      expect([...names].sort()).toEqual(["actor-loop", "eval", "health", "journal", "mcp", "replay", "rollout", "run", "runner", "runs", "serve", "solve", "state", "trajectories"])
    }))

  it.effect("valet --version prints the version", () =>
    Effect.gen(function*() {
      const { events } = yield* present(["--version"])
      expect(events.map((event) => event._tag === "Version" ? event.version : event._tag)).toEqual([version])
    }))
})

describe("valet: invalid invocations", () => {
  it.effect("a dataset that does not exist, an unknown architecture, a missing prompt: errors with the help, no run", () =>
    Effect.gen(function*() {
      for (const args of [
        ["eval", "/nonexistent/problems.jsonl"],
        ["run", "--architecture", "nope", "Hello"],
        ["replay", "/nonexistent/cassette.jsonl", "Hello"],
        ["run"],
        ["actor-loop", "/nonexistent/tasks.jsonl", "--concurrency", "many"]
      ]) {
        const { events, exit } = yield* present(args)
        expect(Exit.isFailure(exit), args.join(" ")).toBe(true)
        expect(events.map((event) => event._tag), args.join(" ")).toEqual(["InvalidInvocation"])
      }
    }))
})
