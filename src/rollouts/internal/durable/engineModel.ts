/**
 * What valet's durable engine (`engine.ts`) is made of: its options, the rows and messages it shares with other
 * processes, its tables, and what it knows of each execution.
 */
import type { Context, Duration, Effect, Exit, Fiber, Scope } from "effect"
import type { SqlError } from "effect/sql"
import type { Workflow, WorkflowEngine } from "effect/workflow"
import type { Result } from "./engineCodecs.js"

/** How the engine treats a failed statement: a defect naming the store (the caller's error channel is a workflow's). */
export type OnStoreFailure = (error: SqlError.SqlError) => unknown

/**
 * Many processes on one database (PostgreSQL: `engineRunners.ts`): each execution is run by one runner, its owner
 * (the `owner` column), and the processes tell each other what they wrote (`NOTIFY`). Without it, one process runs
 * every execution of its file (SQLite).
 */
export interface Sharing {
  /** This process's runner id, written as the owner of what it runs; `undefined` for a client. */
  readonly runner: string | undefined
  /** The channel the processes tell each other on (`NOTIFY`: delivered when the transaction that says it commits). */
  readonly channel: string
}

/** An execution's row as stored. */
export interface ExecutionRow {
  readonly workflow: string
  readonly payload: string
  readonly parent: string | null
  readonly interrupted: number | bigint
  readonly suspended: string | null
  readonly result: string | null
}

/** An execution's row as a runner took it (a shared database): how often it was taken (1: never run before). */
export interface Taken extends ExecutionRow {
  readonly execution_id: string
  readonly takes: number | bigint | string
}

/**
 * What a process tells the others (a `NOTIFY` payload: the kind, a space, the execution id): an execution was
 * started for a runner to take (`start`), completed (`done`), has a deferred completed, an interrupt or a resume for
 * its owner to take (`wake`), has a child that completed (`child`).
 */
export type Message = `${"start" | "done" | "wake" | "child"} ${string}`

/** How the engine is set up. */
export interface Options {
  /** Runs no workflow: completes deferreds and reads results for the process that runs them. */
  readonly clientOnly?: boolean | undefined
  /** Shares the database with other processes (PostgreSQL); `clientOnly` there starts work for the runners. */
  readonly sharing?: Sharing | undefined
  /** What a failed statement dies with (default: the `SqlError`). */
  readonly onStoreFailure?: OnStoreFailure | undefined
  /** How often another process's commits are looked for (default 250 ms). */
  readonly pollInterval?: Duration.Input | undefined
}

/** The engine's table of executions (the others are named alike). */
export const executionsTable = "valet_workflow_executions"
export const activitiesTable = "valet_workflow_activities"
export const deferredsTable = "valet_workflow_deferreds"
export const clocksTable = "valet_workflow_clocks"
export const resumesTable = "valet_workflow_resumes"
export const runnerTable = "valet_workflow_runner"

export type Execute = (payload: object, executionId: string) => Effect.Effect<unknown, unknown, WorkflowEngine.WorkflowInstance | WorkflowEngine.WorkflowEngine>
export type ResumeMode = "explicit" | "automatic"

export interface Registered {
  readonly workflow: Workflow.Any
  readonly execute: Execute
  readonly scope: Scope.Scope
  /** The services where the handler was registered: a run sees these, not its caller's. */
  readonly context: Context.Context<never>
}

export interface ActivityState {
  exit: Exit.Exit<Result> | undefined
}

/** What this process knows of one execution (the memory engine's state, with its activities and deferreds). */
export interface ExecutionState {
  readonly workflow: Workflow.Any
  readonly payload: object
  instance: WorkflowEngine.WorkflowInstance["Service"]
  interrupted: boolean
  interruptedUnsafe: boolean
  resumeRequested: ResumeMode | undefined
  fiber: Fiber.Fiber<Result, unknown> | undefined
  readonly scope: Scope.Closeable
  readonly parent: string | undefined
  /** The result stored by an earlier process: the execution is over, nothing runs. */
  stored: Result | undefined
  /** Loaded from the file while it waits: its last suspension, what a caller is answered without running it. */
  suspension: Result | undefined
  readonly activities: Map<string, ActivityState>
  readonly deferreds: Map<string, Exit.Exit<unknown, unknown>>
  /** Whether a clock was set (its row is removed when the execution completes). */
  clocks: boolean
  /**
   * Loaded suspended on failure (an earlier process's run failed and suspended): not run again until an explicit
   * resume, as a failed run in memory is not woken by anything else.
   */
  failed: Workflow.Suspended | undefined
  /** Its result was not stored because another runner owns it now (a shared database): its callers ask again. */
  moved: boolean
}

export const isUnwakeable = (result: Result, mode: ResumeMode) =>
  result._tag === "Complete" || (mode === "automatic" && result.failed === true)
