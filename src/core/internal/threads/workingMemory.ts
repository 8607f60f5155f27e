/**
 * Working memory: a document with a schema, per owner or per thread, shown to the model at the start of each turn
 * and replaced through a tool the turn gives the agent. Stored with the threads (`readMemory` / `writeMemory`).
 */
import { Effect, Result, Schema } from "effect"
import { formatIssue } from "../decode.js"
import * as Tool from "../../Tool.js"
import { ThreadStoreError } from "./model.js"

/** The tool's name: what the model calls to replace the document. */
export const toolName = "update_working_memory"

/**
 * A working memory: where it lives (`"owner"`: shared by the owner's threads; `"thread"`: this thread's), how it is
 * shown, and the tool that replaces it.
 */
export interface WorkingMemory {
  readonly scope: "owner" | "thread"
  /** The document as the model reads it (JSON of the encoded document), from what is stored or the initial one. */
  readonly show: (stored: unknown, key: string) => Effect.Effect<string, ThreadStoreError>
  /** The tool that replaces the document with `write`. */
  readonly tool: (write: (document: unknown) => Effect.Effect<void, ThreadStoreError>) => Tool.Tool
}

/** The key a working memory is stored under. */
export const keyOf = (scope: "owner" | "thread", owner: string, threadId: string): string =>
  scope === "owner" ? `owner:${owner}` : `thread:${threadId}`

export const make = <A, I>(
  schema: Schema.Codec<A, I>,
  options: { readonly initial: A; readonly scope?: "owner" | "thread" | undefined; readonly description?: string | undefined }
): WorkingMemory => {
  const decode = Schema.decodeUnknownResult(Schema.toCodecJson(schema))
  const encode = Schema.encodeSync(Schema.toCodecJson(schema))
  return {
    scope: options.scope ?? "thread",
    show: (stored, key) => {
      if (stored === undefined) return Effect.succeed(JSON.stringify(encode(options.initial)))
      const decoded = decode(stored)
      return Result.isSuccess(decoded)
        ? Effect.succeed(JSON.stringify(encode(decoded.success)))
        : Effect.fail(new ThreadStoreError({
          operation: "readMemory",
          message: formatIssue(`Threads: the working memory ${JSON.stringify(key)} does not fit its schema`, decoded.failure.issue, stored)
        }))
    },
    tool: (write) =>
      Tool.make({
        name: toolName,
        description: options.description ??
          "Replaces your working memory with the document given (the whole document, every field): what you want to " +
            "remember about the user and this conversation from one turn to the next.",
        parameters: schema,
        handler: (document: A) =>
          Effect.as(
            Effect.mapError(write(encode(document)), (error) => error.message),
            "Working memory updated."
          )
      })
  }
}
