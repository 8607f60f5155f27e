/**
 * The test sandbox: scripted results, virtual workspaces, no processes or directories; commands and paths are
 * checked exactly as the real layer checks them.
 */
import { Effect, Result } from "effect"
import type { Files, Info, RunRequest, SandboxResult, Service, TestResponder, Workspace, WorkspaceOptions } from "./types.js"
import { defaultAllow, SandboxError } from "./types.js"
import { checkCommand, checkTaskId, makeLocks, refusal, refused } from "./shared.js"
import * as Workspaces from "./workspace.js"

/** The test sandbox's service. */
export const make = (respond: TestResponder, options?: { readonly allow?: ReadonlyArray<string> }): Service => {
  const allow = new Set(options?.allow ?? defaultAllow)
  const contents = new Map<Workspace, Record<string, string>>()
  const kept = new Map<string, Record<string, string>>()
  const lockOf = makeLocks()
  let counter = 0
  const info: Info = {
    isolation: "test",
    bwrapUnavailable: "test layer",
    readOnlyPaths: undefined,
    limiter: "none",
    pooledUids: false,
    processLimitEnforced: false,
    allowed: [...allow].map((name) => ({ name, path: name })),
    missing: [],
    workRoot: "/valet-test"
  }
  const workspace = (taskId: string, files: Files = {}, wsOptions?: WorkspaceOptions) =>
    Effect.gen(function*() {
      yield* checkTaskId(taskId)
      const keep = wsOptions?.keep === true
      if (keep) yield* lockOf(taskId).takeScoped(1)
      const seeded: Record<string, string> = keep ? { ...kept.get(taskId) } : {}
      const reopened = keep && kept.has(taskId)
      for (const [path, content] of reopened && wsOptions?.seedOnce === true ? [] : Object.entries(files)) {
        const normalized = Workspaces.checkRelativePath(path)
        if (normalized instanceof Workspaces.PathRefused) return yield* refusal(taskId, normalized)
        if (!(keep && normalized in seeded)) seeded[normalized] = content
      }
      if (keep) kept.set(taskId, seeded)
      const ws: Workspace = { taskId, path: keep ? `/valet-test/kept/${taskId}` : `/valet-test/${taskId}-${++counter}`, kept: keep }
      contents.set(ws, seeded)
      yield* Effect.addFinalizer(() => Effect.sync(() => contents.delete(ws)))
      return ws
    })
  const run = (ws: Workspace, request: RunRequest) =>
    Effect.gen(function*() {
      const files = contents.get(ws)
      if (files === undefined) {
        return yield* new SandboxError({ reason: "workspace_closed", taskId: ws.taskId, path: ws.path, message: `workspace ${ws.path} is closed` })
      }
      const checked = checkCommand(request.command)
      if (Result.isFailure(checked)) return checked.failure
      const command = checked.success
      if (!allow.has(command[0]!)) {
        return refused(command, 126, "not_allowed", `not_allowed: ${command[0]} is not allowed (allowed: ${[...allow].join(", ")})\n`)
      }
      const answer = respond({ command, workspace: ws, files: { ...files }, timeoutMs: request.timeoutMs })
      const parts = Effect.isEffect(answer) ? yield* answer : answer
      const result: SandboxResult = {
        command,
        exitCode: 0,
        stdout: "",
        stderr: "",
        durationMs: 0,
        timedOut: false,
        isolation: "test",
        ...parts
      }
      return result
    })
  const discard = (taskId: string) =>
    Effect.andThen(checkTaskId(taskId), lockOf(taskId).withPermits(1)(Effect.sync(() => void kept.delete(taskId))))
  return { info, workspace, run, discard } satisfies Service
}
