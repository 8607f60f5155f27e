/**
 * The work every framework does in the tool-loop benchmarks, defined once: a scripted model that asks for the
 * tool `add({ a, b })` at steps 1..N-1 and answers with a 20-word text at step N; the tool returns a + b.
 */
export const finalText = Array.from({ length: 20 }, (_, i) => `word${i + 1}`).join(" ")

/** The arguments of the tool call at `step` (1-based). */
export const argsAt = (step: number): { readonly a: number; readonly b: number } => ({ a: step, b: 2 * step })

export const instructions = "You are a calculator. Use the add tool."
export const prompt = "Add the numbers."

/** Called on every mock model call that yields: the memory benchmark samples the heap there. */
export const hooks: { onYield: (() => void) | undefined } = { onYield: undefined }

/** Waits for the event loop once, as the memory benchmark's mock does on every call. */
export const yieldToEventLoop = (): Promise<void> =>
  new Promise((resolve) => {
    hooks.onYield?.()
    setTimeout(resolve, 0)
  })

/** Reads a framework's stream of parts to the end, as a client showing it would. */
export const readToEnd = async (parts: AsyncIterable<unknown>): Promise<void> => {
  for await (const _part of parts) {
    // every part is taken; none is kept
  }
}

/** One framework's implementation of the benchmark work. */
export interface Framework {
  readonly name: string
  /** Runs one agent to the end: `steps` model calls, `steps - 1` tool calls. Answers the final text. */
  readonly run: (steps: number, options: { readonly stream: boolean; readonly yieldPerCall: boolean }) => Promise<string>
}
