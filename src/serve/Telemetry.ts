/**
 * Traces of agent runs, exported over OTLP/HTTP to any OpenTelemetry collector (Jaeger, Tempo, Honeycomb,
 * Langfuse, Phoenix…). valet's spans follow the OpenTelemetry GenAI semantic conventions:
 *
 * - `invoke_agent <agent>` per run and sub-agent run: `gen_ai.operation.name` = `invoke_agent`, `gen_ai.agent.name`,
 *   `valet.session_id`, `valet.architecture`; sub-agents' spans nest under their parent's;
 * - `chat <model>` per model call: `gen_ai.operation.name` = `chat`, `gen_ai.request.model` (when the client names
 *   it), `gen_ai.request.max_tokens` / `temperature` / `top_p` when set, then `gen_ai.usage.input_tokens`,
 *   `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens` / `cache_creation.input_tokens` when the
 *   server reported them, `gen_ai.response.finish_reasons`, `gen_ai.response.model`, `valet.step`;
 * - `execute_tool <tool>` per tool call: `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name`,
 *   `gen_ai.tool.call.id`.
 *
 * No prompt or answer text is put in an attribute. The spans are Effect's own, so any Effect tracer records them
 * (`@effect/opentelemetry` included); this module uses `effect/observability`'s OTLP exporter, which needs no
 * OpenTelemetry SDK. Model and tool call spans are made only when a tracer is installed: with Effect's built-in
 * tracer (which keeps spans nowhere) a run has its run span alone, so tracing costs nothing when it is off.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Telemetry from "valet/Telemetry"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Answer briefly." })
 *
 * // The run, its model calls and tool calls as spans, sent to an OTLP/HTTP collector (the base URL or the full
 * // `/v1/traces` one); what is left is flushed when the layer closes.
 * const traced = Agent.run(assistant, "2 + 2?").pipe(
 *   Effect.provide(ScriptedModel.layer(["4"])),
 *   Effect.provide(Telemetry.layerOtlp({ url: "http://127.0.0.1:4318", serviceName: "my-app" }))
 * )
 * ```
 *
 * @since 0.2.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { type Duration, Layer } from "effect"
import { type OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"

/**
 * Where and how to export.
 *
 * @since 0.2.0
 * @category options
 */
export interface OtlpOptions {
  /** The collector's traces endpoint, e.g. `http://127.0.0.1:4318/v1/traces`. */
  readonly url: string
  /** `service.name` of the resource (default `valet`). */
  readonly serviceName?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** How often batches are sent (default 5 s); whatever is left is sent when the layer closes. */
  readonly exportInterval?: Duration.Input | undefined
}

/**
 * The traces endpoint of a collector given by its base URL (`http://host:4318` → `…/v1/traces`) or in full.
 *
 * @since 0.2.0
 * @category utils
 */
export const tracesUrl = (url: string): string => {
  const trimmed = url.replace(/\/+$/, "")
  return trimmed.endsWith("/v1/traces") ? trimmed : `${trimmed}/v1/traces`
}

/**
 * A tracer exporting every span over OTLP/HTTP (JSON), with undici's HTTP client; flushed when the layer closes.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerOtlp = (options: OtlpOptions): Layer.Layer<OtlpExporter.Flusher> =>
  OtlpTracer.layer({
    url: tracesUrl(options.url),
    resource: { serviceName: options.serviceName ?? "valet" },
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
    ...(options.exportInterval !== undefined ? { exportInterval: options.exportInterval } : {})
  }).pipe(Layer.provide([OtlpSerialization.layerJson, NodeHttpClient.layerUndici]))
