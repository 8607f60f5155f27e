import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Option } from "effect"
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { checkHealth, healthTable, NoHealthyActor } from "../../../src/cli/internal/health.js"
import { defaultInstructions, memoryPrinter, modelOf, runConfigured, runPrompt } from "../../../src/cli/internal/run.js"
import * as Journal from "../../../src/core/Journal.js"
import * as OpenAiCompatible from "../../../src/providers/OpenAiCompatible.js"
import * as Vllm from "../../../src/providers/Vllm.js"
import * as Cli from "../../support/cli.js"
import * as Server from "../../support/openAiServer.js"

const answer = "Word0 word1 word2 word3 word4 word5 word6 word7"

const clientOf = (server: Server.LoopbackServer) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "m" }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const settings = { prompt: "Hello", architecture: "react", instructions: defaultInstructions, stream: false }

describe("valet run --agents valet.yaml --agent <name>", () => {
  const file = `
agents:
  desk:
    architecture: swarm
    instructions: ""
    options: { agents: [triage, billing], entry: triage }
    model: { provider: scripted, replies: [x] }
  triage:
    instructions: You are triage.
    model:
      provider: scripted
      replies: [{ toolCalls: [{ name: handoff, arguments: { target: billing } }] }]
  billing:
    instructions: You are billing.
    model: { provider: scripted, replies: ["Refund issued."] }
  front:
    architecture: router
    instructions: Route.
    options: { routes: [{ name: billing, agent: billing }] }
    model: { provider: scripted, replies: ["route: billing"] }
`
  const withFile = <A, E, R>(use: (path: string) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(
      Effect.sync(() => {
        const dir = mkdtempSync(join(tmpdir(), "valet-run-agents-"))
        writeFileSync(join(dir, "valet.yaml"), file)
        return dir
      }),
      (dir) => use(join(dir, "valet.yaml")),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )

  it.effect("runs a Swarm and a Router defined in the file; their agents on their own models", () =>
    withFile((path) =>
      Effect.gen(function*() {
        const swarm = memoryPrinter()
        const handed = yield* runConfigured(path, Option.some("desk"), "Charged twice.", false, swarm)
        expect(handed).toMatchObject({ output: "Refund issued.", metadata: { handoffs: 1 } })
        expect(swarm.out).toBe("Refund issued.\n")
        const streamed = memoryPrinter()
        yield* runConfigured(path, Option.some("front"), "Charged twice.", true, streamed)
        expect(streamed.out).toContain("router.dispatched")
        expect(streamed.out.trimEnd().split("\n").at(-1)).toBe("Refund issued.")
        const unknown = yield* Effect.flip(runConfigured(path, Option.some("nobody"), "x", false, memoryPrinter()))
        expect(unknown.message).toBe(`${path} has no agent "nobody" (agents: desk, triage, billing, front)`)
        const ambiguous = yield* Effect.flip(runConfigured(path, Option.none(), "x", false, memoryPrinter()))
        expect(ambiguous.message).toBe(`${path} has 4 agents: choose one with --agent (desk, triage, billing, front)`)
      }).pipe(Effect.provide(NodeServices.layer))))
})

describe("valet run", () => {
  it.effect("--architecture debate: three debaters on the server's model; the loopback server's answers agree at once", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const printer = memoryPrinter()
      const result = yield* runPrompt({ ...settings, architecture: "debate" }, printer).pipe(Effect.provide(clientOf(server)))
      // Every debater gets the same answer from the loopback server: converged in round 0, no judge, three calls.
      expect(result).toMatchObject({ output: answer, modelCalls: 3, metadata: { decided_by: "convergence", converged_at: 0 } })
      expect(printer.out).toBe(`${answer}\n`)
      expect(server.requests.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(3)
    }))

  it.effect("prints only the answer; the request carries the instructions and the prompt", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const printer = memoryPrinter()
      const result = yield* runPrompt(settings, printer).pipe(Effect.provide(clientOf(server)))
      expect(result.output).toBe(answer)
      expect(printer.out).toBe(`${answer}\n`)
      expect(printer.notes).toEqual([])
      expect(server.requests[0]!.body.messages).toEqual([
        { role: "system", content: defaultInstructions },
        { role: "user", content: "Hello" }
      ])
    }))

  it.effect("--stream prints the events as they arrive, the model's text inline, then the answer", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const printer = memoryPrinter()
      yield* runPrompt({ ...settings, stream: true }, printer).pipe(Effect.provide(clientOf(server)))
      const lines = printer.out.split("\n")
      expect(lines[0]).toMatch(/^\[sess_\w+\] run started: valet-run \(react\) ← Hello$/)
      expect(lines[1]).toMatch(/model call react\.turn_1$/)
      expect(lines[2]).toBe(answer)
      expect(lines[3]).toMatch(/model replied react\.turn_1 in \d+ ms, \d+ tokens: Word0/)
      expect(lines[4]).toMatch(/run completed after 1 model calls/)
      expect(lines.slice(5)).toEqual(["", answer, ""])
      // Streamed from the server: the request asked for SSE.
      expect(server.requests[0]!.body.stream).toBe(true)
    }))

  it.effect("--record then replay: the same answer from the cassette, with no server", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const fs = yield* FileSystem.FileSystem
      const cassette = `${yield* fs.makeTempDirectoryScoped()}/run.jsonl`
      const recorded = yield* runPrompt({ ...settings, architecture: "self-refine" }, memoryPrinter()).pipe(
        Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(clientOf(server))))
      )
      const calls = server.requests.length
      expect(calls).toBeGreaterThanOrEqual(2)
      const printer = memoryPrinter()
      const replayed = yield* runPrompt({ ...settings, architecture: "self-refine" }, printer).pipe(
        Effect.provide(Journal.layerReplay(cassette))
      )
      expect(replayed.output).toBe(recorded.output)
      expect(printer.out).toBe(`${recorded.output}\n`)
      expect(server.requests.length).toBe(calls)
      const miss = yield* Effect.flip(runPrompt({ ...settings, prompt: "Other" }, memoryPrinter()).pipe(Effect.provide(Journal.layerReplay(cassette))))
      expect(miss.message).toMatch(/ReplayMiss|no recorded model call/)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("--config / --actor-name use the pool", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const fs = yield* FileSystem.FileSystem
      const path = `${yield* fs.makeTempDirectoryScoped()}/pool.yaml`
      yield* fs.writeFileString(path, `actors:\n  - name: one\n    base_url: ${server.url}\n    model: m\n    api: openai\n`)
      const result = yield* runPrompt(settings, memoryPrinter()).pipe(
        Effect.provide(modelOf({ baseUrl: Option.none(), model: Option.none(), apiKey: Option.none(), config: Option.some(path), actorName: Option.some("one") }))
      )
      expect(result.output).toBe(answer)
      expect(server.requests.map((r) => r.path)).toEqual(["/v1/chat/completions"])
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("valet health", () => {
  it.effect("one row per actor with its state and API; fails when none is healthy", () =>
    Effect.gen(function*() {
      const up = yield* Server.make({ api: "generate" })
      const fs = yield* FileSystem.FileSystem
      const path = `${yield* fs.makeTempDirectoryScoped()}/pool.yaml`
      yield* fs.writeFileString(path, `actors:\n  - name: up\n    base_url: ${up.url}\n  - name: gone\n    base_url: http://127.0.0.1:1\n`)
      const printer = memoryPrinter()
      const statuses = yield* checkHealth(printer).pipe(Effect.provide(Vllm.layerNode({ configPath: path })))
      expect(statuses.map((s) => [s.name, s.healthy, s.api])).toEqual([["up", true, "generate"], ["gone", false, undefined]])
      const lines = printer.out.trimEnd().split("\n")
      expect(lines[0]).toBe(`pool: ${path}`)
      expect(lines[1]).toMatch(/^actor\s+base_url\s+state\s+api\s+model$/)
      expect(lines[2]).toMatch(new RegExp(`^up\\s+${up.url}\\s+healthy\\s+generate\\s+-$`))
      expect(lines[3]).toMatch(/^gone\s+http:\/\/127\.0\.0\.1:1\s+unhealthy \(GET http:\/\/127\.0\.0\.1:1\/health: .*\)\s+unknown\s+-$/)

      up.setHealthy(false)
      const error = yield* Effect.flip(checkHealth(memoryPrinter()).pipe(Effect.provide(Vllm.layerNode({ configPath: path }))))
      expect(error).toEqual(new NoHealthyActor({ path }))
    }).pipe(Effect.provide(NodeServices.layer)))

  it("says when the file is missing and the default actor is used", () => {
    const lines = healthTable(
      { path: "configs/vllm_actors.yaml", fromFile: false, actors: [], timeoutSec: 60, maxTokens: 512, maxAttempts: 3 },
      []
    )
    expect(lines[0]).toBe("pool: configs/vllm_actors.yaml not found: the default single actor")
  })
})

describe("valet run --thread (a real process, twice)", () => {
  const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
  const bin = join(root, "src", "cli", "bin.ts")
  // The loader by its URL: the commands run in a temporary directory, where `--import tsx` would not resolve.
  const tsxLoader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href
  /**
   * `valet run …` in a process of its own (asynchronously: the loopback model server answers from this process):
   * one `node --import tsx` process, not tsx's launcher and its child, so a loaded machine starts half as many.
   */
  const valet = (args: ReadonlyArray<string>, cwd: string) =>
    Effect.promise(() =>
      new Promise<{ readonly code: number | string; readonly stdout: string; readonly stderr: string }>((resolve) => {
        execFile(process.execPath, ["--import", tsxLoader, bin, ...args], { cwd, encoding: "utf8", timeout: 90_000 }, (error, stdout, stderr) =>
          resolve({
            // A kill (the timeout's) is named, not mistaken for an exit code.
            code: error === null ? 0 : typeof error.code === "number" ? error.code : `killed by ${error.signal ?? "?"}`,
            stdout,
            stderr
          }))
      })
    )

  it.live("the second run continues the first: its model reads the first turn from the SQLite file; bad flags are one line", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-run-thread-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const model = ["--base-url", server.url, "--model", "m"]
      const first = yield* valet(["run", ...model, "--thread", "chat-1", "My name is Ada."], dir)
      expect([first.code, first.stderr]).toEqual([0, ""])
      expect(first.stdout).toBe(`${answer}\n`)
      // The default file, its folder made in the working directory.
      expect(existsSync(join(dir, "data", "threads.sqlite3"))).toBe(true)
      const second = yield* valet(["run", ...model, "--thread", "chat-1", "What is my name?"], dir)
      expect(second.code).toBe(0)
      const requests = server.requests.filter((r) => r.path === "/v1/chat/completions")
      expect(requests).toHaveLength(2)
      expect(requests[1]!.body.messages).toEqual([
        { role: "system", content: defaultInstructions },
        { role: "user", content: "My name is Ada." },
        { role: "assistant", content: answer },
        { role: "user", content: "What is my name?" }
      ])
      // Another thread in another file starts empty.
      yield* valet(["run", ...model, "--thread", "chat-2", "--threads", join(dir, "other.sqlite3"), "Hi."], dir)
      expect(server.requests.filter((r) => r.path === "/v1/chat/completions")[2]!.body.messages).toHaveLength(2)
      // Bad flags are refused before anything starts: checked in this process (what bin.ts runs), not two more.
      const bad = yield* Cli.valet(["run", ...model, "--thread", "a b", "Hi."])
      expect([bad.code, bad.errors]).toEqual([1, [`valet run: --thread: invalid thread id "a b": use letters, digits, -, ., : and single _, at most 128 characters`]])
      const alone = yield* Cli.valet(["run", ...model, "--threads", "x.sqlite3", "Hi."])
      expect([alone.code, alone.errors]).toEqual([1, ["valet run: --threads names the file of --thread's conversation: give --thread <id> too"]])
      // With --agents, the file's own store (its threads:, where valet serve keeps them), not a local file.
      writeFileSync(join(dir, "valet.yaml"), `model: { provider: openai-compatible, baseUrl: "${server.url}/v1", model: m }
threads: { store: sqlite, path: kept/threads.db, workingMemory: { scope: owner, template: "Name: ?" } }
agents:
  assistant: { instructions: Be brief. }
`)
      const nested = join(dir, "elsewhere")
      mkdirSync(nested)
      for (const input of ["I am Ada.", "Who am I?"]) {
        const turn = yield* valet(["run", "--agents", join(dir, "valet.yaml"), "--thread", "chat-3", input], nested)
        expect([turn.code, turn.stderr]).toEqual([0, ""])
      }
      expect(existsSync(join(dir, "kept", "threads.db"))).toBe(true)
      expect(existsSync(join(nested, "data"))).toBe(false)
      const third = server.requests.filter((r) => r.path === "/v1/chat/completions").at(-1)!
      // The file's working memory: its template shown after the instructions, the tool to replace it given.
      expect(third.body.messages.map((m: { content: string }) => m.content)).toEqual([
        "Be brief.",
        `Your working memory (replace it with the update_working_memory tool when something worth remembering changes):\n"Name: ?"`,
        "I am Ada.",
        answer,
        "Who am I?"
      ])
      expect(third.body.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual(["update_working_memory"])
    }).pipe(Effect.scoped), 240_000)
})
