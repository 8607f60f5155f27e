/**
 * Tracing spans with the OpenTelemetry GenAI semantic conventions: one per agent run (`invoke_agent <agent>`), per
 * model call (`chat <model>`), per tool call (`execute_tool <tool>`) and per guardrail check (`guardrail <name>`),
 * nested as the run nests them. Effect's
 * tracer records them; `@effect/opentelemetry` (see `valet/Telemetry`) exports them. No prompt or answer text goes
 * into an attribute: only names, ids, counts and reasons.
 */
import { Cause, Effect, type Exit, type Tracer } from "effect"
import type * as Model from "../Model.js"
import type * as Tool from "../Tool.js"

/** The attributes of a run's span. */
export const runAttributes = (agent: string, architecture: string): Record<string, unknown> => ({
  "gen_ai.operation.name": "invoke_agent",
  "gen_ai.agent.name": agent,
  "valet.architecture": architecture
})

/** The name of a run's span. */
export const runSpanName = (agent: string): string => `invoke_agent ${agent}`

/** The model a client says it calls, when it says so (`OpenAiCompatible` and the vLLM pool do). */
const modelName = (model: Model.Service): string | undefined => {
  const name = (model as { readonly model?: unknown }).model
  return typeof name === "string" && name !== "" ? name : undefined
}

/** A model call inside its span; the usage and finish reason are set on the span when the response comes. */
export const modelCall = <E>(
  model: Model.Service,
  request: Model.Request,
  sessionId: string,
  step: string,
  call: Effect.Effect<Model.Response, E>
): Effect.Effect<Model.Response, E> => {
  const name = modelName(model)
  const attributes: Record<string, unknown> = {
    "gen_ai.operation.name": "chat",
    "valet.session_id": sessionId,
    "valet.step": step
  }
  if (name !== undefined) attributes["gen_ai.request.model"] = name
  if (request.maxTokens !== undefined) attributes["gen_ai.request.max_tokens"] = request.maxTokens
  if (request.temperature !== undefined) attributes["gen_ai.request.temperature"] = request.temperature
  if (request.topP !== undefined) attributes["gen_ai.request.top_p"] = request.topP
  if (request.n !== undefined && request.n !== 1) attributes["gen_ai.request.choice.count"] = request.n
  return Effect.useSpan(name !== undefined ? `chat ${name}` : "chat", { kind: "client", attributes }, (span) =>
    Effect.map(Effect.withParentSpan(call, span), (response) => {
      span.attribute("gen_ai.usage.input_tokens", response.usage.inputTokens)
      span.attribute("gen_ai.usage.output_tokens", response.usage.outputTokens)
      // GenAI semconv names (both are parts of `gen_ai.usage.input_tokens`); set only when the server reported them.
      if (response.usage.cachedInputTokens !== undefined) {
        span.attribute("gen_ai.usage.cache_read.input_tokens", response.usage.cachedInputTokens)
      }
      if (response.usage.cacheWriteTokens !== undefined) {
        span.attribute("gen_ai.usage.cache_creation.input_tokens", response.usage.cacheWriteTokens)
      }
      span.attribute("gen_ai.response.finish_reasons", response.choices.map((choice) => choice.finishReason))
      if (response.model !== "") span.attribute("gen_ai.response.model", response.model)
      if (response.id !== "") span.attribute("gen_ai.response.id", response.id)
      return response
    }))
}

/** A tool call inside its span. */
export const toolCall = <R>(
  call: Model.ToolCall,
  sessionId: string,
  execute: Effect.Effect<Tool.Result, never, R>
): Effect.Effect<Tool.Result, never, R> =>
  Effect.useSpan(`execute_tool ${call.name}`, {
    kind: "internal",
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": call.name,
      "gen_ai.tool.call.id": call.id,
      "valet.session_id": sessionId
    }
  }, (span) =>
    Effect.map(Effect.withParentSpan(execute, span), (result) => {
      if (result.isError) span.attribute("error.type", "tool_error")
      return result
    }))

/** What a guardrail's span says of its check: `pass`, `trip`, `rewrite` (a redactor's new text) or `fail`. */
export type GuardrailOutcome = "pass" | "trip" | "rewrite"

/** What a guardrail's span is about: the guardrail, where it ran, and for a tool guardrail the call and its side. */
export interface GuardrailAbout {
  readonly guardrail: string
  readonly kind: string
  readonly sessionId: string
  readonly tool?: { readonly name: string; readonly toolCallId: string; readonly phase: string } | undefined
}

/**
 * One guardrail's check inside its span (`guardrail <name>`, under the span in context: the run's, or a tool call's
 * for a tool guardrail), saying `valet.guardrail.outcome` (`pass` / `trip` / `rewrite`, or `fail` when the check
 * itself failed: its error's tag in `error.type`) and the trip's or rewrite's reason. A judge's model call nests
 * under it. The checked text is never an attribute (a reason names what was found, never the values).
 */
export const guardrailCheck = <A, E, R>(
  about: GuardrailAbout,
  check: Effect.Effect<A, E, R>,
  outcome: (verdict: A) => { readonly outcome: GuardrailOutcome; readonly reason?: string | undefined }
): Effect.Effect<A, E, R> => {
  const attributes: Record<string, unknown> = {
    "valet.guardrail.name": about.guardrail,
    "valet.guardrail.kind": about.kind,
    "valet.session_id": about.sessionId
  }
  if (about.tool !== undefined) {
    attributes["gen_ai.tool.name"] = about.tool.name
    attributes["gen_ai.tool.call.id"] = about.tool.toolCallId
    attributes["valet.guardrail.phase"] = about.tool.phase
  }
  return Effect.useSpan(`guardrail ${about.guardrail}`, { kind: "internal", attributes }, (span) =>
    Effect.withParentSpan(check, span).pipe(
      Effect.tapCause((cause) =>
        Effect.sync(() => {
          // An interruption (a trip elsewhere stopped this check) is no outcome of its own.
          if (Cause.hasInterruptsOnly(cause)) return
          span.attribute("valet.guardrail.outcome", "fail")
          const error = Cause.squash(cause)
          const tag = typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined
          span.attribute("error.type", typeof tag === "string" ? tag : "defect")
        })
      ),
      Effect.tap((verdict) =>
        Effect.sync(() => {
          const said = outcome(verdict)
          span.attribute("valet.guardrail.outcome", said.outcome)
          if (said.reason !== undefined) span.attribute("valet.guardrail.reason", said.reason)
        })
      )
    ))
}

/** Ends a span with its exit, on the clock in context (as `Effect.withSpan` does). */
export const end = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.clockWith((clock) => Effect.sync(() => span.end(clock.currentTimeNanosUnsafe(), exit)))
