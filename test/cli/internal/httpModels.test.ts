/**
 * Every command that takes `--agents` or `--config`, against a model behind real HTTP (the loopback
 * OpenAI-compatible server): the server receives the request and the command answers with the model's text.
 *
 * On aa650ea `valet run --agents valet.yaml` with an `openai-compatible` (or `vllm`) model exited 1 with
 * `Transport: … The client is destroyed` and sent nothing: the HTTP client was provided to `AgentConfig.build`
 * alone and closed when it returned, before the run used it. The scripted models of the other tests never noticed.
 *
 * The commands run in this process with the real clock (`it.live`): their retries and timeouts are real.
 *
 * Not here: `valet replay` takes no model (a cassette), `valet runner` needs PostgreSQL and is run against a
 * loopback model server by `test/rollouts/DurableCluster.test.ts`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { valet } from "../../support/cli.js"
import * as LoopbackServer from "../../support/openAiServer.js"
import { startValet } from "../../support/valetProcess.js"
import { tempDir as makeTempDir } from "../../support/tempDir.js"

/** What the loopback server's model answers (8 words). */
const answer = "Word0 word1 word2 word3 word4 word5 word6 word7"

const root = join(import.meta.dirname, "..", "..", "..")

const tempDir = makeTempDir("valet-http-models-")

const paths = (server: LoopbackServer.LoopbackServer) => server.requests.map((request) => `${request.method} ${request.path}`)
/** The requests but the pool's health probes. */
const modelRequests = (server: LoopbackServer.LoopbackServer) => paths(server).filter((path) => path !== "GET /health")

/** A vLLM pool file of one actor: the loopback server, spoken to with the OpenAI API. */
const poolFile = (server: LoopbackServer.LoopbackServer) =>
  `actors:\n  - name: one\n    base_url: ${server.url}\n    model: loopback-model\n    api: openai\n`

describe("valet run --agents: the file's HTTP model answers", () => {
  it.live("openai-compatible with a model name: the server gets the chat request; the answer is its text", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { write } = yield* tempDir
      const file = write(
        "valet.yaml",
        `model: { provider: openai-compatible, baseUrl: "${server.url}/v1", model: loopback-model }\n` +
          "agents:\n  a: { instructions: Be brief. }\n"
      )
      const result = yield* valet(["run", "--agents", file, "--agent", "a", "hi"])
      expect(result).toEqual({ code: 0, out: `${answer}\n`, errors: [] })
      expect(paths(server)).toEqual(["POST /v1/chat/completions"])
      expect(server.requests[0]!.body.messages.at(-1)).toMatchObject({ role: "user", content: "hi" })
    }).pipe(Effect.scoped))

  it.live("openai-compatible without a model name (the server's first) and --stream; vllm from a pool file", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { write } = yield* tempDir
      write("pool.yaml", poolFile(server))
      const file = write(
        "valet.yaml",
        `model: { provider: openai-compatible, baseUrl: "${server.url}/v1" }\n` +
          "agents:\n" +
          "  a: { instructions: Be brief. }\n" +
          "  pooled:\n    instructions: Be brief.\n    model: { provider: vllm, config: pool.yaml }\n"
      )
      const streamed = yield* valet(["run", "--agents", file, "--agent", "a", "--stream", "hi"])
      expect(streamed.code).toBe(0)
      expect(streamed.out.trimEnd().split("\n").at(-1)).toBe(answer)
      expect(paths(server)).toEqual(["GET /v1/models", "POST /v1/chat/completions"])
      expect(server.requests[1]!.body.model).toBe("loopback-model")

      server.requests.length = 0
      const pooled = yield* valet(["run", "--agents", file, "--agent", "pooled", "hi"])
      expect(pooled).toEqual({ code: 0, out: `${answer}\n`, errors: [] })
      // The file's top-level model is built too (it asks for the model name); the pool's actor answers.
      expect(modelRequests(server)).toEqual(["GET /v1/models", "POST /v1/chat/completions"])
    }).pipe(Effect.scoped))
})

describe("valet run / solve / eval / actor-loop / health --config <pool>: the pool's HTTP model answers", () => {
  it.live("run and solve print the model's text", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { write } = yield* tempDir
      const pool = write("pool.yaml", poolFile(server))
      expect(yield* valet(["run", "--config", pool, "hi"])).toEqual({ code: 0, out: `${answer}\n`, errors: [] })
      expect(modelRequests(server)).toEqual(["POST /v1/chat/completions"])

      server.requests.length = 0
      const solved = yield* valet(["solve", "What is 1 + 1?", "--architecture", "self-refine", "--max-rounds", "1", "--config", pool])
      expect(solved.code).toBe(0)
      expect(solved.out).toContain(`answer: ${answer}`)
      expect(new Set(modelRequests(server))).toEqual(new Set(["POST /v1/chat/completions"]))
    }).pipe(Effect.scoped))

  it.live("eval, plain and --durable on a SQLite file: each result holds the model's text", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir
      const pool = write("pool.yaml", poolFile(server))
      const dataset = write("problems.jsonl", `{"id":"a","problem":"What is 1 + 1?","reference":"2"}\n`)
      for (const durable of [[], ["--durable", join(dir, "runs.db")]]) {
        server.requests.length = 0
        const out = join(dir, `results-${durable.length}.jsonl`)
        const evaluated = yield* valet([
          "eval", dataset, "--architecture", "self_refine", "--max-rounds", "1", "--config", pool, "--out", out, ...durable
        ])
        expect({ durable, code: evaluated.code, errors: evaluated.errors }).toEqual({ durable, code: 0, errors: [] })
        expect(paths(server)).toContain("POST /v1/chat/completions")
        expect(JSON.parse(readFileSync(out, "utf8").trim())).toMatchObject({ id: "a", answer })
      }
    }).pipe(Effect.scoped))

  it.live("actor-loop: the step's trajectory holds the model's completion; health asks the pool's actor", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { dir, write } = yield* tempDir
      const pool = write("pool.yaml", poolFile(server))
      const tasks = write("tasks.jsonl", `{"task_id":"t1","prompt":"Say something."}\n`)
      const trajectories = join(dir, "trajectories")
      const stepped = yield* valet(
        ["actor-loop", tasks, "--config", pool, "--state-db", join(dir, "state.db"), "--trajectories", trajectories, "--work-root", dir],
        // No bubblewrap needed: the step's command runs as a plain process in its workspace.
        { VALET_SANDBOX_ISOLATION: "process" }
      )
      expect({ code: stepped.code, errors: stepped.errors.filter((line) => !line.includes("isolation")) }).toEqual({ code: 0, errors: [] })
      expect(modelRequests(server)).toEqual(["POST /v1/completions"])
      const raw = readdirSync(join(trajectories, "raw"))
      expect(raw).toEqual(["t1.jsonl"])
      expect(readFileSync(join(trajectories, "raw", "t1.jsonl"), "utf8")).toContain(answer)

      server.requests.length = 0
      const health = yield* valet(["health", "--config", pool])
      expect(health.code).toBe(0)
      expect(health.out).toMatch(/^one\s+http:\/\/127\.0\.0\.1:\d+\s+healthy\s+openai/m)
      expect(paths(server)).toContain("GET /health")
    }).pipe(Effect.scoped))
})

describe("valet serve / mcp --config valet.yaml: the file's HTTP model answers (real processes)", () => {
  const config = (server: LoopbackServer.LoopbackServer) =>
    `model: { provider: openai-compatible, baseUrl: "${server.url}/v1", model: loopback-model }\n` +
    "agents:\n  a: { instructions: Be brief. }\n"

  it.live("serve: a streamed run ends with the model's text", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { write } = yield* tempDir
      const file = write("valet.yaml", config(server))
      const serve = yield* Effect.acquireRelease(
        Effect.sync(() => startValet(["serve", "--config", file, "--port", "0"])),
        (child) => Effect.sync(() => child.kill())
      )
      const line = yield* Effect.promise(() => serve.waitFor(/agents at http:\/\/\S+/, 25_000))
      const url = /agents at (http:\/\/\S+)/.exec(line)![1]!
      const text = yield* Effect.promise(() =>
        fetch(`${url}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "a", input: "hi" })
        }).then((response) => response.text())
      )
      const last = text.trim().split("\n\n").at(-1)!
      expect(last).toMatch(/^id: \d+\nevent: RunCompleted\n/)
      expect(JSON.parse(last.split("data: ")[1]!).result.output).toBe(answer)
      expect(paths(server)).toEqual(["POST /v1/chat/completions"])
    }).pipe(Effect.scoped), 40_000)

  it.live("mcp: a tools/call answers the model's text", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      const { write } = yield* tempDir
      const file = write("valet.yaml", config(server))
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "valet-test", version: "1.0.0" })
          await client.connect(new StdioClientTransport({
            command: process.execPath,
            args: ["--import", "tsx", join(root, "src", "cli", "bin.ts"), "mcp", "--config", file],
            cwd: root,
            stderr: "pipe"
          }))
          return client
        }),
        (client) => Effect.promise(() => client.close())
      )
      const result = yield* Effect.promise(() => client.callTool({ name: "a", arguments: { input: "hi" } }))
      expect(result).toMatchObject({ isError: false, content: [{ type: "text", text: answer }] })
      expect(paths(server)).toEqual(["POST /v1/chat/completions"])
    }).pipe(Effect.scoped), 40_000)
})
