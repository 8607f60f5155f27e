/**
 * `effect/ai` tools as valet tools: the JSON schema `effect/ai` derives for the model, and each call sent through
 * the toolkit's own `handle` (which decodes the parameters, runs the handler and encodes the result), so a tool
 * behaves the same in an `effect/ai` `Chat` and in a valet architecture.
 */
import { Cause, Effect, Option, Result, Stream } from "effect"
import type { Tool as AiTool, Toolkit } from "effect/ai"
import { Tool as AiToolModule } from "effect/ai"
import * as Tool from "../../../core/Tool.js"

/** The content a model reads for an encoded result: strings as they are, anything else as JSON. */
const contentOf = (encoded: unknown): string => (typeof encoded === "string" ? encoded : JSON.stringify(encoded) ?? "null")

const errorText = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error)
}

/** The valet tools of a toolkit whose handlers are in context. */
export const toolsOf = <Tools extends Record<string, AiTool.Any>>(
  toolkit: Toolkit.Toolkit<Tools>
): Effect.Effect<
  ReadonlyArray<Tool.Tool<AiTool.HandlerServices<Tools[keyof Tools]>>>,
  never,
  AiTool.HandlersFor<Tools>
> =>
  Effect.map(toolkit as Effect.Effect<Toolkit.WithHandler<Tools>, never, AiTool.HandlersFor<Tools>>, (withHandler) =>
    Object.values(withHandler.tools).map((tool: AiTool.Any) => {
      const name = tool.name as keyof Tools & string
      return Tool.fromDefinition<AiTool.HandlerServices<Tools[keyof Tools]>>({
        name,
        description: tool.description ?? "",
        parameters: AiToolModule.getJsonSchema(tool) as Record<string, unknown>,
        call: (argumentsText) => {
          const params = Tool.parseArguments(name, argumentsText)
          if (Result.isFailure(params)) return Effect.succeed({ content: `ERROR: ${params.failure}`, isError: true })
          return withHandler.handle(name, params.success as AiTool.ParametersEncoded<Tools[typeof name]>).pipe(
            // The last result is the final one (earlier ones are preliminary).
            Effect.flatMap((results) => Stream.runLast(results)),
            Effect.map((last): Tool.Outcome =>
              Option.match(last, {
                onNone: () => ({ content: `ERROR: tool "${name}" returned no result`, isError: true }),
                onSome: (result) => ({ content: contentOf(result.encodedResult), isError: result.isFailure })
              })
            ),
            Effect.catchCause((cause) =>
              Cause.hasInterruptsOnly(cause)
                ? Effect.failCause(cause as Cause.Cause<never>)
                : Effect.succeed({ content: `ERROR: tool "${name}" failed: ${errorText(cause)}`, isError: true })
            )
          ) as Effect.Effect<Tool.Outcome, never, AiTool.HandlerServices<Tools[keyof Tools]>>
        }
      })
    }))
