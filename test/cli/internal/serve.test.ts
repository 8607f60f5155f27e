/**
 * `valet serve --config valet.yaml` as a user starts it: the example config runs with no model server; the
 * config's token is required; its limits reach the server; a bad config is one line and exit code 2.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { rawGet } from "../../support/rawHttp.js"
import * as LoopbackServer from "../../support/openAiServer.js"
import { collector } from "../../support/serve.js"

const root = join(import.meta.dirname, "..", "..", "..")
// One `node --import <tsx loader>` process per command, not tsx's launcher and its child: a loaded machine starts half
// as many (a test starting four commands one after another outran its timeout under load).
const tsxLoader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href
const bin = join(root, "src", "cli", "bin.ts")
const example = join(root, "examples", "serve", "valet.yaml")

/** `valet serve` as a child process; answers the URL it prints. Killed with the scope. */
const serve = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly pid: number }>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", tsxLoader, bin, "serve", ...args, "--port", "0"], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } })
        let stderr = ""
        child.stderr.on("data", (data: Buffer) => {
          stderr += data.toString()
          const found = /agents at (http:\/\/\S+) /.exec(stderr)
          if (found !== null) resolve({ url: found[1]!, pid: child.pid! })
        })
        child.on("exit", (code) => reject(new Error(`valet serve exited with ${code}: ${stderr}`)))
      })
    ),
    ({ pid }) => Effect.sync(() => process.kill(pid, "SIGTERM"))
  )

/** `valet serve` that is expected to stop at once (a bad config): its exit code and stderr. */
const refused = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<{ readonly status: number | null; readonly stderr: string }>((resolve) => {
      const child = execFile(process.execPath, ["--import", tsxLoader, bin, "serve", ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 90_000 }, (_error, _stdout, stderr) =>
        resolve({ status: child.exitCode, stderr }))
    })
  )

describe("valet serve", () => {
  it.live("the example config serves its agents with no model server: a streamed run and its result", () =>
    Effect.gen(function*() {
      const { url } = yield* serve(["--config", example])
      const agents = yield* Effect.promise(() => fetch(`${url}/agents`).then((r) => r.json() as Promise<{ agents: Array<{ name: string }> }>))
      expect(agents.agents.map((agent) => agent.name)).toEqual(["assistant", "writer"])
      const text = yield* Effect.promise(() =>
        fetch(`${url}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "writer", input: "What is the capital of France?" })
        }).then((r) => r.text())
      )
      const last = text.trim().split("\n\n").at(-1)!
      expect(last).toMatch(/^id: \d+\nevent: RunCompleted\ndata: /)
      expect(JSON.parse(last.split("data: ")[1]!).result.output).toBe("Paris is the capital of France.")
    }).pipe(Effect.scoped), 30_000)

  it.live("threads: a sqlite store beside the config: the thread routes work and what a run appended outlives the server", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-serve-threads-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const path = join(dir, "valet.yaml")
      writeFileSync(path, "model: { provider: scripted, replies: [\"Hello, Ada.\"] }\nagents:\n  a: { instructions: x }\nthreads: { store: sqlite, path: t.sqlite3 }\n")
      const post = (url: string, route: string, body: unknown) =>
        Effect.promise(() =>
          fetch(`${url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
            .then(async (r) => ({ status: r.status, text: await r.text() }))
        )
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const { url } = yield* serve(["--config", path])
        expect((yield* post(url, "/threads", { id: "chat-1" })).status).toBe(201)
        return yield* post(url, "/threads/chat-1/runs/stream", { agent: "a", input: "My name is Ada." })
      }))
      expect(first.status).toBe(200)
      expect(first.text).toContain("Hello, Ada.")
      // Another server on the same file: the thread and its two messages are there.
      const { url } = yield* serve(["--config", path])
      const thread = yield* Effect.promise(() => fetch(`${url}/threads/chat-1`).then((r) => r.json() as Promise<any>))
      expect(thread.messages.messages).toEqual([{ role: "user", content: "My name is Ada." }, { role: "assistant", content: "Hello, Ada." }])
    }).pipe(Effect.scoped), 60_000)

  it.live("server.tokenEnv: requests without the token get 401", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-serve-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const path = join(dir, "valet.yaml")
      writeFileSync(path, "model: { provider: scripted, replies: [hi] }\nagents:\n  a: { instructions: x }\nserver: { tokenEnv: VALET_TEST_TOKEN }\n")
      const { url } = yield* serve(["--config", path], { VALET_TEST_TOKEN: "t0ken-0123456789abcdef" })
      expect((yield* Effect.promise(() => fetch(`${url}/agents`))).status).toBe(401)
      expect((yield* Effect.promise(() => fetch(`${url}/agents`, { headers: { authorization: "Bearer t0ken-0123456789abcdef" } }))).status).toBe(200)
      // The refusals, started at once (each is a process).
      const [unset, short, padded] = yield* Effect.all([
        refused(["--config", path], { VALET_TEST_TOKEN: "" }),
        refused(["--config", path], { VALET_TEST_TOKEN: "t0ken" }),
        refused(["--config", path], { VALET_TEST_TOKEN: " t0ken-0123456789abcdef" })
      ], { concurrency: "unbounded" })
      expect(unset.status).toBe(2)
      expect(unset.stderr.trim()).toBe(`valet serve: ${path}: server.tokenEnv names VALET_TEST_TOKEN, which is not set in the environment`)
      // A short or padded token is refused: one line, exit code 2.
      for (const [weak, why] of [[short, "is 5 characters long, fewer than 16"], [padded, "starts or ends with white space"]] as const) {
        expect(weak.status).toBe(2)
        expect(weak.stderr.trim()).toBe(`valet serve: ${path}: server.tokenEnv names VALET_TEST_TOKEN, whose token ${why}: use a random one (openssl rand -hex 32)`)
      }
    }).pipe(Effect.scoped), 30_000)

  it.live("the token guards every route of the real command, however the target is written; server.allowedHosts names the hosts", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-serve-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const path = join(dir, "valet.yaml")
      writeFileSync(
        path,
        "model: { provider: scripted, replies: [hi] }\nagents:\n  a: { instructions: x }\n" +
          "server: { tokenEnv: VALET_TEST_TOKEN, allowedHosts: [agents.internal, 127.0.0.1] }\n"
      )
      const { url } = yield* serve(["--config", path], { VALET_TEST_TOKEN: "t0ken-0123456789abcdef" })
      const port = Number(new URL(url).port)
      for (const target of ["/runs#/health", "/agents#/health", "/openapi.json#/health", "/v1/models#/health", "/#/health", "/runs;/health"]) {
        expect({ target, status: (yield* Effect.promise(() => rawGet(port, target))).status }).toEqual({ target, status: 401 })
      }
      const auth = { Authorization: "Bearer t0ken-0123456789abcdef" }
      expect((yield* Effect.promise(() => rawGet(port, "/agents", { ...auth, Host: "agents.internal" }))).status).toBe(200)
      expect((yield* Effect.promise(() => rawGet(port, "/agents", { ...auth, Host: `localhost:${port}` }))).status).toBe(421)
      const badPath = join(dir, "bad.yaml")
      writeFileSync(badPath, "model: { provider: scripted, replies: [hi] }\nagents:\n  a: { instructions: x }\nserver: { allowedHosts: [\"http://x:80\"] }\n")
      const bad = yield* refused(["--config", badPath])
      expect(bad.status).toBe(2)
      expect(bad.stderr.trim()).toMatch(/^valet serve: .*bad\.yaml:4:\d+: server\.allowedHosts.*a host name without port or scheme/)
    }).pipe(Effect.scoped), 30_000)

  it.live("server.maxEventStreams reaches the command: one reader of a run more than it is 429 with Retry-After", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-serve-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      // A model server that never answers: the run goes on, its reader stays open.
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const path = join(dir, "valet.yaml")
      writeFileSync(path, `model: { provider: openai-compatible, baseUrl: "${model.url}/v1", model: m }\nagents:\n  a: { instructions: x }\nserver: { maxEventStreams: 1 }\n`)
      const { url } = yield* serve(["--config", path])
      const { runId } = yield* Effect.promise(() =>
        fetch(`${url}/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent: "a", input: "hi" }) })
          .then((r) => r.json() as Promise<{ runId: string }>)
      )
      const abort = new AbortController()
      const first = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { signal: abort.signal }))
      expect(first.status).toBe(200)
      const second = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`))
      expect(second.status).toBe(429)
      expect(second.headers.get("retry-after")).toBe("1")
      expect(yield* Effect.promise(() => second.json())).toMatchObject({ _tag: "TooManyEventStreams", limit: 1 })
      abort.abort()
      yield* Effect.promise(() => fetch(`${url}/runs/${runId}/cancel`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }))
    }).pipe(Effect.scoped), 60_000)

  it.live("--otlp: the runs' spans reach the collector, flushed when the server stops", () =>
    Effect.gen(function*() {
      const { bodies, url: collectorUrl } = yield* collector
      const child = spawn(process.execPath, ["--import", tsxLoader, bin, "serve", "--config", example, "--port", "0", "--otlp", collectorUrl], { stdio: ["ignore", "ignore", "pipe"] })
      const url = yield* Effect.promise(() =>
        new Promise<string>((resolve) => {
          let stderr = ""
          child.stderr.on("data", (data: Buffer) => {
            stderr += data.toString()
            const found = /agents at (http:\/\/\S+) /.exec(stderr)
            if (found !== null) resolve(found[1]!)
          })
        })
      )
      yield* Effect.promise(() =>
        fetch(`${url}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "assistant", input: "Capital of France?" })
        }).then((r) => r.text())
      )
      const exited = new Promise((resolve) => child.on("exit", resolve))
      child.kill("SIGINT")
      yield* Effect.promise(() => exited)
      const exported = bodies.join("\n")
      expect(exported).toContain("invoke_agent assistant")
      expect(exported).toContain("gen_ai.usage.output_tokens")
    }).pipe(Effect.scoped), 30_000)

  it.live("server.a2a reaches the command: the root card is defaultAgent's, publicUrl names its endpoint; enabled false leaves the A2A routes out; an unknown defaultAgent is a usage error", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-serve-a2a-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const config = (a2a: string) => {
        const path = join(dir, `valet-${Math.random().toString(36).slice(2)}.yaml`)
        writeFileSync(path, `model: { provider: scripted, replies: ["ok"] }\nagents:\n  first: { instructions: x }\n  second: { instructions: y }\nserver:\n  a2a: ${a2a}\n`)
        return path
      }
      const on = yield* serve(["--config", config(`{ defaultAgent: second, publicUrl: "https://agents.example.com/valet" }`)])
      const card = yield* Effect.promise(() => fetch(`${on.url}/.well-known/agent-card.json`).then((r) => r.json() as Promise<{ name: string; supportedInterfaces: Array<{ url: string }> }>))
      expect(card.name).toBe("second")
      expect(card.supportedInterfaces[0]!.url).toBe("https://agents.example.com/valet/a2a/second")
      const off = yield* serve(["--config", config("{ enabled: false }")])
      expect((yield* Effect.promise(() => fetch(`${off.url}/a2a/first/.well-known/agent-card.json`))).status).toBe(404)
      const unknown = yield* refused(["--config", config("{ defaultAgent: third }")])
      expect(unknown.status).toBe(2)
      expect(unknown.stderr.trim()).toMatch(/^valet serve: server\.a2a\.defaultAgent "third" is not an agent of .*\.yaml \(its agents: first, second\)$/)
    }).pipe(Effect.scoped), 60_000)

  it("a bad config: one line naming the file, the line and the key; exit code 2", () => {
    const dir = mkdtempSync(join(tmpdir(), "valet-serve-"))
    try {
      const path = join(dir, "valet.yaml")
      writeFileSync(path, "agents:\n  a:\n    instructions: x\n    maxTurns: 0\n")
      const run = spawnSync(process.execPath, ["--import", tsxLoader, bin, "serve", "--config", path], { encoding: "utf8" })
      expect(run.status).toBe(2)
      expect(run.stderr.trim()).toBe(`valet serve: ${path}:4:15: agents.a.maxTurns must be an integer >= 1, got 0`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
