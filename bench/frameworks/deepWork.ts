/**
 * The work of the deep-agent benchmark (`bench/deepAgent.ts`), defined once for valet's `DeepAgent` and LangChain's
 * `deepagents`: a scripted session of N model calls on an in-memory workspace. Step 1 writes a plan of 4 steps
 * (`write_todos`); steps 2..N-1 cycle through `write_file`, `read_file`, `edit_file`, `ls` and `write_todos` (the
 * plan's progress), one tool call a step, on one small file rewritten each cycle (so every cycle does the same work,
 * and `ls` lists one file); step N answers with the 20-word text of the tool-loop benchmarks. At N = 6 that is the
 * task of the issue: plan, write, read, edit, list, answer.
 *
 * Each framework maps a call to its own tools' arguments: valet's paths are relative to the workspace and its plan's
 * last status is `done`; `deepagents`' paths are absolute (`/notes.md`), its tools take `file_path`, and its plan's
 * last status is `completed`.
 */
export { finalText, hooks, yieldToEventLoop } from "./work.js"

/** The file every session works on, relative to the workspace. */
export const fileName = "notes.md"

/** What the session writes each cycle: a few lines, `status: draft` once. */
export const fileContent = "# Notes\nstatus: draft\n- plan the work\n- write the file\n- read it back\n- edit it\n"

/** What `edit_file` replaces, and with what. */
export const edit = { oldString: "status: draft", newString: "status: final" } as const

export const instructions = "You keep notes in the workspace. Plan first, then work through the plan."
export const prompt = "Write notes.md, read it back, mark it final and list the workspace."

/** A plan step's status, valet's names (deepagents says `completed` for `done`). */
export type Status = "pending" | "in_progress" | "done"

const steps = ["Write notes.md", "Read notes.md back", "Mark it final", "List the workspace"] as const

/**
 * The plan after `progress` steps are done (0 at the start): always 4 steps, the next one in progress, so every
 * `write_todos` call carries as much as the first.
 */
export const plan = (progress: number): ReadonlyArray<{ readonly content: string; readonly status: Status }> =>
  steps.map((content, i) => ({ content, status: i < progress ? "done" : i === progress ? "in_progress" : "pending" }))

/** One scripted tool call, in neutral terms. */
export type Call =
  | { readonly tool: "write_todos"; readonly todos: ReturnType<typeof plan> }
  | { readonly tool: "write_file"; readonly path: string; readonly content: string }
  | { readonly tool: "read_file"; readonly path: string }
  | { readonly tool: "edit_file"; readonly path: string; readonly oldString: string; readonly newString: string }
  | { readonly tool: "ls" }

/** The call the model makes at `step` (1-based) of an `n`-step session, or undefined at step n (the answer). */
export const callAt = (step: number, n: number): Call | undefined => {
  if (step >= n) return undefined
  if (step === 1) return { tool: "write_todos", todos: plan(0) }
  const cycle = Math.floor((step - 2) / 5)
  switch ((step - 2) % 5) {
    case 0:
      return { tool: "write_file", path: fileName, content: fileContent }
    case 1:
      return { tool: "read_file", path: fileName }
    case 2:
      return { tool: "edit_file", path: fileName, ...edit }
    case 3:
      return { tool: "ls" }
    default:
      return { tool: "write_todos", todos: plan(1 + (cycle % 3)) }
  }
}

/** What a checked session did and left (`check` of each side). */
export interface Check {
  readonly output: string
  readonly results: ReadonlyArray<{ readonly tool: string; readonly isError: boolean; readonly content: string }>
  readonly file: string
  readonly plan: string
}
